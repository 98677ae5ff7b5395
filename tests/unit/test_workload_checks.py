"""Workload checks on literal histories: each invariant, its finding code, and the rates over rounds."""
import dataclasses

import pytest

from clirace.checks import claim, counter, keys, output
from clirace.history import ClaimRound, ConfigSnapshot, CounterRound, KeysRound, OutputRound, OutputRun, Rendezvous
from clirace.history.vocab import ConfigFormat

from .histories import history, inv


def counter_trial(start, final, oks, round_=0, extra=()):
    invs = [inv(f"inc-{i}", 0 if ok else 4) for i, ok in enumerate(oks)]
    return CounterRound(round=round_, invocations=(*invs, *extra, inv("read-after", stdout=f"{final}\n")), start=start)


def test_counter_passes_when_every_success_counted():
    v = counter.check(history(counter_trial(0, 2, [True, True, False])))
    assert v.status == "pass" and not v.findings


def test_counter_lost_increment():
    v = counter.check(history(counter_trial(5, 6, [True, True, True])))
    assert v.status == "fail"
    assert [f.code for f in v.findings] == ["CR101"]
    assert v.findings[0].args["lost"] == 2


def test_counter_phantom_increment():
    v = counter.check(history(counter_trial(0, 3, [True, False, False])))
    assert [f.code for f in v.findings] == ["CR102"]


def test_counter_reports_nondeterministic_rounds():
    v = counter.check(history(counter_trial(0, 2, [True, True]), counter_trial(0, 1, [True, True], round_=1)))
    assert v.status == "fail"
    assert "1 of 2 rounds" in v.summary and "non-deterministic: round 2 failed, the others passed" in v.summary


def test_counter_error_round_is_unknown_not_pass():
    broken = CounterRound(start=0, error="setup command failed")
    v = counter.check(history(broken))
    assert v.status == "unknown"


def test_no_workload_is_not_applicable():
    assert counter.check(history()).status == "not_applicable"


def keys_trial(text, oks, fmt="json", round_=0):
    ks = {f"set-{i}": (f"k{i}", f"v{i}") for i in range(len(oks))}
    invs = tuple(inv(label, 0 if ok else 1) for label, ok in zip(ks, oks, strict=False))
    return KeysRound(round=round_, invocations=invs, keys=ks,
                     config=ConfigSnapshot("c", ConfigFormat(fmt), "{key}", text))


def test_keys_lost_write():
    v = keys.check(history(keys_trial('{"k0": "v0"}', [True, True])))
    assert [f.code for f in v.findings] == ["CR111"]
    assert v.findings[0].args["keys"] == "k1"


def test_keys_lost_at_a_rendezvous_shows_where_each_was_held():
    """A lost update at a rendezvous carries the interleaving as its evidence: where each writer was stopped
    (the traced call), and the order they went on in."""
    met = Rendezvous(paths=("home/c.json",), calls="close", aimed="the end of its reading of its state",
                     arrived={"set-1": 0.2, "set-0": 0.1}, stopped_at={"set-0": "close(3<{sandbox}/home/c.json>) = 0",
                                                                      "set-1": "close(3<{sandbox}/home/c.json>) = 0"},
                     released_after=0.3, why_released="all arrived")
    trial = dataclasses.replace(keys_trial('{"k1": "v1"}', [True, True], round_=2), amplified=True, rendezvous=met)
    found = keys.check(history(trial)).findings[0]
    assert found.code == "CR111" and found.evidence.trial.endswith("(round 3 at a rendezvous)")
    assert "set-0 stopped at close(3<{sandbox}/home/c.json>) = 0" in found.evidence.observed
    assert "in arrival order (set-0, set-1)" in found.evidence.observed


def snapshot(text, fmt="json"):
    return ConfigSnapshot("c", ConfigFormat(fmt), "{key}", text)


def test_keys_that_existed_before_the_round_and_vanished_are_named():
    """The field notes' wipe: a reader saw the file empty during another's rewrite and wrote back its own key."""
    wiped = dataclasses.replace(keys_trial('{"k1": "v1"}', [True, True]),
                                before=snapshot('{"theme": "dark", "ui": {"font": "x"}, "k9": "e0"}'))
    v = keys.check(history(wiped))
    assert [f.code for f in v.findings] == ["CR111", "CR114"]
    assert v.findings[1].args == {"count": 3, "keys": "k9, theme, ui"}  # ui.font goes with ui
    assert v.findings[1].severity == "corruption"
    assert "3 key(s) that existed before the round wiped (k9, theme, ui)" in v.summary


