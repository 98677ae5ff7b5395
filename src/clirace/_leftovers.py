"""What a killed clirace leaves behind, and how it is ended: the run's watchdog and the start-up sweep.

SIGKILL (a CI runner cancelling a job, the OOM killer) gives clirace no chance to end its trials' processes or
remove its sandboxes. Two things stand in: each run's watchdog (`watch_run`, see _watchdog.py), a process of
its own that notices clirace's death through a pipe and ends the run's processes at once; and, for whatever
the watchdog could not do (it was killed too), `sweep_leftovers()` at the next start. Both find a run's
processes by the CLIRACE_TRIAL marker and its folder by the owner file (or the pid in the folder's name).
The public names are re-exported by sandbox.py.
"""
from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from . import procfs, reap

RUN_PREFIX = "clirace-"  # a run's folder under TMPDIR: clirace-PID-XXXXXX (make_workdir)
OWNER = ".clirace-owner"  # in a running run's folder: "PID STARTTIME running" (_watchdog.py reads it too)
_WATCHDOG = str(Path(__file__).with_name("_watchdog.py"))
_watchdogs: dict[str, tuple[int, subprocess.Popen]] = {}  # run folder -> (write end of its pipe, watchdog)
_registered = False


def make_workdir() -> Path:
    """A fresh folder for one run's sandboxes, named so that its owner's pid can be read from it."""
    return Path(tempfile.mkdtemp(prefix=f"{RUN_PREFIX}{os.getpid()}-"))


def watch_run(workdir: Path | str) -> None:
    """Once per run folder: write its owner file and start the watchdog (see _watchdog.py), a process in a
    session of its own that ends the run's processes and removes the folder if clirace dies without doing so.

    Why not only PR_SET_PDEATHSIG (launch.py sets it where it is cheap): it reaches clirace's own children,
    never what they started (a target's setsid() daemon), and it costs a fork per start in a parallel batch.
    """
    key = os.path.normpath(str(workdir))
    if key in _watchdogs:
        return
    with open(os.path.join(key, OWNER), "w") as handle:
        handle.write(f"{os.getpid()} {_start_time(os.getpid())} running\n")
    read_end, write_end = os.pipe()  # the write end is close-on-exec: no target inherits it
    try:
        proc = subprocess.Popen([sys.executable, "-I", "-S", _WATCHDOG, str(os.getpid()), key], stdin=read_end,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
                                env={k: v for k, v in os.environ.items() if k != reap.MARKER})
    except OSError:
        os.close(write_end)
        return
    finally:
        os.close(read_end)
    _watchdogs[key] = (write_end, proc)
    global _registered
    if not _registered:
        atexit.register(_unwatch_all)  # a normal exit is not a death: no folder is removed then
        _registered = True


def unwatch(key: str) -> None:
    """The run is over: its owner file goes (a folder kept with --keep holds only sandboxes, and is no
    leftover), and the watchdog ends what is left and exits."""
    entry = _watchdogs.pop(key, None)
    try:
        os.unlink(os.path.join(key, OWNER))
    except OSError:
        pass
    if entry is None:
        return
    write_end, proc = entry
    try:
        os.write(write_end, b"d")
    except OSError:
        pass
    os.close(write_end)
    try:
        proc.wait(2.0)
    except subprocess.TimeoutExpired:
        pass


def _unwatch_all() -> None:
    for key in list(_watchdogs):
        unwatch(key)


def watchdog_pids() -> set[str]:
    """clirace's own children that live across trials: the watchdogs, and the servers of services/ (kept())."""
    return {str(proc.pid) for _, proc in _watchdogs.values()} | _kept


# Servers a run keeps for all its trials (services/: PostgreSQL's postmaster), children of clirace that
# `sandbox.end_adopted` must not take for adopted orphans. They carry a run marker of their own, so a killed
# clirace's watchdog and the next sweep end them like any other leftover.
_kept: set[str] = set()


