"""A run's folders and cgroup, what a killed clirace leaves of them, and how that is ended.

A run has a folder for its sandboxes (`$TMPDIR/clirace-PID-XXXX`, the run folder, which each target can find
as its sandbox's parent), a private folder for clirace's own files (traces, kill logs) outside it, under a name
the target cannot derive (`$TMPDIR/.clirace-PID-XXXX.YYYY`, mode 0300: not even its owner can list it), and,
where the machine allows, a cgroup (_cgroup.py). clirace holds an fd on each folder (safefs.make_dir), so a
target that moves one away or puts a link in its place redirects nothing.

SIGKILL (a CI runner cancelling a job, the OOM killer) gives clirace no chance to end its trials' processes or
remove its folders. Two things stand in: each run's watchdog (see _watchdog.py), a process of its own that
notices clirace's death through a pipe and ends the run's processes at once (its cgroup, or else its marker);
and, for whatever the watchdog could not do (it was killed too), `sweep_leftovers()` at the next start. Both
find a run by the owner file in its folder (or the pid in the folder's name). The public names are re-exported
by sandbox.py.
"""
from __future__ import annotations

import atexit
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from . import _cgroup, procfs, reap, safefs

SHARED_TMP = "/tmp"  # where a folder a server's own user must reach is made, whatever TMPDIR says (postgres.py)
RUN_PREFIX = "clirace-"  # a run's folder under TMPDIR: clirace-PID-XXXX (make_workdir); its private one: .clirace-...
OWNER = ".clirace-owner"  # in a running run's folder: "PID STARTTIME running", then "private PATH", "cgroup PATH"
_WATCHDOG = str(Path(__file__).with_name("_watchdog.py"))
SH = shutil.which("sh") or "/bin/sh"


@dataclass
class Run:
    folder: str  # the run folder, holding the sandboxes
    private: str  # clirace's own files, outside the run folder
    cgroup: _cgroup.Cgroup | None  # the cgroup holding the trials' ones, or None
    isolation_note: str  # which cgroup, or why there is none
    write_end: int | None = None  # of the watchdog's pipe
    watchdog: subprocess.Popen | None = None


_runs: dict[str, Run] = {}  # run folder -> its run
_registered = False


def make_workdir(base: str | None = None, kind: str = "") -> Path:
    """A fresh run: its folder (named so that its owner's pid can be read from it), its private folder, its cgroup
    where the machine allows, its owner file and its watchdog (a process in a session of its own that ends the
    run's processes and removes its folders if clirace dies without doing so). `base` (default: TMPDIR) and
    `kind` (a word after the pid) serve a folder of another sort that must go the same way: a PostgreSQL server's.

    Why not only PR_SET_PDEATHSIG (launch.py sets it where it is cheap): it reaches clirace's own children,
    never what they started (a target's setsid() daemon), and it costs a fork per start in a parallel batch.
    """
    base = base or tempfile.gettempdir()
    folder = safefs.make_dir(base, f"{RUN_PREFIX}{os.getpid()}-{kind}")
    private = safefs.make_dir(base, f".{folder.name}.", mode=0o300)
    cgroup, why_not = _cgroup.make(folder.name, SH)
    run = Run(str(folder), str(private), cgroup, cgroup.path if cgroup else why_not)
    owner = f"{os.getpid()} {_start_time(os.getpid())} running\nprivate {private}\ncgroup {cgroup.path if cgroup else ''}\n"
    safefs.replace_atomically(folder, OWNER, owner.encode(), 0o600)  # never a half-written owner file
    _runs[run.folder] = run
    _start_watchdog(run)
    global _registered
    if not _registered:
        atexit.register(_end_all)  # a normal exit is not a death: the watchdogs stand down
        _registered = True
    return folder


