"""clirace SIGKILLed mid-run (a CI runner cancelling the job): nothing of the run outlives it for long.

Its direct children die with it (PR_SET_PDEATHSIG), the run's watchdog ends the rest (setsid() daemons; where the
trials have cgroups, also orphans that cleared their environment) and removes the run's folders, and when the
watchdog was killed too, the next run's `sweep_leftovers()` does both.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time

import pytest

from clirace.run import _cgroup, _ending, cleanup
from clirace.run.cleanup import sweep_leftovers
from clirace.run.procfs import alive, stat_fields

from ..conftest import FIXTURES, ROOT
from ..procs import wait_for, with_cmdline

SPEC = FIXTURES / "hostile" / "daemons.yaml"
ORPHANS = FIXTURES / "hostile" / "orphans.yaml"
CGROUPS, WHY_NOT = _cgroup.make(f"clirace-probe-{os.getpid()}", "/bin/sh")
if CGROUPS:
    _ending.remove_cgroup(CGROUPS.path)
needs_cgroups = pytest.mark.skipif(CGROUPS is None, reason=f"no cgroup for clirace here: {WHY_NOT}")


def start_clirace(scope, spec=SPEC, *args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "clirace", "check", str(spec), "--no-strace", *args], cwd=ROOT,
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
    # Any clirace starting on the machine meanwhile (another pytest-xdist worker's) sweeps every marked process of a
    # dead run too, and may end the daemon first (CI saw it once): then it is gone, not killed by this sweep. Run
    # alone, nothing else ends it (it sleeps until killed), so this sweep must have.
    assert daemon.pid in swept["killed"] or not alive(daemon.pid), swept
    assert str(no_leftovers.tmpdir / folder) in swept["removed"]  # and its private folder beside it
    assert no_leftovers.leftovers(timeout=2.0) == []
    assert os.listdir(no_leftovers.tmpdir) == []


@pytest.mark.timeout(20)
def test_the_sweep_spares_what_no_record_says_clirace_made_and_says_so(tmp_path):
    """Owner files and names are not evidence (a target or another user can make them): without a run record,
    nothing is acted on but an empty folder, and each is named in the sweep's notes."""
    from clirace.run.cleanup import OWNER, _start_time
    me, start = os.getpid(), _start_time(os.getpid())
    folders = {
        "clirace-live": f"{me} {start} running",  # this process: alive
        "clirace-killed": f"{me} 1 running",  # an owner file that says a dead run: no record, so not trusted
        "clirace-1-abcdef": None,  # no owner file: pid 1 from the name, alive
        "clirace-999999999-kept": "",  # no owner file, not empty: a run that ended, kept with --keep
        "clirace-999999999-0123456789abcdef": None,  # no owner file, empty: removing it changes nothing else
        "clirace-999999999-empty": None,  # empty, but not named as clirace names a run's folder: a user's own
        "clirace-cost-k1ww": None,  # a user's `mktemp -d /tmp/clirace-cost-XXXX`, empty while its check runs
        "clirace-999999999-said-nothing": "",  # an empty owner file, sandboxes in it
        "other-folder": f"{me} 1 running",  # not a clirace run folder
    }
    for name, owner in folders.items():
        (tmp_path / name).mkdir()
        if owner:
            (tmp_path / name / OWNER).write_text(owner + "\n")
        elif owner == "":
            (tmp_path / name / "counter-x").mkdir()
    (tmp_path / "clirace-999999999-said-nothing" / OWNER).write_text("")
    (tmp_path / ".clirace-999999999-0123456789abcdef.fedcba9876543210").mkdir(mode=0o300)  # empty, unlistable
    (tmp_path / ".clirace-1-live.0123").mkdir(mode=0o300)  # pid 1's: alive
    (tmp_path / "clirace-999999999-planted").symlink_to(tmp_path / "other-folder")
    swept = sweep_leftovers(tmp_path)
    assert sorted(swept["removed"]) == [str(tmp_path / name) for name in (
        ".clirace-999999999-0123456789abcdef.fedcba9876543210", "clirace-999999999-0123456789abcdef")]
    assert sorted(os.listdir(tmp_path)) == [
        ".clirace-1-live.0123", "clirace-1-abcdef", "clirace-999999999-empty", "clirace-999999999-kept",
        "clirace-999999999-planted", "clirace-999999999-said-nothing", "clirace-cost-k1ww", "clirace-killed",
        "clirace-live", "other-folder"]
    noted = " ".join(swept["left"])
    for name in ("clirace-killed", "clirace-live", "clirace-999999999-said-nothing", "clirace-999999999-planted",
                 "clirace-cost-k1ww"):
        assert f"{tmp_path / name}: " in noted, noted


