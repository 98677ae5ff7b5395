"""The owner of everything a run makes: its folders, its cgroups, its watchdog, its records, the orphans it
adopts; how a run ends (`end_run`), and what a killed clirace leaves of a run, and how that is ended.

A run has a folder for its sandboxes (`$TMPDIR/clirace-PID-XXXX`, the run folder, which each target can find
as its sandbox's parent), a private folder for clirace's own files (traces, kill logs) outside it, under a name
the target cannot derive (`$TMPDIR/.clirace-PID-XXXX.YYYY`, mode 0300: not even its owner can list it), and,
where the machine allows, a cgroup (run/_cgroup.py). clirace holds an fd on each folder (safefs.make_dir), so a
target that moves one away or puts a link in its place redirects nothing. A trial's sandbox, private folder and
cgroup are made inside the run's (run/sandbox.py, whose `Sandbox.end` ends a trial).

Every ending, a trial's, a run's, the watchdog's and the sweep's, goes in the one order of `_ending.end`:
processes (cgroup, then marker) until a scan proves them gone, then folders, then the cgroup.

SIGKILL (a CI runner cancelling a job, the OOM killer) gives clirace no chance to end its trials' processes or
remove its folders. Two things stand in: each run's watchdog (see run/_watchdog.py), a process of its own that
notices clirace's death through a pipe and ends the run's processes at once (its cgroup, or else its marker);
and, for whatever the watchdog could not do (it was killed too), `sweep_leftovers()` at the next start. Both
find a run by the owner file in its folder (or the pid in the folder's name).

May import: the standard library, clirace.errors, and run/'s _cgroup, _ending, procfs and safefs. Imported by
run/sandbox.py, run/services/, scenarios/ (end_adopted) and the entry points (cli/).
"""
from __future__ import annotations

import atexit
import errno
import os
import re
import secrets
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, TypedDict

from clirace.errors import InternalError
from clirace.run import _cgroup, _ending, procfs, safefs

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
    record: str = ""  # the run's record (_record), "" when none could be kept
    watchdog: subprocess.Popen[bytes] | None = None


_runs: dict[str, Run] = {}  # run folder -> its run
_registered = False