def keep(pid: int) -> None:
    _kept.add(str(pid))


def unkeep(pid: int) -> None:
    _kept.discard(str(pid))


def _start_time(pid: int) -> str:
    """The process's start time (clock ticks after boot, /proc/PID/stat field 22): a pid with another start
    time is another process that reused the number."""
    fields = procfs.stat_fields(pid)
    return fields[19] if len(fields) > 19 else "?"


def _alive(pid: str, start: str | None) -> bool:
    if not pid.isdigit():
        return False
    fields = procfs.stat_fields(int(pid))
    if not fields or fields[0] in ("Z", "X"):
        return False
    return start in (None, "?") or fields[19:20] == [start]


def sweep_leftovers(tmpdir: str | Path | None = None) -> dict[str, list]:
    """End what earlier clirace runs that were killed left behind, and remove their run folders. Call at
    start-up, before the run makes its own folder.

    A run is a leftover when its owner (the pid in its folder's owner file, or in its name) is gone and it was
    still running: a run that ended (Ctrl-C and SIGTERM included) removed its owner file, and its folder, if
    kept with --keep, stays; a folder without one is removed only when empty. Processes whose CLIRACE_TRIAL marker names a clirace that is gone are ended wherever their
    sandbox is. Only this user's folders and processes are touched. Returns {"killed": pids, "removed": paths}.
    """
    base = str(tmpdir) if tmpdir is not None else tempfile.gettempdir()
    killed: list[int] = []
    removed: list[str] = []
    try:
        entries = list(os.scandir(base))
    except OSError:
        entries = []
    for entry in entries:
        if not entry.name.startswith(RUN_PREFIX):
            continue
        try:
            if not entry.is_dir(follow_symlinks=False) or entry.stat(follow_symlinks=False).st_uid != os.getuid():
                continue
        except OSError:
            continue
        pid, start, state = _owner(entry.path, entry.name)
        if pid is None or state not in ("running", "named") or _alive(pid, start):
            continue
        if state == "named" and any(os.scandir(entry.path)):
            continue  # no owner file: a run that ended (its folder kept), or one killed before its first sandbox
        killed += reap.end_marked(f"{pid}:{os.path.join(entry.path, '')}", prefix=True)
        shutil.rmtree(entry.path, ignore_errors=True)
        removed.append(entry.path)
    killed += reap._kill_until_gone(_orphaned_marked, 2.0)
    return {"killed": killed, "removed": removed}


def _owner(path: str, name: str) -> tuple[str | None, str | None, str]:
    """(pid, start time, "running"|"done") of a run folder, from its owner file or else its name."""
    try:
        with open(os.path.join(path, OWNER)) as handle:
            fields = handle.read().split()
        if len(fields) == 3:
            return fields[0], fields[1], fields[2]
    except OSError:
        pass
    middle = name[len(RUN_PREFIX):].split("-", 1)[0]
    return (middle, None, "named") if middle.isdigit() and "-" in name[len(RUN_PREFIX):] else (None, None, "")


def _orphaned_marked() -> list[int]:
    """Processes whose CLIRACE_TRIAL marker names a clirace that is gone (the run itself may be anywhere)."""
    needle = f"{reap.MARKER}=".encode()
    found = []
    owners: dict[tuple, bool] = {}
    for pid in procfs.pids():
        for item in procfs.environ(pid).split(b"\0"):
            if not item.startswith(needle):
                continue
            owner, _, box = item[len(needle):].decode(errors="replace").partition(":")
            run_folder = os.path.dirname(box.rstrip("/"))
            if (owner, run_folder) not in owners:
                pid_of, start, _state = _owner(run_folder, os.path.basename(run_folder))
                owners[owner, run_folder] = _alive(owner, start if pid_of == owner else None)
            if not owners[owner, run_folder]:
                found.append(pid)
            break
    return found
