"""Shards of one check (`--shard K/N`) and their histories joined (`clirace judge H1 H2`), on literal histories:
which parts a shard runs, what a shard alone says of the others' parts, and which histories are refused."""
import dataclasses
import sys

import pytest

from clirace.checks._plan import gaps, held_to_plan
from clirace.checks.findings import PASS, UNKNOWN, Verdict
from clirace.cli.pipeline import _stages
from clirace.errors import HistoryError, UsageError
from clirace.history import Alone, Environment, History, KeysRound, Planned, RunOptions, shards

from .histories import inv


def shard_history(shard: str, rounds: tuple[int, ...], **environment) -> History:
    env = {"strace": True, "spec_sha256": "aa", "tool_sha256": "bb", "clirace_version": "1", "rounds": 4,
           "parallel": 2, **environment}
    reference = KeysRound(name="keys#0", round=0, workload="keys#0", serial=True, invocations=(inv("set-0"),))
    alone = Alone(name="alone-contender", command="contender", invocations=(inv("alone"),))
    parallel = [KeysRound(name="keys#0", round=r, workload="keys#0", invocations=(inv("set-0"), inv("set-1")))
                for r in rounds]
    return History(spec_path="tool.yaml", options=RunOptions(seed=7, shard=shard), environment=Environment(**env),
                   trials=[reference, alone, *parallel],
                   plan=(Planned("reference", "keys#0", 1, ("keys",)), Planned("reference", "lock.contender", 1,
                                                                              ("lock-excludes",)),
                         Planned("workloads", "keys#0", 4, ("keys",))))


def test_shard_words_are_k_of_n():
    assert shards.parse("2/3") == (2, 3)
    for bad in ("0/2", "3/2", "2", "a/b", "1/0", "1/1001"):
        with pytest.raises(UsageError, match="is not K/N"):
            shards.parse(bad)


def test_rounds_and_stages_are_divided_and_the_oracle_is_everywhere():
    assert [r for r in range(5) if shards.owns((1, 2), r)] == [0, 2, 4]
    assert [r for r in range(5) if shards.owns((2, 2), r)] == [1, 3]
    every = {"reference", "workloads", "lock-conflict", "lock-release", "lock-wait", "session", "atomic-config"}
    first, second = _stages(every, (1, 2)), _stages(every, (2, 2))
    assert first[:2] == second[:2] == [("reference",), ("workloads",)]
    rest = [s for s in _stages(every) if s not in first[:2]]
    assert sorted(first[2:] + second[2:]) == sorted(rest) and not set(first[2:]) & set(second[2:])


def test_joined_shards_hold_every_round_once_and_the_oracle_once():
    joined = shards.merge([shard_history("2/2", (1, 3)), shard_history("1/2", (0, 2))], ["b.json", "a.json"])
    rounds = sorted(t.round for t in joined.of(KeysRound) if not t.serial)
    assert rounds == [0, 1, 2, 3]
    assert len([t for t in joined.of(KeysRound) if t.serial]) == 1 and len(joined.of(Alone)) == 1
    assert joined.options.shard == "" and not gaps(joined)


def test_a_reference_pass_run_again_joins_with_the_pass_after_it_and_never_counts_for_the_plan():
    """A shard whose reference pass ran again (superseded, then the pass that counts): the first shard's copy
    judges, the superseded pass kept with the pass after it, and only the pass that counts is a planned record."""
    first, second = shard_history("1/2", (0, 2)), shard_history("2/2", (1, 3))
    stalled = dataclasses.replace(first.trials[0], superseded=True, invocations=(inv("set-0", None, timed_out=True),))
    first.trials.insert(0, stalled)
    joined = shards.merge([second, first], ["b.json", "a.json"])
    assert [t.superseded for t in joined.of(KeysRound) if t.serial] == [True, False] and not gaps(joined)
    again = dataclasses.replace(second, trials=[stalled, *second.trials])  # shard 2 ran it again, shard 1 did not
    joined = shards.merge([again, shard_history("1/2", (0, 2))], ["b.json", "a.json"])
    assert [t.superseded for t in joined.of(KeysRound) if t.serial] == [False], "shard 2's copy is not kept"
    only_superseded = dataclasses.replace(first, trials=[stalled])  # its second pass never ended: a gap
    assert [g.planned.part for g in gaps(only_superseded)] == ["keys#0", "lock.contender", "keys#0"]


