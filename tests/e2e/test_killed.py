"""clirace SIGKILLed mid-run (a CI runner cancelling the job): nothing of the run outlives it for long.

Its direct children die with it (PR_SET_PDEATHSIG), the run's watchdog ends the rest (setsid() daemons) and
removes the run's folder, and when the watchdog was killed too, the next run's `sweep_leftovers()` does both.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from clirace.sandbox import stat_fields, sweep_leftovers

from ..conftest import FIXTURES, ROOT
from ..procs import wait_for, with_cmdline

SPEC = FIXTURES / "hostile" / "daemons.yaml"


def start_clirace(scope) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "clirace", "check", str(SPEC), "--no-strace"], cwd=ROOT,
                            env=scope.env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def run_folders(scope) -> list[str]:
    return sorted(name for name in os.listdir(scope.tmpdir) if name.startswith("clirace-"))


def setup_and_daemon(scope):
    """Once setup runs: {pid: cmdline} of the setup command (clirace's child) and of its daemon."""
    procs = [p for p in scope.processes() if "daemons.py setup" in p.cmdline]
    return procs if len(procs) == 2 else None


def kill_clirace(proc: subprocess.Popen) -> None:
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(10)


@pytest.mark.e2e
@pytest.mark.timeout(60)
def test_nothing_outlives_a_killed_clirace(no_leftovers):
    proc = start_clirace(no_leftovers)
    try:
        wait_for(lambda: setup_and_daemon(no_leftovers), 30, "setup and its daemon")
        assert len(run_folders(no_leftovers)) == 1
    finally:
        killed_at = time.monotonic()
        kill_clirace(proc)
    assert no_leftovers.leftovers(timeout=2.0) == [], "processes of the killed run are still alive after 2 s"
    print(f"all ended within {time.monotonic() - killed_at:.3f}s of the SIGKILL")
    sweep_leftovers(no_leftovers.tmpdir)  # what the next run does first
    assert run_folders(no_leftovers) == []


@pytest.mark.e2e
@pytest.mark.timeout(60)
def test_the_next_run_sweeps_what_the_watchdog_could_not(no_leftovers):
    proc = start_clirace(no_leftovers)
    try:
        both = wait_for(lambda: setup_and_daemon(no_leftovers), 30, "setup and its daemon")
        (setup,) = [p for p in both if stat_fields(p.pid)[1:2] == [str(proc.pid)]]  # clirace's own child
        (daemon,) = [p for p in both if p is not setup]
        watchdogs = with_cmdline(f"_watchdog.py {proc.pid} ")
        assert len(watchdogs) == 1, watchdogs
        for pid in watchdogs:
            os.kill(pid, signal.SIGKILL)
    finally:
        kill_clirace(proc)
    # The parent-death signal ends clirace's own child at once; the daemon is left for the sweep.
    wait_for(lambda: setup.pid not in {p.pid for p in no_leftovers.processes()}, 2, "the setup command to die")
    assert [p.pid for p in no_leftovers.processes()] == [daemon.pid]
    (folder,) = run_folders(no_leftovers)

    swept = sweep_leftovers(no_leftovers.tmpdir)
    assert daemon.pid in swept["killed"]
    assert swept["removed"] == [str(no_leftovers.tmpdir / folder)]
    assert no_leftovers.leftovers(timeout=2.0) == []
    assert run_folders(no_leftovers) == []


@pytest.mark.timeout(20)
def test_sweep_spares_live_and_finished_runs(tmp_path):
    from clirace._leftovers import OWNER, _start_time
    me, start = os.getpid(), _start_time(os.getpid())
    folders = {
        "clirace-live": f"{me} {start} running",  # this process: alive
        "clirace-killed": f"{me} 1 running",  # same pid, another start time: a killed run whose pid was reused
        "clirace-1-abcdef": None,  # no owner file: pid 1 from the name, alive
        "clirace-999999999-kept": "",  # no owner file, not empty: a run that ended, kept with --keep
        "clirace-999999999-empty": None,  # no owner file, empty: killed before its first sandbox
        "other-folder": f"{me} 1 running",  # not a clirace run folder
    }
    for name, owner in folders.items():
        (tmp_path / name).mkdir()
        if owner:
            (tmp_path / name / OWNER).write_text(owner + "\n")
        elif owner == "":
            (tmp_path / name / "counter-x").mkdir()
    swept = sweep_leftovers(tmp_path)
    assert sorted(swept["removed"]) == [str(tmp_path / "clirace-999999999-empty"), str(tmp_path / "clirace-killed")]
    assert sorted(os.listdir(tmp_path)) == ["clirace-1-abcdef", "clirace-999999999-kept", "clirace-live",
                                            "other-folder"]

