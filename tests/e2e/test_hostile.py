"""Hostile targets (fixtures/hostile/*): clirace must finish in bounded time with a result that says what the
target did, exit 0 or 1, print no traceback, leave no process behind (not even a setsid() escapee), and leave
nothing in its TMPDIR or HOME.

Every spec has tool.timeout 2s, rounds 1 and parallel 4; `start: 0` lets the four increments run even when
the target's `get` misbehaves too. The serial reference run comes first: a target whose commands hang or
crash alone leaves the counter criterion indeterminate (and the parallel round still runs, to show that
clirace survives it); one whose commands exit with a failure, or print no count, alone is a spec error.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from ..conftest import FIXTURES, ROOT
from ..procs import with_cmdline

HOSTILE = FIXTURES / "hostile"


def run_check(scope, name: str, *args: str, deadline: float):
    """Run `clirace check` on a hostile spec; returns (process, wall seconds, JSON result or None, history)."""
    history = scope.tmpdir.parent / f"{name}.history.json"
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "clirace", "check", str(HOSTILE / f"{name}.yaml"),
                           "--history", str(history), *args], capture_output=True, text=True, errors="replace",
                          env=scope.env(), cwd=ROOT, timeout=deadline)
    wall = time.monotonic() - started
    print(f"{name}: exit {proc.returncode} in {wall:.1f}s")  # shown with -s / on failure: the figures
    as_json = "json" in args and proc.returncode in (0, 1)
    result = json.loads(proc.stdout) if as_json else None
    trials = json.loads(history.read_text())["trials"] if history.exists() else []
    return proc, wall, result, trials


def invocations(trials, prefix):
    """The parallel round's invocations (the serial reference run has its own)."""
    return [inv for trial in trials if not trial.get("serial") for inv in trial["invocations"]
            if inv["label"].startswith(prefix)]


def _brief(incs) -> list[tuple]:
    """What decides these expectations, per invocation (the whole records are too long for a failure message)."""
    return [(i["label"], i["timed_out"], i["exit_code"], i["signal"], round(i["ended"] - i["started"], 2),
             i.get("ended_by", ""), i["stdout"][:40], i["stderr"][:80]) for i in incs]


def expect_hang(incs, read):
    assert all(i["timed_out"] and i["signal"] == 15 for i in incs), incs  # SIGTERM at the deadline was enough
    # Ended at the deadline, not before it; the upper bound only says "not after a grace period as well" (the
    # signal says that already), loose enough for a busy CI machine.
    assert all(1.9 <= i["ended"] - i["started"] < 4.5 for i in incs), incs
    assert read["timed_out"]


def expect_ignore_term(incs, read):
    assert all(i["timed_out"] and i["signal"] == 9 for i in incs), incs  # SIGKILL after the grace period
    # The four are stopped together: one grace period for the batch, not one after another.
    assert max(i["ended"] - i["started"] for i in incs) < 4.5, incs
    assert read["timed_out"] and read["signal"] == 9


def expect_escape(incs, read):
    # Each exits 0 at once, but its setsid() child held stdout open: not finished by the deadline. (On a loaded
    # machine one may not even have exited by its 2 s deadline: ended by clirace then, timed out all the same.)
    assert all(i["timed_out"] and (i["exit_code"] == 0 or i["signal"] in (9, 15)) for i in incs), _brief(incs)
    assert any(i["exit_code"] == 0 for i in incs), incs
    assert read["exit_code"] == 0 and not read["timed_out"] and read["stdout"].strip() == "4", read


def expect_crash(incs, read):
    assert all(i["signal"] == 11 and i["exit_code"] is None for i in incs), incs
    assert read["signal"] == 6


# name: (seconds the whole run may take, no-silent-corruption's status, words its evidence must contain, expect_)
CASES = {
    "hang": (20, "indeterminate", "killed at its deadline after 2.0s", expect_hang),
    "ignore_term": (25, "indeterminate", "killed at its deadline after 3.0s", expect_ignore_term),
    "escape": (20, "indeterminate", "ended without saying whether it did its work", expect_escape),
    "crash": (20, "indeterminate", "killed by SIGSEGV", expect_crash),
}
# name: (seconds the run may take, words the spec error must contain): commands that fail alone, decidedly
SPEC_ERRORS = {
    "flood": (20, "did not print an integer (exit 0; stdout (104857600 bytes, first 65536 kept): xxxx"),
    "badutf8": (20, "did not print an integer (exit 0; stdout: \ufffd"),
    "badshebang": (20, "exit 127; stderr: clirace: cannot execute"),
}


@pytest.mark.e2e
@pytest.mark.timeout(60)
@pytest.mark.parametrize("name", sorted(CASES))
def test_hostile_target_gets_a_result_in_time(name, no_leftovers):
    deadline, status, words, expect = CASES[name]
    proc, wall, result, trials = run_check(no_leftovers, name, "--format", "json", deadline=deadline)
    assert proc.returncode in (0, 1), proc.stderr
    assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr, proc.stderr
    criterion = next(c for c in result["criteria"] if c["id"] == "no-silent-corruption")
    got = "indeterminate" if criterion["indeterminate"] else criterion["status"]
    assert got == status, criterion
    assert words in criterion["evidence"], criterion["evidence"]
    assert result["interrupted"] is False
    (read,) = invocations(trials, "read-after")
    incs = invocations(trials, "inc-")
    assert len(incs) == 4
    expect(incs, read)
    assert os.listdir(no_leftovers.tmpdir) == [], "sandboxes left behind"
    assert os.listdir(no_leftovers.home) == [], "clirace wrote into HOME"