def _start_watchdog(run: Run) -> None:
    read_end, write_end = os.pipe()  # the write end is close-on-exec: no target inherits it
    folder_fd, private_fd = safefs.held_fd(run.folder), safefs.held_fd(run.private)
    try:
        run.watchdog = subprocess.Popen(
            [sys.executable, "-I", "-S", _WATCHDOG, str(os.getpid()), run.folder, str(folder_fd), run.private,
             str(private_fd), run.cgroup.path if run.cgroup else ""], stdin=read_end, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL, start_new_session=True, pass_fds=(folder_fd, private_fd),
            env={k: v for k, v in os.environ.items() if k != reap.MARKER})
    except OSError:
        os.close(write_end)
        return
    finally:
        os.close(read_end)
    run.write_end = write_end


def run_of(folder: Path | str) -> Run | None:
    """The run whose folder is `folder` (a sandbox's parent), or None."""
    return _runs.get(os.path.normpath(str(folder)))


def isolation(folder: Path | str) -> tuple[str, str]:
    """(how the run's processes are kept together, which cgroup or why none) for history.Environment."""
    run = run_of(folder)
    if run is None or run.cgroup is None:
        return "marker", run.isolation_note if run else ""
    return _cgroup.NAME, run.isolation_note


def end(folder: Path | str, keep: bool = False) -> list[str]:
    """The run is over: its cgroup killed and removed, its private folder removed, its run folder removed (unless
    `keep`: then only its owner file goes, and the folder is no leftover), its watchdog told to stand down.
    Returns what could not be removed, each "PATH: why"."""
    key = os.path.normpath(str(folder))
    run = _runs.pop(key, None)
    failures: list[str] = []
    if run is not None and run.cgroup is not None:
        failures += filter(None, [run.cgroup.remove()])
    if run is not None:
        _listable(run.private)
        failures += safefs.remove(run.private)
    if keep:
        safefs.unlink_at(key, OWNER)
        safefs.release(key)
    else:
        planted = safefs.replaced(key)  # the target moved the run folder away and put something in its place
        failures += safefs.remove(key)
        failures += _unlink_planted(key) if planted else []
    if run is not None:
        _dismiss(run)
    return failures


def _listable(private: str) -> None:
    """A private folder is made mode 0300 (not listable); it must be listed to be emptied."""
    fd = safefs.held_fd(private)
    if fd is not None:
        os.chmod(fd, 0o700)


def _unlink_planted(path: str) -> list[str]:
    """What the target put where a folder of clirace's was, once clirace's own (moved away) is removed: a link
    is removed (never followed); anything else is not clirace's to remove, and is named."""
    try:
        seen = os.lstat(path)
    except OSError:
        return []
    if stat.S_ISLNK(seen.st_mode):
        try:
            os.unlink(path)
            return []
        except OSError as exc:
            return [f"{path}: {exc.strerror or exc}"]
    return [f"{path}: a folder clirace did not make stands where its run folder was; left alone"]


def _dismiss(run: Run) -> None:
    if run.write_end is None or run.watchdog is None:
        return
    try:
        os.write(run.write_end, b"d")
    except OSError:
        pass
    os.close(run.write_end)
    run.write_end = None
    try:
        run.watchdog.wait(2.0)
    except subprocess.TimeoutExpired:
        pass


def _end_all() -> None:
    for key in list(_runs):
        _dismiss(_runs.pop(key))