@pytest.mark.e2e
@pytest.mark.timeout(60)
def test_a_forged_run_folder_with_owner_file_cgroup_link_and_fifo_is_left_alone(tmp_path):
    """Issue 24: a folder in TMPDIR named like a dead run's, whose owner file names itself as the run's cgroup,
    lists a victim (a `sleep` this test started) in its cgroup.procs and has a link to a canary as cgroup.kill;
    beside it, a run folder whose owner file is a FIFO, and a FIFO named like a run folder. The next run's sweep
    kills nothing, writes nothing, opens no FIFO, and says what it left alone."""
    tmpdir, canary = tmp_path / "tmp", tmp_path / "canary"
    tmpdir.mkdir()
    canary.write_text("the user's file\n")
    victim = subprocess.Popen(["sleep", "300"])
    try:
        forged = tmpdir / "clirace-999999999-forged"
        forged.mkdir()
        (forged / ".clirace-owner").write_text(f"999999999 1 running\nprivate {tmpdir}/.x\ncgroup {forged}\n")
        (forged / "cgroup.procs").write_text(f"{victim.pid}\n")
        (forged / "cgroup.events").write_text("populated 1\n")
        (forged / "cgroup.kill").symlink_to(canary)
        fifo_owner = tmpdir / "clirace-999999998-fifo"
        fifo_owner.mkdir()
        os.mkfifo(fifo_owner / ".clirace-owner")
        os.mkfifo(tmpdir / "clirace-999999997-x")
        fifo_cgroup = tmpdir / "clirace-999999996-cgroup"  # its "cgroup" has a FIFO for a list of processes
        fifo_cgroup.mkdir()
        (fifo_cgroup / ".clirace-owner").write_text(f"999999996 1 running\nprivate {tmpdir}/.y\ncgroup {fifo_cgroup}\n")
        os.mkfifo(fifo_cgroup / "cgroup.procs")
        swept = sweep_leftovers(tmpdir)
        assert victim.poll() is None, "the sweep killed a process clirace never started"
        assert canary.read_text() == "the user's file\n"
        assert sorted(os.listdir(tmpdir)) == ["clirace-999999996-cgroup", "clirace-999999997-x",
                                              "clirace-999999998-fifo", "clirace-999999999-forged"]
        assert victim.pid not in swept["killed"] and swept["removed"] == []
        noted = " ".join(swept["left"])
        assert all(f"{tmpdir / name}: " in noted for name in os.listdir(tmpdir)), noted
    finally:
        victim.kill()
        victim.wait()


@pytest.mark.e2e
@pytest.mark.timeout(60)
@pytest.mark.parametrize("owner, watchdog", [("deleted", "alive"), ("rewritten", "alive"), ("deleted", "killed"),
                                             ("rewritten", "killed")])
def test_a_run_whose_owner_file_was_deleted_or_rewritten_is_still_removed(owner, watchdog, no_leftovers):
    """Issue 24: the target deletes the run folder's owner file (or rewrites it to name pid 1 with its real start
    time), then clirace is SIGKILLed: its watchdog removes the run's folders all the same, or, killed too, the
    next run's sweep does, by the run's record."""
    from clirace.run.cleanup import OWNER, _start_time
    proc = start_clirace(no_leftovers)
    try:
        wait_for(lambda: setup_and_daemon(no_leftovers), 30, "setup and its daemon")
        (folder,) = run_folders(no_leftovers)
        path = no_leftovers.tmpdir / folder / OWNER
        if owner == "deleted":
            path.unlink()
        else:
            path.write_text(f"1 {_start_time(1)} running\nprivate /\ncgroup /\n")
        if watchdog == "killed":
            for pid in with_cmdline(f"_watchdog.py {proc.pid} "):
                os.kill(pid, signal.SIGKILL)
    finally:
        kill_clirace(proc)
    if watchdog == "alive":
        wait_for(lambda: not run_folders(no_leftovers), 10, "the watchdog to remove the run folder")
    sweep_leftovers(no_leftovers.tmpdir)  # what the next run does first
    assert no_leftovers.leftovers(timeout=2.0) == []
    assert os.listdir(no_leftovers.tmpdir) == []


def of_the_run(scope) -> list[str]:
    """Every process of the scope's runs: by their marker, and by the command line of those that shed it (the
    orphans carry their sandbox's HOME in it)."""
    marked = [str(p) for p in scope.processes()]
    return marked + [f"pid {pid}: {line}" for pid, line in with_cmdline(str(scope.tmpdir)).items()]


def orphan_in(scope, kind: str):
    """An orphan left by a command of a trial of `kind` (its sandbox is named KIND-XXXX) of the scope's runs, once
    there is one: its command line names its sandbox's HOME, inside the scope's TMPDIR. Unscoped, it also saw the
    orphans of another test running the same fixture at the same time (an xdist worker, another checkout's suite)."""
    return [pid for pid, line in with_cmdline("clirace-hostile-orphan ").items()
            if f"/{kind}-" in line and os.path.join(str(scope.tmpdir), "") in line]


