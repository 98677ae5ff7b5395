"""Adversarial fixtures whose verdict rests on how the tool answers a lock experiment (its exit status, its error
text, the lock file it leaves), judged from a real run's saved history (tests/data/histories, recorded by its
record.py) instead of a live check each: judging is what differs between them, the experiments are the same.
Each experiment and each way to fail it keeps a live test: the lock left on SIGTERM (CR304) in
tests/e2e/test_levels.py (level 1) and test_oracle_fixtures.py (startup-read-lock-left); the contender's answer
(CR203, CR205, CR206 here) in test_levels.py (levels 0 and 1 fail lock-error-structured, level 2 passes it)."""
from __future__ import annotations

import importlib.util
import json

import pytest

from clirace.cli.pipeline import judge
from clirace.history import History
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
}


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
    assert result["score"] == score, statuses