def test_the_oracle_of_joined_shards_is_the_first_copy_that_answered():
    """Every shard runs the reference runs; the first shard's copy used to judge them all even when it gave no
    answer (silent twice) and another shard's did, which left the whole check undecided."""
    first, second = shard_history("1/2", (0, 2)), shard_history("2/2", (1, 3))
    silent_pass = dataclasses.replace(first.trials[0], invocations=(inv("set-0", None, timed_out=True),))
    silent_alone = dataclasses.replace(first.trials[1], invocations=(inv("alone", None, timed_out=True),))
    stalled = dataclasses.replace(first, trials=[dataclasses.replace(silent_pass, superseded=True), silent_pass,
                                                 silent_alone, *first.trials[2:]])
    joined = shards.merge([second, stalled], ["b.json", "a.json"])
    assert [t for t in joined.of(KeysRound) if t.serial] == [second.trials[0]], "shard 2's answered pass judges"
    assert joined.of(Alone) == [second.trials[1]]
    assert not gaps(joined)
    both = shards.merge([dataclasses.replace(second, trials=stalled.trials), stalled], ["b.json", "a.json"])
    assert [t.superseded for t in both.of(KeysRound) if t.serial] == [True, False]  # none answered: shard 1's, as before
    assert both.of(Alone) == [silent_alone]


def test_a_shard_alone_leaves_the_others_parts_undecided_and_says_where_they_are():
    alone = shard_history("1/2", (0, 2))
    [gap] = gaps(alone)
    assert "2 of 4 planned rounds" in gap.message() and "left to the other shards" in gap.message()
    verdict = held_to_plan(Verdict("keys", PASS, "every key survived", read=("keys: keys#0 (round 1)",)), alone)
    assert verdict.status is UNKNOWN and "clirace judge H1 H2" in verdict.hint


@pytest.mark.parametrize("what, change", [
    ("spec file", {"environment": {"spec_sha256": "other"}}),
    ("tool's files", {"environment": {"tool_sha256": "other"}}),
    ("clirace version", {"environment": {"clirace_version": "2"}}),
    ("seed", {"seed": 8}),
    ("number of shards", {"shard": "2/3"}),
])
def test_histories_of_different_checks_are_never_joined(what, change):
    other = shard_history("2/2", (1, 3), **change.get("environment", {}))
    if "seed" in change or "shard" in change:
        other = dataclasses.replace(other, options=dataclasses.replace(
            other.options, **{k: v for k, v in change.items() if k != "environment"}))
    with pytest.raises(HistoryError, match=f"its {what} differs"):
        shards.merge([shard_history("1/2", (0, 2)), other], ["a.json", "b.json"])


def test_the_same_shard_twice_and_a_whole_run_are_refused():
    with pytest.raises(HistoryError, match="is shard 1/2 again"):
        shards.merge([shard_history("1/2", (0, 2)), shard_history("1/2", (0, 2))], ["a.json", "b.json"])
    with pytest.raises(HistoryError, match="is not the history of a shard"):
        shards.merge([shard_history("1/2", (0, 2)), shard_history("", (0, 1, 2, 3))], ["a.json", "b.json"])


def test_fingerprints_change_with_the_spec_and_the_tool_script(tmp_path):
    spec, tool = tmp_path / "t.clirace.yaml", tmp_path / "tool.py"
    spec.write_text("version: 1\n")
    tool.write_text("print(1)\n")
    before = shards.fingerprints(spec, (sys.executable, str(tool)), tmp_path)
    tool.write_text("print(2)\n")
    after = shards.fingerprints(spec, (sys.executable, str(tool)), tmp_path)
    assert before[0] == after[0] and before[1] != after[1] and all(before)


def test_a_shard_needs_a_seed_and_no_budget(monkeypatch, capsys):
    from ..conftest import FIXTURES
    from .test_gate_and_baseline import run_main

    spec = str(FIXTURES / "loop" / "fixed.clirace.yaml")
    code, _, err = run_main(monkeypatch, capsys, "check", spec, "--shard", "1/2")
    assert code == 2 and "--shard needs --seed" in err
    code, _, err = run_main(monkeypatch, capsys, "check", spec, "--shard", "1/2", "--seed", "3", "--budget", "5")
    assert code == 2 and "--budget and --shard do not go together" in err
    code, _, err = run_main(monkeypatch, capsys, "check", spec, "--shard", "3/2", "--seed", "3")
    assert code == 2 and "is not K/N" in err