@contextmanager
def interrupts_held() -> Iterator[None]:
    """Ctrl-C and SIGTERM wait until the block has ended, and are then acted on: for the steps that make or remove
    a run's folders, which an interrupt cut in two would leave on disk (a run folder with no one to remove it; half a
    removal) until the next run's sweep. Outside the main thread, which alone has signal handlers, it holds nothing.
    A signal ignored stays ignored; the first one held is raised again once its handler is back."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held: list[int] = []
    before: dict[int, Any] = {}
    for sig in (signal.SIGINT, signal.SIGTERM):
        if signal.getsignal(sig) not in (signal.SIG_IGN, None):
            before[sig] = signal.signal(sig, lambda number, _frame: held.append(number))
    try:
        yield
    finally:
        for number, handler in before.items():
            signal.signal(number, handler)
        if held:
            signal.raise_signal(held[0])


def make_workdir(base: str | None = None, kind: str = "") -> Path:
    """A fresh run: its folder (named so that its owner's pid can be read from it), its private folder, its cgroup
    where the machine allows, its owner file and its watchdog (a process in a session of its own that ends the
    run's processes and removes its folders if clirace dies without doing so). `base` (default: TMPDIR) and
    `kind` (a word after the pid) serve a folder of another sort that must go the same way: a PostgreSQL server's.

    Why not only PR_SET_PDEATHSIG (run/launch.py sets it where it is cheap): it reaches clirace's own children,
    never what they started (a target's setsid() daemon), and it costs a fork per start in a parallel batch.
    """
    base = base or tempfile.gettempdir()
    folder = safefs.make_dir(base, f"{RUN_PREFIX}{os.getpid()}-{kind}")
    private = safefs.make_dir(base, f".{folder.name}.", mode=0o300)
    cgroup, why_not = _cgroup.make(folder.name, SH)
    run = Run(str(folder), str(private), cgroup, cgroup.path if cgroup else why_not)
    owner = f"{os.getpid()} {_start_time(os.getpid())} running\nprivate {private}\ncgroup {cgroup.path if cgroup else ''}\n"
    safefs.replace_atomically(folder, OWNER, owner.encode(), 0o600)  # never a half-written owner file
    _record(run, base)
    _runs[run.folder] = run
    _start_watchdog(run)
    global _registered
    if not _registered:
        atexit.register(_end_all)  # a normal exit is not a death: the watchdogs stand down
        _registered = True
    return folder


# ------------------------------------------------------------------------------------------ the run records
#
# The owner file is in the run folder, which every target can reach (its sandbox's parent), and anyone who can
# write TMPDIR can make a folder named like a run's: neither says that clirace made anything. What the sweep acts
# on is a record clirace writes, as the run starts, in a folder of its own beside the run folders that only its
# user (or root) can write (RECORDS, mode 0700, checked to be a directory owned by this user, never followed):
# the run's pid and start time, and the device and inode of its run folder, its private folder and its cgroup as
# they were made. A folder is removed only while it is still that inode; a cgroup is killed only when it is that
# inode, directly below the cgroup clirace makes its runs' in; processes are killed only by that run's marker.
# A record outlives a deleted or rewritten owner file: the run is found all the same.

RECORDS = ".clirace-runs-{uid}"
RECORD_FORMAT = "clirace-run 1"


def _records_dir(base: str, make: bool) -> tuple[int | None, str]:
    """(an fd on the records folder under `base`, "") or (None, why it is not used)."""
    path = os.path.join(base, RECORDS.format(uid=os.getuid()))
    if make:
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:
            pass
        except OSError as exc:
            return None, f"{path}: cannot be made ({exc.strerror or exc})"
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return None, ""
    except OSError as exc:
        kind = "a symbolic link or not a folder" if exc.errno in (errno.ELOOP, errno.ENOTDIR) else exc.strerror
        return None, f"{path} is {kind}: not clirace's, left alone"
    info = os.fstat(fd)
    if info.st_uid != os.getuid() or info.st_mode & 0o077:
        os.close(fd)
        return None, f"{path} is not this user's alone (owner {info.st_uid}, mode {info.st_mode & 0o777:o}): left alone"
    return fd, ""


def _identity(path: str) -> str:
    info = os.lstat(path)
    return f"{info.st_dev} {info.st_ino}"


def _record(run: Run, base: str) -> None:
    """The run's record (see above); a run without one is still ended by its watchdog, not by a later sweep."""
    why = "the records folder kept disappearing"
    for _ in range(5):  # another run may remove the records folder, emptied, between its making and the write
        fd, why = _records_dir(base, make=True)
        if fd is None:
            break
        try:
            with safefs.closing_fd(fd):
                _write_record(run, fd)
        except FileNotFoundError:
            continue
        run.record = os.path.join(base, RECORDS.format(uid=os.getuid()), os.path.basename(run.folder))
        return
    print(f"clirace: the run's record cannot be kept ({why}); if clirace and its watchdog are both killed, the next "
          "run will not remove this run's folders", file=sys.stderr)


def _write_record(run: Run, fd: int) -> None:
    lines = [RECORD_FORMAT, f"pid {os.getpid()} {_start_time(os.getpid())}",
             f"folder {_identity(run.folder)} {run.folder}", f"private {_identity(run.private)} {run.private}"]
    if run.cgroup is not None:
        lines.append(f"cgroup {_identity(run.cgroup.path)} {run.cgroup.path}")
    name = os.path.basename(run.folder)
    temp = f".{name}.{secrets.token_hex(6)}"  # written whole, then renamed: never a half-written record
    out = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=fd)
    with safefs.closing_fd(out):
        safefs.write_all(out, ("\n".join(lines) + "\n").encode())
    os.rename(temp, name, src_dir_fd=fd, dst_dir_fd=fd)


def _forget(run: Run) -> None:
    """The run ended (its folders removed, or kept with --keep): its record goes, and the records folder with
    the last one (a run starting meanwhile makes it again: _record)."""
    if run.record:
        _unlink_quietly(run.record)
        _remove_planted(os.path.dirname(run.record))
        _remove_if_empty(os.path.dirname(run.record))


def _remove_planted(folder: str) -> None:
    """Links, FIFOs and devices in the records folder: clirace writes only regular files there, so these are a
    target's (running as this user); unlinked, never followed or opened."""
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return
    for entry in entries:
        try:
            kind = stat.S_IFMT(entry.stat(follow_symlinks=False).st_mode)
        except OSError:
            continue
        if kind not in (stat.S_IFREG, stat.S_IFDIR):
            _unlink_quietly(entry.path)


def _remove_if_empty(folder: str) -> None:
    try:
        os.rmdir(folder)
    except OSError:
        pass


def _start_watchdog(run: Run) -> None:
    folder_fd, private_fd = safefs.held_fd(run.folder), safefs.held_fd(run.private)
    if folder_fd is None or private_fd is None:  # make_workdir made both through safefs, which holds them
        raise InternalError(f"clirace holds no fd on the run folder {run.folder} or its private one")
    read_end, write_end = os.pipe()  # the write end is close-on-exec: no target inherits it
    try:
        run.watchdog = subprocess.Popen(
            [sys.executable, "-I", "-S", _WATCHDOG, str(os.getpid()), run.folder, str(folder_fd), run.private,
             str(private_fd), run.cgroup.path if run.cgroup else "", run.record], stdin=read_end, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL, start_new_session=True, pass_fds=(folder_fd, private_fd),
            env={k: v for k, v in os.environ.items() if k != _ending.MARKER})
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


def end_run(folder: Path | str, keep: bool = False) -> list[str]:
    """The run is over: whatever any trial of it left running is ended (its cgroup, and every process whose marker
    names the run folder); its private folder is removed, its run folder too (unless `keep`: then only its owner
    file goes, and the folder is no leftover), then its cgroup; its watchdog stands down. Returns what could not
    be removed, each "PATH: why".

    The safety net under every trial's own end: it still works when that was cut short (an exception, Ctrl-C
    or SIGTERM in the middle of ending the trial's processes)."""
    key = os.path.normpath(str(folder))
    run = _runs.pop(key, None)
    if keep and run is not None:
        _tell_watchdog(run, b"k")  # were clirace killed now, the watchdog must not remove the kept folder
    folders = [] if run is None else [lambda: _remove_private(run.private)]
    folders.append(lambda: _keep_run_folder(key) if keep else _remove_run_folder(key))
    cgroup = run.cgroup.path if run is not None and run.cgroup is not None else ""
    failures = _ending.end(f"{os.getpid()}:{os.path.join(key, '')}", prefix=True, cgroup=cgroup, folders=folders)[1]
    if run is not None:
        _forget(run)
        _dismiss(run)
    return failures


def _remove_private(private: str) -> list[str]:
    fd = safefs.held_fd(private)
    if fd is not None:
        os.chmod(fd, 0o700)  # made mode 0300 (not listable): it must be listed to be emptied
    return safefs.remove(private)


def _keep_run_folder(key: str) -> list[str]:
    safefs.unlink_at(key, OWNER)
    safefs.release(key)
    return []


def _remove_run_folder(key: str) -> list[str]:
    planted = safefs.replaced(key)  # the target moved the run folder away and put something in its place
    return safefs.remove(key) + (_ending.unlink_planted(key) if planted else [])


def _tell_watchdog(run: Run, what: bytes) -> None:
    if run.write_end is not None:
        try:
            os.write(run.write_end, what)
        except OSError:
            pass


def _dismiss(run: Run) -> None:
    if run.write_end is None or run.watchdog is None:
        return
    _tell_watchdog(run, b"d")
    write_end, run.write_end = run.write_end, None  # before the close: it is never closed twice
    os.close(write_end)
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
# `end_adopted` must not take for adopted orphans. They carry a run marker of their own, so a killed
# clirace's watchdog and the next sweep end them like any other leftover.
_kept: set[str] = set()


def keep(pid: int) -> None:
    _kept.add(str(pid))


def unkeep(pid: int) -> None:
    _kept.discard(str(pid))


# ------------------------------------------------------------------------------------- adopted orphans

PR_SET_CHILD_SUBREAPER = 36  # linux/prctl.h
_adopting = False


def adopt_orphans() -> bool:
    """Make this process the child subreaper of everything it starts, so that a descendant whose parent exits
    is re-parented here rather than to init; True if that worked (Linux 3.4+).

    Why: the marker in the environment finds a daemon that called setsid(), but not one that also cleared its
    environment (`env -i`). Adopted, it is still found, as a child of this process (`end_adopted`).
    Only for a process that clirace owns, the CLI: inside a test runner it would adopt, and end, the orphans of
    everything else that process runs.
    """
    global _adopting
    try:
        import ctypes
        _adopting = ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        _adopting = False
    return _adopting


def end_adopted(within: float = 2.0) -> list[int]:
    """SIGKILL and reap every process this subreaper adopted, and reap those that already ended.

    Call it only where clirace has no child of its own left running or unreaped (a trial's end, the run's
    end): a child of this process is then an adopted orphan, whatever its environment says.
    """
    if not _adopting:
        return []
    me, watchdogs = str(os.getpid()), watchdog_pids()  # the watchdogs are children too, and must live on
    return _ending.kill_until_gone(lambda: [pid for pid in procfs.pids() if procfs.stat_fields(pid)[1:2] == [me]
                                           and str(pid) not in watchdogs], within, reap=True)


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


def sweep_leftovers(tmpdir: str | Path | None = None) -> Swept:
    """End what earlier clirace runs that were killed left behind, and remove their folders and cgroups. Call at
    start-up, before the run makes its own folder.

    A run is found by its record (see RECORDS), never by a folder's name or owner file, which a target or another
    user can forge: when the pid and start time it names are gone, the run's cgroup is killed and removed (only
    if it is the recorded one, directly below clirace's own), its marked processes are ended, and its folders
    removed while they are still the folders recorded. A run whose owner file was deleted or rewritten is found
    all the same. Anything else named like a run's folder is reported and left alone (an empty folder of this
    user's whose named pid is gone is removed: removing an empty folder changes nothing else); a link or FIFO in
    the way is never opened. Processes whose CLIRACE_TRIAL marker names a clirace that is gone are ended
    wherever their sandbox is. Only this user's folders and processes are touched. Without `tmpdir` it looks
    under TMPDIR and under /tmp, where a server run as another user keeps its folder (run/services/postgres.py).
    Returns {"killed": pids, "removed": paths, "left": notes on what was left alone}.
    """
    bases = [str(tmpdir)] if tmpdir is not None else list(dict.fromkeys([tempfile.gettempdir(), SHARED_TMP]))
    killed: list[int] = []
    removed: list[str] = []
    left: list[str] = []
    recorded: set[str] = set()
    for base in bases:
        _sweep_records(base, killed, removed, left, recorded)
    for base in bases:
        _note_unrecorded(base, removed, left, recorded)
    for cgroup in _cgroup.leftovers(RUN_PREFIX):  # below clirace's own cgroup: made by a clirace of this user
        if not _alive(_pid_in(os.path.basename(cgroup.path)) or "", None):
            killed += _ending.end(cgroup=cgroup.path)[0]
    killed += _ending.kill_until_gone(_orphaned_marked)
    return {"killed": killed, "removed": removed, "left": left}


class Swept(TypedDict):
    """What sweep_leftovers did: the pids it killed, the folders it removed, notes on what it left alone."""
    killed: list[int]
    removed: list[str]
    left: list[str]


@dataclass
class _Record:
    pid: str
    start: str
    folders: list[tuple[str, str]]  # (path, "DEV INO") of the run folder, then the private one
    cgroup: tuple[str, str] | None


def _parse_record(data: bytes) -> _Record | None:
    lines = data.decode(errors="replace").splitlines()
    if not lines or lines[0] != RECORD_FORMAT:
        return None
    fields: dict[str, tuple[str, str]] = {}
    pid = start = ""
    for line in lines[1:]:
        key, _, rest = line.partition(" ")
        if key == "pid":
            pid, _, start = rest.partition(" ")
        elif key in ("folder", "private", "cgroup"):
            dev, ino, path = (rest.split(" ", 2) + ["", "", ""])[:3]
            if dev.isdigit() and ino.isdigit() and path.startswith("/"):
                fields[key] = (os.path.normpath(path), f"{dev} {ino}")
    if not pid.isdigit() or "folder" not in fields or "private" not in fields:
        return None
    return _Record(pid, start, [fields["folder"], fields["private"]], fields.get("cgroup"))


def _sweep_records(base: str, killed: list[int], removed: list[str], left: list[str], recorded: set[str]) -> None:
    fd, why = _records_dir(base, make=False)
    if why:
        left.append(why)
    if fd is None:
        return
    with safefs.closing_fd(fd):
        for name in os.listdir(fd):
            shown = os.path.join(base, RECORDS.format(uid=os.getuid()), name)
            data = _read_regular(fd, name)
            record = _parse_record(data) if isinstance(data, bytes) else None
            if record is None:
                if not name.startswith("."):  # (a temp name: a record being written)
                    left.append(f"{shown}: {data if isinstance(data, str) else 'not a run record'}; left alone")
                continue
            recorded.update(path for path, _ in record.folders)
            if _alive(record.pid, record.start):
                continue
            cgroup = ""
            if record.cgroup is not None and _cgroup_is_runs(*record.cgroup):
                cgroup = record.cgroup[0]
            elif record.cgroup is not None:
                left.append(f"{record.cgroup[0]}: not the cgroup the record names below clirace's own; left alone")
            folder = record.folders[0][0]
            killed += _ending.end(f"{record.pid}:{os.path.join(folder, '')}", prefix=True, cgroup=cgroup,
                                  folders=[partial(_remove_recorded, path, identity, removed, left)
                                           for path, identity in record.folders])[0]
            try:
                os.unlink(name, dir_fd=fd)
            except OSError:
                pass
    _remove_if_empty(os.path.join(base, RECORDS.format(uid=os.getuid())))


def _read_regular(dir_fd: int, name: str) -> bytes | str:
    """The content of a regular file (64 KiB at most), or why it is not read: a link, FIFO or device is never
    opened for reading (O_NOFOLLOW, O_NONBLOCK, then checked)."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dir_fd)
    except OSError as exc:
        return f"not read ({'a symbolic link' if exc.errno == errno.ELOOP else exc.strerror})"
    with safefs.closing_fd(fd):
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return "not a regular file (a FIFO, device or folder)"
        return os.read(fd, 64 * 1024)


def _cgroup_is_runs(path: str, identity: str) -> bool:
    """Whether `path` is the recorded cgroup, directly below the cgroup clirace makes its runs' in."""
    mount, mine = _cgroup.v2_mount(), _cgroup.own()
    if mount is None or mine is None:
        return False
    if os.path.dirname(path) != os.path.normpath(mount + "/" + mine) or \
            not os.path.basename(path).startswith(RUN_PREFIX):
        return False
    try:
        info = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISDIR(info.st_mode) and f"{info.st_dev} {info.st_ino}" == identity


def _remove_recorded(path: str, identity: str, removed: list[str], left: list[str]) -> list[str]:
    """Remove the folder at `path` if it is still the one recorded, and say so in `removed`; or why it was left
    alone, in `left` (nothing when it is gone already). A link put in its place is removed, never followed."""
    note = _removed_recorded(path, identity)
    if note is None:
        removed.append(path)
    elif note:
        left.append(note)
    return []


def _removed_recorded(path: str, identity: str) -> str | None:
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return ""
    except OSError as exc:
        return f"{path}: {exc.strerror or exc}; left alone"
    if stat.S_ISLNK(info.st_mode):
        _unlink_quietly(path)
        return f"{path}: a symbolic link stood where the run's folder was (removed, not followed)"
    if not stat.S_ISDIR(info.st_mode) or f"{info.st_dev} {info.st_ino}" != identity:
        return f"{path}: not the folder the run made (replaced since); left alone"
    try:  # the folder itself, held by an fd: removed through it, whatever is put at `path` meanwhile
        held = os.open(path, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        with safefs.closing_fd(held):
            os.chmod(f"/proc/self/fd/{held}", 0o700)  # a private folder (0300) must be listed to be emptied
            fd = os.open(f"/proc/self/fd/{held}", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as exc:
        return f"{path}: {exc.strerror or exc}; left alone"
    with safefs.closing_fd(fd):
        opened = os.fstat(fd)
        if f"{opened.st_dev} {opened.st_ino}" != identity:
            return f"{path}: not the folder the run made (replaced since); left alone"
        failures = _ending.remove_tree(fd, path)
    return f"{path}: could not be removed whole ({'; '.join(failures[:3])})" if failures else None


# What make_workdir names a run's folder (clirace-PID-[KIND-]HEX16) and its private one (.NAME.HEX16): only
# an empty one of these whose pid is gone is removed; anything else named clirace-* is only reported.
_RUN_NAME = re.compile(r"\.?" + re.escape(RUN_PREFIX) + r"[0-9]+-(?:[a-z]+-)?[0-9a-f]{16}(?:\.[0-9a-f]{16})?")


def _note_unrecorded(base: str, removed: list[str], left: list[str], recorded: set[str]) -> None:
    """What is named like a run's folder under `base` but has no record: reported, left alone."""
    try:
        entries = list(os.scandir(base))
    except OSError:
        return
    for entry in entries:
        name = entry.name
        if not name.startswith((RUN_PREFIX, "." + RUN_PREFIX)) or name == RECORDS.format(uid=os.getuid()):
            continue
        if entry.path in recorded or entry.path in removed:
            continue
        try:
            info = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        if info.st_uid != os.getuid() or _alive(_pid_in(name.lstrip(".")) or "", None):
            continue  # another user's, or a running clirace's
        if stat.S_ISDIR(info.st_mode) and _RUN_NAME.fullmatch(name):  # not a user's own mkdtemp clirace-x-XXXX
            try:
                os.rmdir(entry.path)  # empty: a run killed before it made anything in it (or kept its record)
                removed.append(entry.path)
                continue
            except OSError:
                pass
        kind = "a folder" if stat.S_ISDIR(info.st_mode) else _KINDS.get(stat.S_IFMT(info.st_mode), "a file")
        left.append(f"{entry.path}: {kind} named like a clirace run's, but no record says clirace made it; "
                    "left alone")


_KINDS = {stat.S_IFLNK: "a symbolic link", stat.S_IFIFO: "a named pipe (FIFO)", stat.S_IFREG: "a regular file",
          stat.S_IFSOCK: "a socket", stat.S_IFCHR: "a character device", stat.S_IFBLK: "a block device"}


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
    found = []
    owners: dict[tuple[str, str], bool] = {}
    for pid, marker in _ending.marked():
        owner, _, box = marker.partition(":")
        run_folder = os.path.dirname(box.rstrip("/"))
        if (owner, run_folder) not in owners:
            found_owner = _owner(run_folder, os.path.basename(run_folder))
            owners[owner, run_folder] = _alive(owner, found_owner.start if found_owner.pid == owner else None)
        if not owners[owner, run_folder]:
            found.append(pid)
    return found
