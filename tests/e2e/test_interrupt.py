"""Stopping a running `clirace check`: a real Ctrl-C on its terminal, or SIGTERM.

The target (fixtures/hostile/slow.yaml) has increments that run for 60 s, each with a setsid() child, and
ignore SIGTERM. The first one runs alone, in the reference run that comes before any parallel round. Each test
waits until the run is provably mid-flight (the progress line says 'reference run' and the increment and its
child are alive), then stops it and checks: every child ended, the sandboxes removed (or kept and named, with
--keep), a partial result printed, exit 130 (SIGINT) or 143 (SIGTERM), within seconds.
"""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time

import pexpect
import pytest

from ..conftest import FIXTURES, ROOT
from ..procs import wait_for

SLOW = FIXTURES / "hostile" / "slow.yaml"
ALIVE = 2  # the reference run's first increment + its setsid() child
STOP_WITHIN = 10.0  # seconds from the signal to clirace's exit: one grace period plus the sweeps, with room


def mid_flight(scope):
    """Wait until the increment and its escaped child are both running."""
    wait_for(lambda: sum("slow.py incr" in p.cmdline for p in scope.processes()) >= ALIVE, 20,
             f"{ALIVE} target processes of the reference run")


def spawn(scope, *args):
    return pexpect.spawn(sys.executable, ["-m", "clirace", "check", str(SLOW), *args], env=scope.env(),
                         cwd=str(ROOT), encoding="utf-8", codec_errors="replace", timeout=30, dimensions=(50, 250))


def finish(child) -> tuple[str, float]:
    """Wait for the child's exit; returns everything it printed after the interrupt and how long it took."""
    started = time.monotonic()
    child.expect(pexpect.EOF, timeout=STOP_WITHIN + 10)
    child.close()
    return child.before, time.monotonic() - started


@pytest.mark.e2e
@pytest.mark.timeout(60)
def test_ctrl_c_ends_children_removes_sandboxes_and_prints_a_partial_result(no_leftovers):
    child = spawn(no_leftovers)
    child.expect(r"reference run")  # the live progress line: the parallel round has started
    mid_flight(no_leftovers)
    child.sendintr()
    printed, took = finish(child)
    assert child.exitstatus == 130, (child.exitstatus, child.signalstatus, printed)
    assert took < STOP_WITHIN, took
    assert "Traceback" not in printed
    assert "score 0/3" in printed and "Interrupted: this is a partial result" in printed, printed
    assert "children ended and sandboxes removed" in printed, printed
    assert os.listdir(no_leftovers.tmpdir) == [], "sandboxes left behind"
    assert no_leftovers.leftovers() == []


@pytest.mark.e2e
@pytest.mark.timeout(60)
def test_second_ctrl_c_does_not_cut_the_cleanup_short(no_leftovers):
    child = spawn(no_leftovers)
    child.expect(r"reference run")
    mid_flight(no_leftovers)
    child.sendintr()
    # The increments ignore SIGTERM and note it: once one has, clirace is in its grace period before SIGKILL.
    wait_for(lambda: list(no_leftovers.tmpdir.glob("clirace-*/*/home/sigterm-seen")), 10,
             "clirace to send SIGTERM to the increments")
    child.sendintr()
    printed, took = finish(child)
    assert child.exitstatus == 130, (child.exitstatus, printed)
    assert "stopping: ending children and removing sandboxes" in printed, printed
    assert "Traceback" not in printed
    assert os.listdir(no_leftovers.tmpdir) == []
    assert no_leftovers.leftovers() == []


@pytest.mark.e2e
@pytest.mark.timeout(60)
def test_ctrl_c_with_keep_keeps_the_sandboxes_and_says_where(no_leftovers):
    child = spawn(no_leftovers, "--keep")
    child.expect(r"reference run")
    mid_flight(no_leftovers)
    child.sendintr()
    printed, took = finish(child)
    assert child.exitstatus == 130, (child.exitstatus, printed)
    found = re.search(r"sandboxes kept in (\S+?)\.?\s", printed)
    assert found, printed
    kept = found.group(1)
    assert os.path.dirname(kept) == str(no_leftovers.tmpdir), kept
    (sandbox,) = [name for name in os.listdir(kept) if not name.startswith(".")]  # .*: clirace's own traces
    assert sandbox.startswith("counter-") and os.path.isdir(os.path.join(kept, sandbox, "home")), sandbox
    assert no_leftovers.leftovers() == []  # kept sandboxes, but no process


@pytest.mark.e2e
@pytest.mark.timeout(60)
def test_sigterm_ends_children_removes_sandboxes_and_prints_a_partial_result(no_leftovers):
    err_path = no_leftovers.tmpdir.parent / "stderr.txt"
    with open(err_path, "w") as err:
        proc = subprocess.Popen([sys.executable, "-m", "clirace", "check", str(SLOW), "--format", "json"],
                                stdout=subprocess.PIPE, stderr=err, text=True, env=no_leftovers.env(), cwd=ROOT)
    try:
        wait_for(lambda: "reference run" in err_path.read_text(), 20, "the progress line of the reference run")
        mid_flight(no_leftovers)
        proc.send_signal(signal.SIGTERM)
        started = time.monotonic()
        out, _ = proc.communicate(timeout=STOP_WITHIN + 10)
        took = time.monotonic() - started
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    stderr = err_path.read_text()
    assert proc.returncode == 143, (proc.returncode, stderr)
    assert took < STOP_WITHIN, took
    assert "Traceback" not in stderr
    assert "terminated; children ended and sandboxes removed" in stderr, stderr
    result = json.loads(out)
    assert result["interrupted"] is True and result["score"] == 0
    assert any(note.startswith("Interrupted") for note in result["notes"]), result["notes"]
    assert os.listdir(no_leftovers.tmpdir) == []
    assert no_leftovers.leftovers() == []
