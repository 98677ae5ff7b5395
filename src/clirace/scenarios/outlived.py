"""Processes a trial's finished invocations left running, and the locks they hold.

An invocation has finished once it exited and its output closed; what stays in its process group is ended then
(run/launch.py). A process that left the group (a daemon's setsid and double fork) lives on, and keeps every lock
it inherited: a flock taken through an fd it still has open, an fcntl lock it took itself. A tool whose command
leaves such a process holding its lock refuses its own next command: "the lock outlives the command".

Two places look for them, by the invocation marker in their environment (launch.INVOCATION_MARKER):
- `refused_while_left`: a command that had to find the lock free (a reference run's command, a setup command,
  the release experiment's next, a retry after the holder ended) failed while such a process lived on. Each one
  is recorded (who holds what, from /proc/locks and its open fds), left to work a bounded time, ended once it
  sits idle, and the command runs again: a refusal that ends with it was the leftover's lock.
- `settle`: before a parallel round or a lock holder starts, one still holding a kernel lock would refuse every
  invocation of it, whatever the tool does in the round; it is recorded, and ended the same way.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace

from clirace.checks import timing
from clirace.history import Invocation, Leftover
from clirace.run import _ending, procfs
from clirace.run.launch import INVOCATION_MARKER, Running

LEFTOVER_WAIT = 1.0  # how long a leftover that is still working is given to end by itself (an idle one is ended)
GONE_WAIT = 2.0  # how long an ended leftover may take to be gone


def find(runnings: list[Running], ended: dict[str, float], now: float, cgroup_procs: str | None = None) \
        -> list[Leftover]:
    """The processes left running by the finished invocations among `runnings`, with the kernel locks each holds.
    `ended`: when each invocation (by label) ended, and `now`, on the trial's clock."""
    finished = {f"{INVOCATION_MARKER}={r.marker}".encode(): r for r in runnings if r.proc.poll() is not None}
    if not finished:
        return []
    out = []
    for pid in _candidates(cgroup_procs):
        variables = procfs.environ(pid).split(b"\0")
        came_from = next((finished[v] for v in variables if v in finished), None)
        if came_from is None or not procfs.alive(pid):
            continue
        stat = procfs.stat_fields(pid)
        out.append(Leftover(pid=pid, parent=int(stat[1]) if len(stat) > 1 else 0, age=round(procfs.age(pid), 3),
                            left_by=came_from.label, command=procfs.cmdline(pid), locks=held_locks(pid),
                            outlived=round(max(0.0, now - ended.get(came_from.label, now)), 3)))
    return out


def _candidates(cgroup_procs: str | None) -> list[int]:
    """The trial's processes where it has a cgroup (cheap), else every process on the machine."""
    if cgroup_procs:
        try:
            with open(cgroup_procs) as handle:
                return [int(line) for line in handle.read().split()]
        except (OSError, ValueError):
            pass
    return list(procfs.pids())


def held_locks(pid: int) -> tuple[str, ...]:
    """The kernel locks `pid` holds, as "FLOCK WRITE /path": an fcntl (POSIX) lock it took; an OFD lock or a flock
    on a file it has open, unless whoever took the flock still has that file open too (a child keeps an inherited
    flock once its taker is gone). /proc/locks names a flock's taker by the pid it had: that pid may since belong
    to another process (pids wrap at 32768 on a busy machine), or the taker may have closed its copy; a living pid
    without the file open holds nothing of it."""
    files = procfs.open_identities(pid)
    out = []
    for lock in procfs.proc_locks():
        path = files.get((lock.dev, lock.ino))
        if path is None or lock.waiting:
            continue
        if lock.kind == "POSIX" and lock.pid != pid:
            continue
        if lock.kind == "FLOCK" and lock.pid != pid and procfs.alive(lock.pid) and \
                (lock.dev, lock.ino) in procfs.open_identities(lock.pid):
            continue
        out.append(f"{lock.kind} {lock.mode} {path}")
    return tuple(dict.fromkeys(out))


def let_go(found: list[Leftover], wait: float = LEFTOVER_WAIT) -> list[Leftover]:
    """Give them up to `wait` seconds to end by themselves while they work; end those still there once they sit
    idle (asleep, their CPU time standing still: holding on, not finishing something) or the time is up. Returns
    the records with what happened."""
    pids = [f.pid for f in found]

    def remaining() -> list[int]:
        return [pid for pid in pids if procfs.alive(pid)]

    started = time.monotonic()
    timing.settle(remaining, started + wait, poll=0.005)
    waited = round(time.monotonic() - started, 3)
    ended = remaining()
    _ending.kill_until_gone(lambda: [pid for pid in ended if procfs.alive(pid)], within=GONE_WAIT)
    # One still there (a loaded machine may take longer to end it) still holds its lock: a command run again now
    # would be refused by it, and that refusal taken for the command's own (a spec error), so it counts as running.
    survivors = set(remaining())
    return [replace(f, waited=waited, ended_by_clirace=f.pid in ended, still_running=f.pid in survivors)
            for f in found]


def wait_alone(found: list[Leftover], wait: float = LEFTOVER_WAIT) -> list[Leftover]:
    """Leftovers holding no lock clirace can name (an O_EXCL lock file is no kernel lock): they are not ended, only
    waited for while they work, up to `wait`. Returns the records, `still_running` on those that did not end."""
    started = time.monotonic()
    pids = [f.pid for f in found]
    timing.settle(lambda: [pid for pid in pids if procfs.alive(pid)], started + wait, poll=0.005)
    waited = round(time.monotonic() - started, 3)
    return [replace(f, waited=waited, still_running=procfs.alive(f.pid)) for f in found]


def refused_while_left(found: list[Leftover], refused: Invocation, again: Callable[[], Invocation]) \
        -> tuple[list[Leftover], Invocation | None]:
    """A command that needed the lock free failed while `found` lived on: let them go (those holding a kernel lock
    are ended once idle; the others are only waited for) and, when none is left, run it `again`. Returns the
    records and the second run (None when one of them still runs: the refusal cannot be told apart from its
    doing)."""
    locked = [f for f in found if f.locks]
    records = let_go(locked) + wait_alone([f for f in found if not f.locks])
    records = [replace(f, refused=refused.label) for f in records]
    if any(f.still_running for f in records):
        return records, None
    return records, again()
