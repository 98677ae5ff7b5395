"""Fixtures that break a naive oracle (issue 12): each must get the verdict a serial reference would give.

Each adversarial case (fixtures/adversarial/*, see the fixture's README) names the score the tool deserves,
the criterion that decides it, the finding codes that must be there and those that must not. Cases decided by
an experiment that does not repeat per round run one round; cases decided by a parallel race run two (one
plain, one amplified). Each runs only the checks its assertions read (`--only`, as in test_adversarial.py): a
score of N reached needs every criterion of levels 1 to N, a score held at N by a failing criterion of level
N + 1 needs levels 1 to N and that one, and a 0 from corruption only the workload that corrupts. The spec-error
cases (fixtures/spec-errors/*) must be refused with exit status 2, naming the key and what was found, before any
parallel round runs.

These define "done" for serial reference runs, three-valued outcomes and per-path kill points: several fail
on a clirace without them, on purpose, and none is marked xfail (the three-valued outcome of a deadline kill and
the transformed output are judged from saved histories: see below CASES).
"""
from __future__ import annotations

import re
from typing import NamedTuple

import pytest

from ..conftest import FIXTURES, check_json, run_clirace
from .conftest import only_up_to

ONE_ROUND = ("--rounds", "1")
TWO_ROUNDS = ("--rounds", "2")
TIMEOUT = 180


class Case(NamedTuple):
    score: int
    criterion: str
    status: str
    present: tuple[str, ...] = ()  # finding codes that must be reported
    absent: tuple[str, ...] = ()  # finding codes that must never be reported
    corruption: bool | None = None
    extra: tuple[str, ...] = ONE_ROUND


CASES = {
    # The same tool staging through one fixed $TMPDIR file: another run's whole result is delivered.
    "process-fixed-tmp": Case(0, "no-silent-corruption", "fail", present=("CR131",), corruption=True,
                              extra=(*TWO_ROUNDS, "--only", "output")),
    # No lock at all; the contender fails only when run twice on the same state.
    "contender-not-repeatable": Case(0, "lock-excludes", "fail", present=("CR201",), corruption=False),
    # strace's when=N counts per thread: the kill must land on a write to config.json itself.
    "threaded-writer": Case(2, "atomic-config-writes", "fail", present=("CR602",), corruption=False,
                            extra=(*ONE_ROUND, *only_up_to(2, "atomic-config-writes"))),
    # Reads the config, then takes its O_EXCL lock: keys lost.
    "read-before-lock": Case(0, "no-silent-corruption", "fail", present=("CR111",), corruption=True,
                             extra=(*TWO_ROUNDS, "--only", "keys")),
    # Reads the config at start-up, then locks and reads it again (git's shape): the hazard is reported, no
    # key is lost even at the rendezvous; the lock file outlives SIGTERM (seen through a hold at the lock call).
    "startup-read-lock-left": Case(1, "lock-released-on-exit", "fail", present=("CR304", "CR701"),
                                   absent=("CR111",), corruption=False,
                                   extra=only_up_to(1, "lock-released-on-exit")),
    # Its lock is a fixed path outside every sandbox: reference runs side by side refuse each other, and the
    # lock experiments would too; run one at a time, it is plain level 2 (no spec error, release passes).
    "global-lock": Case(2, "lock-released-on-exit", "pass", absent=("CR301", "CR302", "CR303", "CR304"),
                        corruption=False),
}
# Judged from their saved histories in tests/unit/test_saved_verdicts.py, where only the judging differs from a live
# test's: process-reencodes (a transforming `process` is judged against its own serial output, first (stamped) line
# masked: 3) and slow-counter-deadline (increments killed at the deadline after they were applied are unknown,
# never phantom: 3).