def test_keys_from_before_that_the_tool_drops_alone_are_not_a_race():
    serial = dataclasses.replace(keys_trial('{"k0": "v0"}', [True]), serial=True, before=snapshot('{"draft": "1"}'))
    parallel = dataclasses.replace(keys_trial('{"k0": "v0", "k1": "v1"}', [True, True]),
                                   before=snapshot('{"draft": "1", "theme": "dark"}'))
    v = keys.check(history(serial, parallel))
    assert [(f.code, f.args["keys"]) for f in v.findings] == [("CR114", "theme")]
    kept = dataclasses.replace(parallel, config=snapshot('{"k0": "v0", "k1": "v1", "theme": "dark"}'))
    v = keys.check(history(serial, kept))
    assert v.status == "pass" and "and the 1 key(s) that existed before their round, were present" in v.summary


def test_a_key_written_just_before_the_round_is_read_back_with_the_round():
    ks = {"set-0": ("k0", "v0")}
    wrote_earlier = (inv("earlier-0"), inv("set-0"), inv("get-0", stdout="v0"))
    gone = KeysRound(invocations=(*wrote_earlier, inv("get-earlier-0", 0, stdout="")), keys=ks,
                     earlier={"earlier-0": ("k1", "e0")})
    v = keys.check(history(gone))
    assert [(f.code, f.args["keys"]) for f in v.findings] == [("CR114", "k1")]
    kept = dataclasses.replace(gone, invocations=(*wrote_earlier, inv("get-earlier-0", 0, stdout="e0")))
    assert keys.check(history(kept)).status == "pass"
    refused = dataclasses.replace(gone, invocations=(inv("earlier-0", 1), *wrote_earlier[1:]))
    assert keys.check(history(refused)).status == "pass"  # it never existed


def test_keys_failed_writer_may_be_missing():
    assert keys.check(history(keys_trial('{"k0": "v0"}', [True, False]))).status == "pass"


def test_keys_torn_config():
    v = keys.check(history(keys_trial('{"k0": "v', [True])))
    assert [f.code for f in v.findings] == ["CR113"]


def test_keys_stale_value_in_ini():
    v = keys.check(history(keys_trial("[DEFAULT]\nk0 = old\n", [True], fmt="ini")))
    assert [f.code for f in v.findings] == ["CR112"]


def test_keys_read_command_variant():
    t = KeysRound(invocations=(inv("set-0"), inv("get-0", 1)), keys={"set-0": ("k0", "v0")})
    assert [f.code for f in keys.check(history(t)).findings] == ["CR111"]


def test_a_key_read_back_empty_with_exit_0_is_lost_not_stale():
    t = KeysRound(invocations=(inv("set-0"), inv("get-0", 0, stdout="\n")), keys={"set-0": ("k0", "v0")})
    assert [f.code for f in keys.check(history(t)).findings] == ["CR111"]


@pytest.mark.parametrize("printed", ["[]", "{}", "null", " [] \n"])
def test_a_read_printing_empty_json_for_a_key_says_it_is_gone_not_stale(printed):
    t = KeysRound(invocations=(inv("set-0"), inv("get-0", 0, stdout=printed)), keys={"set-0": ("k0", "v0")})
    assert [f.code for f in keys.check(history(t)).findings] == ["CR111"]


def test_a_writer_killed_at_its_deadline_may_have_written_or_not():
    killed = inv("set-1", None, timed_out=True)
    absent = KeysRound(invocations=(inv("set-0"), killed), keys={"set-0": ("k0", "v0"), "set-1": ("k1", "v1")},
                       config=ConfigSnapshot("c", ConfigFormat.JSON, "{key}", '{"k0": "v0"}'))
    assert keys.check(history(absent)).status == "pass"
    present = dataclasses.replace(absent, config=ConfigSnapshot("c", ConfigFormat.JSON, "{key}", '{"k0": "v0", "k1": "v1"}'))
    assert keys.check(history(present)).status == "pass"
    wrong = dataclasses.replace(absent, config=ConfigSnapshot("c", ConfigFormat.JSON, "{key}", '{"k0": "v0", "k1": "v0"}'))
    assert [f.code for f in keys.check(history(wrong)).findings] == ["CR112"]


def claim_trial(outputs, remaining=None, round_=0):
    invs = [inv(f"claim-{i}", 0 if out else 3, stdout=f"claimed {out}\n" if out else "") for i, out in enumerate(outputs)]
    if remaining is not None:
        invs.append(inv("list-after", stdout="".join(f"{item}\n" for item in remaining)))
    return ClaimRound(round=round_, invocations=tuple(invs), items=("a", "b", "c"), pattern=r"^claimed (\S+)$")


