"""How clirace ends what it started: processes killed until a scan proves them gone, then folders, then cgroups.

One kill loop (`kill_until_gone`) and one scan for marked processes (`marked`) serve every caller: an
invocation's deadline and stop (run/launch.py), a trial's end (run/sandbox.py), a run's end, its adopted orphans
and the start-up sweep (run/cleanup.py), the servers (run/services/), and the watchdog of a SIGKILLed clirace
(run/_watchdog.py); so does one removal of a folder (`remove_tree`, behind safefs.remove). `end` is the one order
in which a trial's or a run's things go: processes first, so that nothing still running writes into a folder being
removed; then the folders; then the cgroup, which must be empty to be removed.

Standard library only, no clirace import: the watchdog runs it under `python -I -S`, without clirace's
packages (they may be what broke), loading it from this folder. May be imported by any module of run/.
"""
from __future__ import annotations

import errno
import os
import signal
import stat
import time

TYPE_CHECKING = False  # typing's own constant, without importing typing (the watchdog starts in about 10 ms)
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

MARKER = "CLIRACE_TRIAL"  # in the environment of every process of a trial: "CLIRACE_PID:SANDBOX"
MAX_DEPTH = 200  # directories nested in each other that `remove_tree` descends (one fd each); a target's deeper tree stays
_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
REMOVE_ATTEMPTS = 4  # clearings of a tree that something still wrote in as it was removed (`remove_tree`)
_NOT_EMPTY = f": {os.strerror(errno.ENOTEMPTY)}"


# ------------------------------------------------------------------------------------------------- processes

def marked(name: str = MARKER) -> list[tuple[int, str]]:
    """(pid, value) of every other process whose environment has `name`=value: the one scan for markers."""
    needle, me, found = f"{name}=".encode(), os.getpid(), []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == me:
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as handle:
                environ = handle.read()
        except OSError:
            continue
        for item in environ.split(b"\0"):
            if item.startswith(needle):
                found.append((int(entry), os.fsdecode(item[len(needle):])))
                break
    return found


def kill_until_gone(find: Callable[[], list[int]], within: float = 2.0, reap: bool = False) -> list[int]:
    """SIGKILL what `find()` lists until it lists nothing and every process killed has finished dying, or
    `within` seconds pass (a process that forks faster than it is killed); returns the pids killed. With `reap`,
    those that are this process's children are waited for.

    Finished dying, not only signalled: a killed process first completes the call it is in (one that creates a
    file, say), and leaves the scans (its environment reads empty) before its last thread has. A folder removed
    in between is found not empty."""
    killed: list[int] = []
    refused: set[int] = set()  # another user's (a setuid program a target ran): neither killed nor waited for
    deadline = time.monotonic() + within
    while True:
        found = [pid for pid in find() if pid not in refused]
        for pid in found:
            try:
                os.kill(pid, signal.SIGKILL)
                killed += [] if pid in killed else [pid]
            except ProcessLookupError:
                pass
            except PermissionError:
                refused.add(pid)
        for pid in killed if reap else ():
            try:
                os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                pass
        if not found and all(map(_dead, killed)) or time.monotonic() > deadline:
            return killed
        time.sleep(0.005)


def _dead(pid: int) -> bool:
    """Whether every thread of `pid` has exited (gone, or a zombie: its files closed, nothing left to do)."""
    try:
        threads = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return True
    return all(stat_fields(int(tid))[:1] in ([], ["Z"], ["X"]) for tid in threads)