@pytest.mark.e2e
@pytest.mark.timeout(TIMEOUT)
@pytest.mark.parametrize("name", list(CASES))
def test_oracle_fixture_gets_its_verdict(name):
    case = CASES[name]
    result = check_json(FIXTURES / "adversarial" / name / "clirace.yaml", "--seed", "1", *case.extra,
                        timeout=TIMEOUT - 10)
    statuses = {c["id"]: c["status"] for c in result["criteria"]}
    codes = {f["code"] for f in result["findings"]}
    got = {"score": result["score"], "corruption": result["corruption"], "criteria": statuses, "codes": sorted(codes)}
    assert statuses[case.criterion] == case.status, (case.criterion, got)
    assert set(case.present) <= codes, (case.present, got)
    assert not set(case.absent) & codes, (case.absent, got, result["findings"])
    if case.corruption is not None:
        assert result["corruption"] is case.corruption, got
    assert result["score"] == case.score, got


# name: what the refusal must name besides the key (patterns, case-insensitive)
SPEC_ERRORS = {
    # The file's top-level keys, so the user sees that clusters are kept in a list.
    "keys-not-readable": (r"\bapiVersion\b", r"\bkind\b", r"\bclusters\b"),
    # That read printed an empty value (and exited 0).
    "empty-read": (r"\bempty\b",),
}
KEY = re.compile(r"\bcliracek\w*")  # the README's key shape: `cliracek3`
PARALLEL_ROUND = re.compile(r"in parallel")  # the progress line of a parallel round ("round 1/3, 8 in parallel")


@pytest.mark.e2e
@pytest.mark.timeout(TIMEOUT)
@pytest.mark.parametrize("name", list(SPEC_ERRORS))
def test_spec_whose_invariant_fails_serially_is_refused(name):
    proc = run_clirace("check", FIXTURES / "spec-errors" / name / "clirace.yaml", "--format", "json", "--seed", "1",
                       timeout=TIMEOUT - 10)
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-2000:])
    assert "Traceback" not in proc.stderr
    assert KEY.search(proc.stderr), proc.stderr[-2000:]
    for pattern in SPEC_ERRORS[name]:
        assert re.search(pattern, proc.stderr, re.IGNORECASE), (pattern, proc.stderr[-2000:])
    assert not PARALLEL_ROUND.search(proc.stderr), proc.stderr[-2000:]


# spec (fixtures/spec-errors/lock-commands-misspelt): (the check it would have been judged by, the spec line, what the
# refusal must quote of the command and its usage error)
MISSPELT_LOCK_COMMANDS = {
    "park": ("lock-released-on-exit", 27, "confg set"),
    "hook": ("lock-released-on-exit", 26, "hodl --ready"),
    "error-command": ("lock-released-on-exit", 29, "queu claim"),
    "wait-option": ("lock-wait-timeout", 30, "--lock-timout 1000"),
}


@pytest.mark.e2e
@pytest.mark.timeout(90)
@pytest.mark.parametrize("name", list(MISSPELT_LOCK_COMMANDS))
def test_a_lock_command_that_fails_alone_is_a_spec_error_before_any_verdict(name):
    """Issue 23 item 8: each lock command the experiments run is first run alone; one refused with a usage error
    is the spec's error (exit 2, naming the line, the command, its exit code and its stderr), where the holder's
    left the lock criteria undecided, the error command's passed lock-released-on-exit, the wait option's left
    lock-wait-timeout undecided."""
    check, line, command = MISSPELT_LOCK_COMMANDS[name]
    spec = FIXTURES / "spec-errors" / "lock-commands-misspelt" / f"{name}.clirace.yaml"
    proc = run_clirace("check", spec, "--format", "json", "--seed", "1", "--rounds", "1", "--only", check, timeout=80)
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-2000:])
    assert "Traceback" not in proc.stderr and not proc.stdout.strip().startswith('{"criteria"')
    said = proc.stderr
    assert f"{name}.clirace.yaml:{line}:" in said, said[-2000:]
    assert command in said and "(exit 2; stderr: usage:" in said and "invalid choice" in said, said[-2000:]
    assert "release after" not in said and "asked to wait" not in said, said[-2000:]  # no experiment ran