def test_claim_double():
    v = claim.check(history(claim_trial(["a", "a", "b"], remaining=["c"])))
    assert [f.code for f in v.findings] == ["CR121"]


def test_claim_lost_item():
    v = claim.check(history(claim_trial(["a", None, None], remaining=["b"])))
    assert [f.code for f in v.findings] == ["CR122"]
    assert v.findings[0].args["items"] == "c"


def test_claim_all_good():
    assert claim.check(history(claim_trial(["a", "b", None], remaining=["c"]))).status == "pass"


def output_trial(produced):
    runs = {f"out-{i}": OutputRun(f"m{i}", f"/o{i}", produced=p) for i, p in enumerate(produced)}
    return OutputRound(invocations=tuple(inv(label) for label in runs), runs=runs)


def test_output_clobbered_names_the_other_run():
    v = output.check(history(output_trial(["m1 result", "m1 result"])))
    assert [f.code for f in v.findings] == ["CR131"]
    assert v.findings[0].args["found"] == "out-1's result"


def test_output_missing():
    assert [f.code for f in output.check(history(output_trial([None, "m1"]))).findings] == ["CR132"]


def test_counter_with_no_successful_increment_is_unknown_not_a_vacuous_pass():
    v = counter.check(history(counter_trial(0, 0, [False, False, False])))
    assert v.status == "unknown" and "never exercised" in v.summary


def test_lock_held_with_exit_zero_is_a_refusal_not_a_lost_increment():
    refused = '{"ok": false, "error": {"code": "LOCK_HELD", "retry_after_ms": 100}}'
    invs = (inv("inc-0", 0, stdout="1"), inv("inc-1", 0, stdout=refused), inv("inc-2", 0, stdout=refused),
            inv("read-after", stdout="1\n"))
    v = counter.check(history(CounterRound(invocations=invs, start=0)))
    assert v.status == "pass"


def test_summaries_total_every_failed_round_not_the_first_rounds_figure():
    rounds = [keys_trial('{"k0": "v0"}', [True, True, True]),
              keys_trial('{"k0": "v0", "k1": "v1"}', [True, True, True], round_=1)]
    assert keys.check(history(*rounds)).summary.startswith(
        "lost 3 of 6 keys written by invocations that exited 0 in 2 of 2 rounds")
    doubled, lost = claim_trial(["a", "a", "b"], remaining=["c"]), claim_trial(["a", None, None], remaining=[], round_=1)
    assert claim.check(history(doubled, lost)).summary.startswith(
        "1 item(s) claimed more than once; 2 item(s) neither claimed nor left in the queue in 2 of 2 rounds")
    assert output.check(history(output_trial(["m1 result", "m1 result"]))).summary.startswith(
        "1 successful run(s) ended with another run's output or none of its own input in 1 of 1 rounds")


def test_ini_without_sections_or_with_colons_in_keys_is_read_not_called_torn():
    from clirace.spec.configfile import Unparseable, lookup, parse
    npmrc = parse("@cliracek0:registry=https://v0.example/\n; comment\n", "ini")
    assert lookup(npmrc, "@cliracek0:registry", "ini") == "https://v0.example/"
    gitconfig = parse("[user]\n\tname = x\n[clirace]\n\tcliracek0 = v0\n", "ini")
    assert lookup(gitconfig, "clirace.cliracek0", "ini") == "v0"
    pipconf = parse("[global]\ntimeout: 60\nindex-url = https://x/\n", "ini")
    assert lookup(pipconf, "global.timeout", "ini") == "60"
    assert keys.check(history(keys_trial("k0 = v0\nk1 = v1\n", [True, True], fmt="ini"))).status == "pass"
    for torn in ("", "[clirace\nk0 = v0\n"):
        try:
            parse(torn, "ini")
        except Unparseable:
            continue
        raise AssertionError(f"{torn!r} parsed")


def test_a_pass_says_how_many_invocations_were_refused():
    v = counter.check(history(counter_trial(0, 2, [True, True, False])))
    assert v.status == "pass"
    assert "; 1 of 3 invocations were refused or failed (e.g. inc-2: exit 4; printed nothing)" in v.summary, v.summary
    assert v.summary.endswith("a race losing an update in at least 99% of rounds would have shown with probability "
                              ">= 99%"), v.summary  # one round: a weak bound, and it says so
    assert "were refused or failed" not in counter.check(history(counter_trial(0, 2, [True, True]))).summary


