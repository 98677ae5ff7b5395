"""Adversarial fixtures whose verdict rests on how clirace judges what the tool did, judged from a real run's saved
history (tests/data/histories, recorded by its record.py) instead of a live check each: judging is what differs
between them, the experiments are the same. Each experiment and each way to fail it keeps a live test:
- how the tool answers a lock experiment (its exit status, its error text, the lock file it leaves): the lock left
  on SIGTERM (CR304) in tests/e2e/test_levels.py (level 1) and test_oracle_fixtures.py (startup-read-lock-left);
  the contender's answer (CR203, CR205, CR206 here) in test_levels.py (levels 0 and 1 fail
  lock-error-structured, level 2 passes it);
- increments of a parallel round killed at their deadline after they were applied (slow-counter-deadline: unknown,
  a bound, never CR102 phantom): the kill at the deadline, by SIGTERM and by SIGKILL, in tests/e2e/test_hostile.py,
  a counter losing increments (CR101) in test_levels.py (level 0) and test_adversarial.py (tight-counter);
- outputs that transform their input, judged against the same input's serial output with what differs between two
  serial runs masked (process-reencodes: 3): the same tool with a shared staging file (CR131) in
  tests/e2e/test_oracle_fixtures.py (process-fixed-tmp), the output workload of every level in test_levels.py."""
from __future__ import annotations

import importlib.util
import json

import pytest

from clirace.cli.pipeline import judge
from clirace.history import CounterRound, History, OutputRound
from clirace.report.jsonout import as_dict

from ..conftest import ROOT

HISTORIES = ROOT / "tests" / "data" / "histories"

# saved history name: (expected score, deciding criterion, its status, other criteria whose status the case is
# about), as tests/e2e/test_adversarial.py asserts of a live check
CASES = {
    "adversarial-lock-left-on-sigterm": (1, "lock-released-on-exit", "fail", {"lock-error-structured": "pass"}),
    "adversarial-lock-held-exit-zero": (1, "lock-error-structured", "fail", {}),
    "adversarial-retry-after-string": (1, "lock-error-structured", "fail", {"lock-released-on-exit": "pass"}),
    "adversarial-json-error-wrong-code": (1, "lock-error-structured", "fail", {"lock-released-on-exit": "pass"}),
    "adversarial-slow-counter-deadline": (3, "no-silent-corruption", "pass", {}),
    "adversarial-process-reencodes": (3, "no-silent-corruption", "pass", {}),
}
# saved history name: finding codes that must never be reported (as tests/e2e/test_oracle_fixtures.py asserts)
ABSENT = {"adversarial-slow-counter-deadline": ("CR101", "CR102"), "adversarial-process-reencodes": ("CR131", "CR132")}


def _record_script():
    spec = importlib.util.spec_from_file_location("record", HISTORIES / "record.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


RECORD = _record_script()


def test_every_saved_history_is_judged_here():
    assert sorted(RECORD.RECORDED) == sorted(CASES) == sorted(json.loads(RECORD.DIGESTS.read_text()))


@pytest.mark.parametrize("name", list(CASES))
def test_a_saved_history_of_an_adversarial_fixture_gets_its_score(name):
    score, criterion, status, others = CASES[name]
    history = History.load(HISTORIES / f"{name}.json")
    fixture, _options = RECORD.RECORDED[name]
    # A fixture that changed since the recording: record.py must run again, or this judges an old tool.
    assert json.loads(RECORD.DIGESTS.read_text())[name] == RECORD.fixture_digest(fixture), \
        f"fixtures/{fixture} changed since {name}.json was recorded: run tests/data/histories/record.py {name}"
    result = as_dict(judge(history))
    statuses = {c["id"]: c["status"] for c in result["criteria"]}
    assert statuses[criterion] == status, (criterion, result["criteria"])
    for other, wanted in others.items():
        assert statuses[other] == wanted, (other, result["criteria"])
    assert not set(ABSENT.get(name, ())) & {f["code"] for f in result["findings"]}, result["findings"]
    assert result["score"] == score, statuses


def test_the_saved_slow_counter_had_increments_killed_at_their_deadline_in_its_round():
    """What that case is about must be in its record: a parallel round's increment killed at its deadline (an
    unknown), with the counter read after the round; else a pass would prove nothing about it."""
    history = History.load(HISTORIES / "adversarial-slow-counter-deadline.json")
    rounds = [t for t in history.of(CounterRound) if not t.serial]
    killed = [i for t in rounds for i in t.invocations if i.label.startswith("inc-") and i.timed_out]
    assert rounds and killed, [(t.name, [(i.label, i.ending()) for i in t.invocations]) for t in rounds]
    assert all(t.invocation("read-after").ok for t in rounds), rounds


def test_the_saved_reencoding_outputs_differ_between_two_serial_runs_and_hold_no_input_text():
    """What that case is about must be in its record: each input's two serial outputs differ (the stamped first
    line), so they match only with it masked; and no output holds its input's text, which a naive oracle looks
    for."""
    history = History.load(HISTORIES / "adversarial-process-reencodes.json")
    serial = [t for t in history.of(OutputRound) if t.serial]
    assert len(serial) == 2, serial
    first, second = ({run.marker: run.produced for run in t.runs.values()} for t in serial)
    assert first and first.keys() == second.keys() and all(first[m] and first[m] != second[m] for m in first)
    produced = [run.produced for t in history.of(OutputRound) for run in t.runs.values()]
    assert all(run.produced and run.marker not in run.produced for t in history.of(OutputRound)
               for run in t.runs.values()), produced