def left_after(find, deadline: float) -> list:
    """What `find()` lists once it lists nothing or `deadline` (time.monotonic()) has passed."""
    while True:
        left = find()
        if not left or time.monotonic() >= deadline:
            return left
        time.sleep(0.02)


# stage: (the kind of a sandbox only it makes, the --only that gets there soonest). The reference stage's counter
# runs in a sandbox named like the rounds' (counter-XXXX); its lock contender alone, in alone-XXXX.
STAGES = {"reference": ("alone", "lock-excludes"), "rounds": ("counter", "counter"),
          "lock": ("lock-conflict", "lock-excludes"), "atomic": ("config-sampled", "atomic-config")}


@pytest.mark.e2e
@pytest.mark.timeout(60)
@needs_cgroups
@pytest.mark.parametrize("stage", STAGES)
def test_an_orphan_that_cleared_its_environment_dies_with_a_killed_clirace(stage, no_leftovers):
    """The target leaves a double-forked setsid() orphan with an empty environment at every command; clirace is
    SIGKILLed once one of `stage` is alive: within 5 s nothing of the run is left, and the next run's sweep
    leaves no folder and no cgroup."""
    kind, only = STAGES[stage]
    proc = start_clirace(no_leftovers, ORPHANS, "--only", only)
    try:
        wait_for(lambda: orphan_in(no_leftovers, kind), 40, f"an orphan of the {stage} stage")
    finally:
        killed_at = time.monotonic()
        kill_clirace(proc)
    assert left_after(lambda: of_the_run(no_leftovers), killed_at + 5.0) == [], "processes outlived it by 5 s"
    print(f"all ended within {time.monotonic() - killed_at:.3f}s of the SIGKILL")
    sweep_leftovers(no_leftovers.tmpdir)  # what the next run does first
    assert os.listdir(no_leftovers.tmpdir) == []
    assert [c.path for c in _cgroup.leftovers(f"clirace-{proc.pid}-")] == []


@pytest.mark.e2e
@pytest.mark.timeout(60)
@needs_cgroups
def test_the_next_run_ends_an_orphan_that_cleared_its_environment_when_the_watchdog_was_killed_too(tmp_path,
                                                                                                  no_leftovers):
    spec = tmp_path / "linger.yaml"  # a setup command that leaves its orphan, then sleeps: the trial stays
    spec.write_text(ORPHANS.read_text().replace('  timeout: 5s\n', '  timeout: 90s\nsetup: [["linger"]]\n')
                    .replace("{spec_dir}", str(ORPHANS.parent)))
    proc = start_clirace(no_leftovers, spec)
    try:
        wait_for(lambda: orphan_in(no_leftovers, "counter"), 40, "the orphan of the first setup command")
        for pid in with_cmdline(f"_watchdog.py {proc.pid} "):
            os.kill(pid, signal.SIGKILL)
    finally:
        kill_clirace(proc)
    orphans = orphan_in(no_leftovers, "counter")
    assert orphans, "the orphan is out of every reach but its cgroup's"
    swept = sweep_leftovers(no_leftovers.tmpdir)
    assert set(orphans) <= set(swept["killed"])
    assert left_after(lambda: of_the_run(no_leftovers), time.monotonic() + 2.0) == []
    assert os.listdir(no_leftovers.tmpdir) == []


@pytest.mark.timeout(30)
def test_the_sweep_looks_in_tmp_too_where_a_servers_folder_is_made_whatever_tmpdir_says(tmp_path, monkeypatch):
    """A PostgreSQL server run as another user keeps its folder in /tmp (it must reach it) even when TMPDIR points
    elsewhere; a dead run's folder there is swept like one under TMPDIR."""
    own, shared = tmp_path / "own", tmp_path / "shared"
    own.mkdir(), shared.mkdir()
    monkeypatch.setenv("TMPDIR", str(own))
    monkeypatch.setattr(tempfile, "tempdir", None)  # gettempdir() reads TMPDIR again
    # The shared folder stands in for /tmp: the real one is swept by every clirace that starts beside this test
    # (pytest-xdist), which could remove the dead folder first.
    monkeypatch.setattr(cleanup, "SHARED_TMP", str(shared))
    dead = shared / f"clirace-999999999-pg-{os.urandom(8).hex()}"  # no owner file, empty: killed early
    dead.mkdir()
    try:
        assert tempfile.gettempdir() == str(own)
        assert str(dead) in sweep_leftovers()["removed"] and not dead.exists()
    finally:
        if dead.exists():
            dead.rmdir()