def test_a_key_may_hold_its_value_wrapped_but_not_another_runs():
    wrapped = keys_trial('{"k0": "https://v0.example/", "k1": "https://v1.example/"}', [True, True])
    assert keys.check(history(wrapped)).status == "pass"
    swapped = keys_trial('{"k0": "https://v1.example/", "k1": "https://v1.example/"}', [True, True])
    v = keys.check(history(swapped))
    assert [f.code for f in v.findings] == ["CR112"] and v.findings[0].args["key"] == "k0"
    merged = keys_trial('{"k0": "v0v1", "k1": "v1"}', [True, True])  # two writes ran together into k0
    v = keys.check(history(merged))
    assert [f.code for f in v.findings] == ["CR112"] and v.findings[0].args["found"] == "v0v1"


def test_outputs_that_hold_no_input_at_all_are_undecided_not_clobbered():
    v = output.check(history(output_trial(["H4sIAAAA", "H4sIAAAB"])))  # e.g. gzip: no input's text survives
    assert v.status == "unknown" and not v.findings, v
    assert "no output holds any input's text" in v.summary and "as it is" in v.hint
    # One output with another run's input is still clobbering, even if the other holds nothing readable.
    assert [f.code for f in output.check(history(output_trial(["H4sIAAAA", "m0 result"]))).findings] == ["CR131", "CR131"]


def test_a_counter_read_through_its_value_pattern():
    # 'v2 count: 5' read as "the first integer" is 2 before and after: 8 lost increments that never were.
    reads = (inv("read-before", stdout="tool v2 count: 5\n"), inv("read-after", stdout="tool v2 count: 5\n"))
    plain = CounterRound(invocations=reads)
    assert counter.read_counter(plain, "read-after") == 2
    patterned = CounterRound(invocations=reads, pattern=r"count: (\d+)")
    assert counter.read_counter(patterned, "read-after") == 5


def test_an_increment_killed_at_its_deadline_is_a_bound_not_a_phantom():
    killed = inv("inc-2", None, timed_out=True, ended=10.0)
    for final in (2, 3):  # it may or may not have counted
        assert counter.check(history(counter_trial(0, final, [True, True], extra=[killed]))).status == "pass"
    assert [f.code for f in counter.check(history(counter_trial(0, 4, [True, True], extra=[killed]))).findings] == ["CR102"]
    assert [f.code for f in counter.check(history(counter_trial(0, 1, [True, True], extra=[killed]))).findings] == ["CR101"]


def test_a_claim_killed_at_its_deadline_may_hold_an_unlisted_item():
    killed = inv("claim-2", None, timed_out=True)
    t = ClaimRound(invocations=(inv("claim-0", stdout="claimed a\n"), inv("claim-1", stdout="claimed b\n"), killed,
                                inv("list-after", stdout="")), items=("a", "b", "c"), pattern=r"^claimed (\S+)$")
    assert claim.check(history(t)).status == "pass"


def test_a_key_whose_read_back_never_answered_is_unknown_not_lost():
    """Jepsen's set checker: never read is unknown. A get killed at its deadline, or refused by the lock, says
    nothing about the key; a get that fails otherwise is the tool's answer (no such key)."""
    ks = {"set-0": ("k0", "v0"), "set-1": ("k1", "v1")}
    for silent in (inv("get-1", None, timed_out=True), inv("get-1", 4, stdout='{"error": {"code": "LOCK_HELD"}}')):
        t = KeysRound(invocations=(inv("set-0"), inv("set-1"), inv("get-0", stdout="v0"), silent), keys=ks)
        v = keys.check(history(t))
        assert v.status == "unknown" and not v.findings, v
        assert "1 key(s) could not be read back" in v.summary and "k1: get-1" in v.summary
    lost = KeysRound(invocations=(inv("set-0"), inv("set-1"), inv("get-0", 1), inv("get-1", None, timed_out=True)),
                     keys=ks)
    v = keys.check(history(lost))
    assert v.status == "fail" and v.findings[0].code == "CR111" and v.findings[0].args["keys"] == "k0"  # not k1


def test_the_result_counts_the_parallel_commands_that_failed_loudly():
    from clirace.cli.pipeline import judge, loud_failures

    mostly_refused = counter_trial(0, 2, [True, False, False, True, False])
    serial = dataclasses.replace(counter_trial(0, 1, [True, False]), serial=True)  # the reference run: not counted
    result = judge(history(serial, mostly_refused))
    assert any(note.startswith("3 of 5 parallel commands failed loudly (e.g. inc-1: exit 4") for note in result.notes)
    assert loud_failures(history(counter_trial(0, 2, [True, True]))) is None