@pytest.mark.e2e
@pytest.mark.timeout(60)
@pytest.mark.parametrize("name", sorted(SPEC_ERRORS))
def test_hostile_target_that_fails_alone_is_a_spec_error_in_time(name, no_leftovers):
    deadline, words = SPEC_ERRORS[name]
    proc, wall, _result, trials = run_check(no_leftovers, name, "--format", "json", deadline=deadline)
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr, proc.stderr
    assert "does not fit the tool" in proc.stderr and words in proc.stderr, proc.stderr
    assert "\x1b" not in proc.stderr and "\x00" not in proc.stderr, repr(proc.stderr[:300])
    assert json.loads(proc.stdout)["error"]["kind"] == "spec error"  # the JSON asked for says what went wrong
    assert invocations(trials, "inc-") == []  # nothing ran in parallel
    assert os.listdir(no_leftovers.tmpdir) == [], "sandboxes left behind"
    assert os.listdir(no_leftovers.home) == [], "clirace wrote into HOME"


@pytest.mark.e2e
@pytest.mark.timeout(30)
def test_tool_that_is_not_executable_is_a_spec_error(no_leftovers):
    assert not os.access(HOSTILE / "noexec.py", os.X_OK), "the fixture lost its mode 0644"
    proc, wall, _result, trials = run_check(no_leftovers, "noexec", deadline=15)
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert "Traceback" not in proc.stderr
    assert "noexec.yaml:" in proc.stderr and "not executable" in proc.stderr, proc.stderr
    assert proc.stdout == "" and trials == []
    assert os.listdir(no_leftovers.tmpdir) == []


@pytest.mark.e2e
@pytest.mark.timeout(30)
@pytest.mark.parametrize("cut_short", [False, True], ids=["scenario-raises", "cleanup-cut-short"])
def test_processes_end_when_a_scenario_raises(cut_short, no_leftovers, monkeypatch):
    """A scenario that raises with processes running (a bug in it), also when the trial's own cleanup is itself
    cut short (Ctrl-C landing in it): the run's sweep still ends them all and the workdir goes."""
    import tempfile

    from clirace.cli import pipeline
    from clirace.history import CounterRound, RunOptions
    from clirace.scenarios import _box
    from clirace.spec import load_spec

    from ..procs import wait_for

    def scenario(ctx):
        with ctx.box(CounterRound, "raises") as box:
            box.start("inc", ["incr"])  # slow.py: sleeps 60 s ignoring SIGTERM, with a setsid() child
            wait_for(lambda: sum("slow.py incr" in p.cmdline for p in no_leftovers.processes()) >= 2, 10,
                     "the increment and its child")
            raise RuntimeError("a bug in the scenario")

    def end_all_interrupted(self):
        raise KeyboardInterrupt()

    monkeypatch.setattr(tempfile, "tempdir", str(no_leftovers.tmpdir))
    monkeypatch.setattr(pipeline, "SCENARIOS", {"raises": scenario})
    if cut_short:
        monkeypatch.setattr(_box.Box, "end_all", end_all_interrupted)
    spec = load_spec(FIXTURES / "hostile" / "slow.yaml")
    if cut_short:
        with pytest.raises(KeyboardInterrupt):
            pipeline.run(spec, RunOptions(seed=1, strace=False))
    else:  # recorded on its trial, and the run goes on (STYLE: an experiment's failure is data, not an abort)
        result = pipeline.run(spec, RunOptions(seed=1, strace=False))
        (raised,) = [t for t in result.history.trials if t.name == "raises"]
        assert "RuntimeError: a bug in the scenario" in raised.error, raised.error
    assert no_leftovers.leftovers() == []
    assert os.listdir(no_leftovers.tmpdir) == []


def envclear_daemons(under) -> dict[int, str]:
    """Live processes left by fixtures/hostile/envclear.py for sandboxes under `under`, found by their command
    line (they have no environment for the marker oracle of tests/procs.py to read)."""
    return with_cmdline(f"clirace-hostile-envclear {under}")


@pytest.mark.e2e
@pytest.mark.timeout(60)
def test_a_daemon_that_cleared_its_environment_is_still_ended(no_leftovers):
    # The marker in the environment cannot find it; the clirace CLI adopts orphans (a child subreaper), so a
    # daemon whose parent exited becomes clirace's child and is ended with its trial.
    try:
        proc, _wall, _result, trials = run_check(no_leftovers, "envclear", "--format", "json", deadline=30)
        assert proc.returncode in (0, 1), proc.stderr
        assert "Traceback" not in proc.stderr
        assert len(invocations(trials, "inc-")) == 4
        deadline = time.monotonic() + 2  # a SIGKILLed process may take a moment to leave /proc
        while (left := envclear_daemons(no_leftovers.tmpdir)) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert left == {}, left
    finally:
        for pid in envclear_daemons(no_leftovers.tmpdir):  # never leave them to the next test
            os.kill(pid, 9)
