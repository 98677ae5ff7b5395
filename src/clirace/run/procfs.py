"""Everything clirace reads from /proc, in one place: which processes exist, their state, group, parent,
environment, open files and where they sleep. Each reader returns an empty value once the process is gone."""
from __future__ import annotations

import os
import stat
from collections.abc import Iterable, Iterator
from typing import NamedTuple

# The one reader of /proc/PID/stat lives in _ending (the watchdog reads it too, without clirace): re-exported.
from clirace.run._ending import group_exists as group_exists
from clirace.run._ending import group_of as group_of
from clirace.run._ending import stat_fields as stat_fields


def pids() -> Iterator[int]:
    """Every process on the machine but this one."""
    me = os.getpid()
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != me:
            yield int(entry)


def environ(pid: int) -> bytes:
    try:
        with open(f"/proc/{pid}/environ", "rb") as handle:
            return handle.read()
    except OSError:
        return b""


def wchan(pid: int) -> str:
    """The kernel function the process sleeps in ("pipe_read", ...); "" or "0" where hidden or running."""
    try:
        with open(f"/proc/{pid}/wchan") as handle:
            return handle.read().strip()
    except OSError:
        return ""


def voluntary_switches(pid: int) -> int:
    """How many times `pid` went to sleep of its own accord (/proc/PID/status): a process retrying a lock wakes
    and sleeps again at every try, one blocked in a single call or a long sleep does not; 0 once it is gone."""
    try:
        with open(f"/proc/{pid}/status") as handle:
            for line in handle:
                if line.startswith("voluntary_ctxt_switches:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return 0


def group(pgid: int) -> list[int]:
    """Processes whose process group is `pgid` (each invocation leads its own group)."""
    return groups([pgid])[pgid]


def groups(pgids: Iterable[int]) -> dict[int, list[int]]:
    """The processes of each of these process groups, from one look through /proc (a batch of invocations at
    their shared deadline: one scan, not one each)."""
    found: dict[int, list[int]] = {pgid: [] for pgid in pgids}
    if any(group_exists(pgid) for pgid in found):
        for pid in pids():
            if (pgid := group_of(pid)) in found:
                found[pgid].append(pid)
    return found


def cpu_times(pids: Iterable[int]) -> tuple[float, float] | None:
    """(seconds on a CPU, seconds runnable but waiting for one) of these processes, all their threads summed
    (/proc/PID/task/TID/schedstat); None when none of them could be read, or the kernel keeps no such count
    (built without CONFIG_SCHED_INFO). Why the wait: a command killed at its deadline on a loaded machine may
    have spent it queued for a CPU, not hung."""
    if not os.path.exists("/proc/self/schedstat"):
        return None
    ran = waited = read = 0
    for pid in pids:
        try:
            tasks = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue  # gone meanwhile
        for tid in tasks:
            try:
                with open(f"/proc/{pid}/task/{tid}/schedstat") as handle:
                    on_cpu, queued = handle.read().split()[:2]
                ran, waited, read = ran + int(on_cpu), waited + int(queued), read + 1
            except (OSError, ValueError):
                continue  # that thread ended meanwhile
    return (ran / 1e9, waited / 1e9) if read else None


def asleep_in(pids: Iterable[int]) -> str:
    """Where these processes sleep, the kernel functions (wchan) of those asleep, each once ("do_epoll_wait,
    ptrace_stop"); "" when none sleeps or /proc hides it. With cpu_times: a command killed at its deadline having
    used and waited for little CPU was blocked, and this says on what."""
    found = [wchan(pid) for pid in pids if _state(pid) in ("S", "D", "t", "T")]
    return ", ".join(dict.fromkeys(w for w in found if w not in ("", "0")))


def children_of(ppid: int) -> list[int]:
    return [pid for pid in pids() if stat_fields(pid)[1:2] == [str(ppid)]]


def fd_links(pid: int) -> set[str]:
    """What the process's open fds point at ("/path", "socket:[123]", "pipe:[45]"); empty once it is gone."""
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return set()
    links = set()
    for fd in fds:
        try:
            links.add(os.readlink(f"/proc/{pid}/fd/{fd}"))
        except OSError:
            continue
    return links


def has_open_fifo(pid: int, fifo_id: tuple[int, int]) -> bool:
    """Whether `pid` has the named pipe (st_dev, st_ino) open."""
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return False
    for fd in fds:
        try:
            st = os.stat(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if (st.st_dev, st.st_ino) == fifo_id and stat.S_ISFIFO(st.st_mode):
            return True
    return False


def open_files(pid: int) -> list[str]:
    """The files and directories `pid` has open, by path (pipes, sockets, devices and /proc left out)."""
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return []
    out = []
    for fd in sorted(fds, key=int):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("/") and not target.startswith(("/dev/", "/proc/")):
            out.append(target)
    return out


# --- what a process is blocked in, and the kernel locks it holds ------------------------------------------------

# System call numbers clirace asks /proc/PID/syscall about, per machine (the kernel shows only the number).
_CALLS = {
    "x86_64": {0: "read", 17: "pread64", 19: "readv", 72: "fcntl", 73: "flock"},
    "aarch64": {63: "read", 67: "pread64", 65: "readv", 25: "fcntl", 32: "flock"},
}.get(os.uname().machine, {})
READS = frozenset({"read", "pread64", "readv"})
LOCK_CALLS = frozenset({"flock", "fcntl"})
# Where the kernel sleeps a process waiting for a flock or an fcntl/lockf lock (names vary by kernel version).
LOCK_WCHANS = ("locks_lock_inode_wait", "flock_lock_inode_wait", "posix_lock_inode_wait", "fcntl_setlk",
               "do_lock_file_wait", "locks_lock_file_wait", "flock_lock_file_wait")


def blocked_in(pid: int) -> tuple[str, int | None]:
    """The system call `pid` is blocked in and its first argument (the fd, for the calls named in _CALLS), from
    /proc/PID/syscall: ("read", 0), ("flock", 3); ("running", None) while it runs; ("?", None) in a call clirace
    does not name, or outside any; ("", None) when it is gone or the file cannot be read."""
    try:
        with open(f"/proc/{pid}/syscall") as handle:
            fields = handle.read().split()
    except OSError:
        return "", None
    if fields[:1] == ["running"]:
        return "running", None
    if len(fields) < 2 or not fields[0].isdigit():  # "-1 ...": in the kernel, outside a system call
        return ("?", None) if fields else ("", None)
    name = _CALLS.get(int(fields[0]))
    if name is None:
        return "?", None
    try:
        return name, int(fields[1], 16)
    except ValueError:
        return name, None


def waits_for_lock(pid: int) -> str:
    """How `pid` is seen waiting for a kernel lock ("flock", "fcntl", or the kernel function it sleeps in), else
    "". Where /proc hides both the call and wchan, "" too: no evidence, not a no."""
    # A process a tracer stopped at a lock call's entry (state "t": strace, even for a LOCK_NB try that would not
    # block) shows that call in /proc/PID/syscall too, and one may wake, be stopped there and sleep again between
    # two reads: the call counts only when the process sleeps (S, D) before and after, in the same call both times.
    before = _state(pid)
    call, _fd = blocked_in(pid)
    if call in LOCK_CALLS and before in _ASLEEP and _state(pid) in _ASLEEP and blocked_in(pid)[0] == call:
        return call
    where = wchan(pid)
    return where if where.startswith(LOCK_WCHANS) else ""


_ASLEEP = ("S", "D")


def _state(pid: int) -> str:
    fields = stat_fields(pid)
    return fields[0] if fields else ""


def fd_target(pid: int, fd: int) -> str:
    """What fd `fd` of `pid` points at ("/path", "pipe:[45]"); "" once it is gone."""
    try:
        return os.readlink(f"/proc/{pid}/fd/{fd}")
    except OSError:
        return ""


def fd_is(pid: int, fd: int, identity: tuple[int, int]) -> bool:
    """Whether fd `fd` of `pid` is the file (st_dev, st_ino) `identity`."""
    try:
        st = os.stat(f"/proc/{pid}/fd/{fd}")
    except OSError:
        return False
    return (st.st_dev, st.st_ino) == identity


def open_identities(pid: int) -> dict[tuple[int, int], str]:
    """(st_dev, st_ino) -> path of every file `pid` has open; empty once it is gone."""
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return {}
    out = {}
    for fd in fds:
        try:
            st = os.stat(f"/proc/{pid}/fd/{fd}")
            out[(st.st_dev, st.st_ino)] = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
    return out


class KernelLock(NamedTuple):
    """One line of /proc/locks: a lock held, or (`waiting`) a process blocked waiting for one."""
    kind: str  # FLOCK, POSIX or OFDLCK
    mode: str  # READ or WRITE
    pid: int  # who took it (or waits); -1 for an OFD lock, which names no process
    dev: int  # the locked file's st_dev and st_ino
    ino: int
    waiting: bool = False

    def on(self, st: os.stat_result) -> bool:
        return (self.dev, self.ino) == (st.st_dev, st.st_ino)


def proc_locks() -> list[KernelLock]:
    """Every lock the kernel lists in /proc/locks, held and waited for: the one reader of that file. A waiter's
    line reads "N: -> FLOCK ..." (its fields shifted by the arrow). A flock names the process that called
    flock(), which may have exited while a child that inherited the fd keeps the lock."""
    try:
        with open("/proc/locks") as handle:
            lines = handle.read().splitlines()
    except OSError:
        return []
    out = []
    for line in lines:
        fields = line.split()
        waiting = len(fields) > 1 and fields[1] == "->"
        if waiting:
            del fields[1]
        if len(fields) < 6:
            continue
        try:
            major, minor, ino = fields[5].split(":")
            out.append(KernelLock(fields[1], fields[3], int(fields[4]), os.makedev(int(major, 16), int(minor, 16)),
                                  int(ino), waiting))
        except ValueError:
            continue
    return out


def lock_waiters(locks: list[KernelLock] | None = None) -> set[int]:
    """Processes the kernel lists as waiting for a lock (flock, POSIX record lock): the "->" lines of /proc/locks
    (or of `locks`, read from it already). (An OFD lock's waiter reads pid -1: it cannot be told apart, and proves
    nothing.)"""
    return {lock.pid for lock in (proc_locks() if locks is None else locks) if lock.waiting and lock.pid > 0}


def alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie has ended: its locks and files are gone)."""
    return stat_fields(pid)[:1] not in ([], ["Z"], ["X"])


def age(pid: int) -> float:
    """Seconds since `pid` started; 0.0 once it is gone."""
    fields = stat_fields(pid)
    try:
        with open("/proc/uptime") as handle:
            uptime = float(handle.read().split()[0])
        return max(0.0, uptime - int(fields[19]) / os.sysconf("SC_CLK_TCK"))
    except (OSError, IndexError, ValueError):
        return 0.0


def cmdline(pid: int, limit: int = 200) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            text = handle.read().rstrip(b"\0").replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""
    return text[:limit] + ("…" if len(text) > limit else "")