def stat_fields(pid: int) -> list[str]:
    """The fields of /proc/PID/stat after "pid (comm)": state, ppid, pgrp, session, ...; [] once it is gone.
    (comm may hold spaces and parentheses, hence the split at the last ")".) A thread's id reads its own.
    The one reader of that file: procfs gives it to the rest of clirace."""
    try:  # (os.open, not open(): scans of every process read it thousands of times a check, at half the cost)
        fd = os.open(f"/proc/{pid}/stat", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return []
    try:
        data = b""
        while chunk := os.read(fd, 4096):
            data += chunk
        return data.rsplit(b")", 1)[1].decode(errors="replace").split()
    except (OSError, IndexError):
        return []
    finally:
        os.close(fd)


def group_of(pid: int) -> int | None:
    """The process group of `pid` (a zombie's too, until it is reaped), None once it is gone: one call, about a
    tenth of the cost of reading it from /proc/PID/stat, for scans that ask it of every process."""
    try:
        return os.getpgid(pid)
    except OSError:
        return None


def group_exists(pgid: int) -> bool:
    """Whether any process (a zombie too) is in the process group `pgid`: one call, where a scan of /proc reads
    every process on the machine (a check ends and inspects groups a few thousand times)."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's process: it exists
        pass
    return True


def in_groups(groups: Sequence[int]) -> list[int]:
    """The processes of the process groups `groups` that have not finished exiting. Unlike a marker, the group
    is read from /proc/PID/stat, which a dying process keeps until it is reaped."""
    wanted = {group for group in groups if group_exists(group)}
    if not wanted:
        return []
    return [int(entry) for entry in os.listdir("/proc")
            if entry.isdigit() and group_of(int(entry)) in wanted and not _dead(int(entry))]


def end_marked(marker: str, name: str = MARKER, prefix: bool = False, within: float = 2.0) -> list[int]:
    """SIGKILL every process whose environment has `name`=`marker` (with `prefix`: a value starting with it),
    until none is left (kill_until_gone); returns their pids."""
    return kill_until_gone(lambda: [pid for pid, value in marked(name)
                                    if value == marker or prefix and value.startswith(marker)], within)


def in_cgroup(path: str) -> list[int]:
    """The processes in the cgroup `path` and in those below it."""
    pids: list[int] = []
    for folder, _dirs, _files in os.walk(path):
        try:
            with open(os.path.join(folder, "cgroup.procs")) as handle:
                pids += [int(line) for line in handle if line.strip().isdigit()]
        except OSError:
            pass
    return pids


def kill_cgroup(path: str, within: float = 5.0) -> list[int]:
    """SIGKILL every process in the cgroup `path` and those below it, until none is left; returns their pids.
    cgroup.kill (Linux 5.14+) kills even those forked meanwhile; before that, each one listed is signalled."""
    found = in_cgroup(path)
    if not found:
        return []
    try:
        with open(os.path.join(path, "cgroup.kill"), "w") as handle:
            handle.write("1")
    except OSError:
        pass
    return list(dict.fromkeys(found + kill_until_gone(lambda: in_cgroup(path), within)))


def remove_cgroup(path: str) -> str | None:
    """Remove the (emptied) cgroup `path` and those below it: None, or why it stays."""
    failed = None
    for folder, _dirs, _files in sorted(os.walk(path), key=lambda entry: -entry[0].count("/")):
        try:
            os.rmdir(folder)
        except FileNotFoundError:
            pass
        except OSError as exc:
            failed = f"{folder}: {exc.strerror or exc}"
    return failed


# --------------------------------------------------------------------------------------------------- folders

def remove_tree(fd: int, shown: str) -> list[str]:
    """Remove the directory `fd` is open on (O_RDONLY) and everything in it, wherever it is now, walking by fds
    (O_NOFOLLOW): a link is removed, never followed, and a mount point is not entered. Returns what could not be
    removed, each "PATH: why" (`shown` names the directory).

    When the only failures are "Directory not empty", something made a file in the tree after it was listed (a
    process SIGKILLed in the middle of a call that creates one ends that call first): the tree is cleared again,
    up to REMOVE_ATTEMPTS times, 10-40 ms apart, before that is reported."""
    failures: list[str] = []
    for attempt in range(REMOVE_ATTEMPTS):
        failures = []
        _clear(fd, shown, failures, 0)
        if not failures:
            _remove_entry(fd, shown, failures)
        if not failures or not all(failure.endswith(_NOT_EMPTY) for failure in failures):
            break
        time.sleep(0.01 * (attempt + 1))
    return failures


def _clear(fd: int, shown: str, failures: list[str], depth: int) -> None:
    try:
        names = os.listdir(fd)
        device = os.fstat(fd).st_dev
    except OSError as exc:
        failures.append(f"{shown}: {exc.strerror or exc}")
        return
    for name in names:
        where = f"{shown}/{name}"
        try:
            os.unlink(name, dir_fd=fd)
            continue
        except FileNotFoundError:
            continue
        except IsADirectoryError:
            pass
        except OSError as exc:
            failures.append(f"{where}: {exc.strerror or exc}")
            continue
        if depth >= MAX_DEPTH:
            failures.append(f"{where}: directories nested more than {MAX_DEPTH} deep")
            continue
        try:
            child = os.open(name, _DIR, dir_fd=fd)
        except OSError as exc:
            failures.append(f"{where}: {exc.strerror or exc}")
            continue
        before = len(failures)
        try:
            if os.fstat(child).st_dev != device:
                failures.append(f"{where}: a mount point (another filesystem mounted there); not entered")
                continue
            _clear(child, where, failures, depth + 1)
        finally:
            os.close(child)
        try:
            os.rmdir(name, dir_fd=fd)
        except FileNotFoundError:
            pass
        except OSError as exc:
            if len(failures) == before:  # else what stayed inside is named already
                failures.append(f"{where}: {exc.strerror or exc}")


def _remove_entry(fd: int, shown: str, failures: list[str]) -> None:
    """Remove the (emptied) directory `fd` from wherever it is now: found in its parent by its inode."""
    mine = os.fstat(fd)
    try:
        parent = os.open("..", os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
    except FileNotFoundError:
        return  # removed already (a deleted directory has no parent)
    except OSError as exc:
        failures.append(f"{shown}: {exc.strerror or exc}")
        return
    try:
        name = _name_in(parent, mine, os.path.basename(shown))
        if name is None:
            return
        try:
            os.rmdir(name, dir_fd=parent)
        except FileNotFoundError:
            pass
        except OSError as exc:
            failures.append(f"{shown}: {exc.strerror or exc}")
    finally:
        os.close(parent)


def _name_in(parent: int, mine: os.stat_result, expected: str) -> str | None:
    def same(name: str) -> bool:
        try:
            seen = os.stat(name, dir_fd=parent, follow_symlinks=False)
        except OSError:
            return False
        return (seen.st_dev, seen.st_ino) == (mine.st_dev, mine.st_ino)
    if same(expected):
        return expected
    try:
        return next((name for name in os.listdir(parent) if same(name)), None)
    except OSError:
        return None


def where_now(fd: int) -> str | None:
    """The path of the directory `fd` now (the kernel's view, /proc/self/fd), or None if it is deleted."""
    try:
        path = os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return None
    return path if path.startswith("/") and not path.endswith(" (deleted)") else None


def unlink_planted(path: str) -> list[str]:
    """What stands where a folder of clirace's was, once clirace's own (moved away by a target) is removed: a
    link is removed (never followed); anything else is not clirace's to remove, and is named."""
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
    return [f"{path}: a folder clirace did not make stands where its folder was; left alone"]


# ---------------------------------------------------------------------------------------------- the order

def end(marker: str = "", prefix: bool = False, cgroup: str = "",
        folders: Sequence[Callable[[], list[str]]] = ()) -> tuple[list[int], list[str]]:
    """End a trial's or a run's things, in the one order: its processes (all in `cgroup`, then all whose marker
    is `marker`, or starts with it with `prefix`) until none is left, then its folders (each of `folders`
    removes one and says what it could not), then its cgroup. Returns (the pids killed, what could not be
    removed, each "PATH: why")."""
    killed = kill_cgroup(cgroup) if cgroup else []
    killed += end_marked(marker, prefix=prefix) if marker else []
    failures = [failure for remove in folders for failure in remove()]
    failures += filter(None, [remove_cgroup(cgroup) if cgroup else None])
    return killed, failures