def watchdog_pids() -> set[str]:
    """clirace's own children that live across trials: the watchdogs, and the servers of services/ (kept())."""
    return {str(run.watchdog.pid) for run in _runs.values() if run.watchdog is not None} | _kept


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
    """End what earlier clirace runs that were killed left behind, and remove their folders and cgroups. Call at
    start-up, before the run makes its own folder.

    A run is a leftover when its owner (the pid in its folder's owner file, or in its name) is gone and it was
    still running: a run that ended (Ctrl-C and SIGTERM included) removed its owner file, and its folder, if
    kept with --keep, stays; a folder without one is removed only when empty. An owner file that says nothing
    (clirace killed while writing one, before it wrote them atomically) counts as the name's pid. Private folders
    and cgroups go with their run, or on their own once the pid in their name is gone. Processes whose
    CLIRACE_TRIAL marker names a clirace that is gone are ended wherever their sandbox is. Only this user's
    folders and processes are touched. Without `tmpdir` it looks under TMPDIR and under /tmp, where a server run
    as another user keeps its folder (services/postgres.py). Returns {"killed": pids, "removed": paths}.
    """
    bases = [str(tmpdir)] if tmpdir is not None else list(dict.fromkeys([tempfile.gettempdir(), SHARED_TMP]))
    killed: list[int] = []
    removed: list[str] = []
    entries = []
    for base in bases:
        try:
            entries += list(os.scandir(base))
        except OSError:
            pass
    for entry in entries:
        if not entry.name.startswith((RUN_PREFIX, "." + RUN_PREFIX)):
            continue
        try:
            info = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        if info.st_uid != os.getuid():
            continue
        if stat.S_ISLNK(info.st_mode):  # a link a target put where a run folder of a dead clirace was
            if entry.name.startswith(RUN_PREFIX) and not _alive(_pid_in(entry.name) or "", None):
                _unlink_quietly(entry.path)
            continue
        if not stat.S_ISDIR(info.st_mode):
            continue
        if entry.name.startswith("."):  # a private folder: its run's owner is the pid in its name
            if _alive(_pid_in(entry.name[1:]) or "", None):
                continue
            os.chmod(entry.path, 0o700)
            shutil.rmtree(entry.path, ignore_errors=True)
            removed.append(entry.path)
            continue
        owner = _owner(entry.path, entry.name)
        if owner.pid is None or owner.state not in ("running", "named") or _alive(owner.pid, owner.start):
            continue
        if owner.state == "named" and not owner.said_nothing and any(os.scandir(entry.path)):
            continue  # no owner file: a run that ended (its folder kept), or one killed before its first sandbox
        if owner.cgroup and os.path.basename(owner.cgroup) == entry.name:  # (the target can write the owner file)
            killed += _cgroup.Cgroup(owner.cgroup).kill(2.0)
            _cgroup.Cgroup(owner.cgroup).remove(2.0)
        killed += reap.end_marked(f"{owner.pid}:{os.path.join(entry.path, '')}", prefix=True)
        shutil.rmtree(entry.path, ignore_errors=True)
        removed.append(entry.path)
    for cgroup in _cgroup.leftovers(RUN_PREFIX):
        if not _alive(_pid_in(os.path.basename(cgroup.path)) or "", None):
            killed += cgroup.kill(2.0)
            cgroup.remove(2.0)
    killed += reap._kill_until_gone(_orphaned_marked, 2.0)
    return {"killed": killed, "removed": removed}


@dataclass
class _Owner:
    pid: str | None
    start: str | None
    state: str  # "running" (an owner file), "named" (the pid from the folder's name), "" (not a run folder)
    cgroup: str = ""
    said_nothing: bool = False  # an owner file is there, but empty or garbled


def _owner(path: str, name: str) -> _Owner:
    """Who owns a run folder, from its owner file or else its name."""
    said_nothing = False
    try:  # the run folder is the sandboxes' parent: a target may have put a link or a FIFO there
        found = safefs.read_capped(path, OWNER, 64 * 1024)
    except OSError:
        found = None
    if found is not None:
        lines = found.decode(errors="replace").splitlines() if isinstance(found, bytes) else []
        fields = lines[0].split() if lines else []
        if len(fields) == 3:
            extra = dict(line.partition(" ")[::2] for line in lines[1:])
            return _Owner(fields[0], fields[1], fields[2], cgroup=extra.get("cgroup", ""))
        said_nothing = True
    pid = _pid_in(name)
    return _Owner(pid, None, "named" if pid else "", said_nothing=said_nothing)


def _pid_in(name: str) -> str | None:
    """The pid in a run folder's name, clirace-PID-XXXX, or None."""
    middle, dash, _rest = name[len(RUN_PREFIX):].partition("-")
    return middle if name.startswith(RUN_PREFIX) and middle.isdigit() and dash else None


def _unlink_quietly(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


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
                found_owner = _owner(run_folder, os.path.basename(run_folder))
                owners[owner, run_folder] = _alive(owner, found_owner.start if found_owner.pid == owner else None)
            if not owners[owner, run_folder]:
                found.append(pid)
            break
    return found
