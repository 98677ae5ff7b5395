"""Time limits judged against the tool itself, and the evidence that a process waits rather than works.

A fixed stopwatch calls a slow tool blocked and a loaded machine's start-up late. So each limit on a target's
time is the spec's figure plus what the same command took alone on this machine, at this load (its reference
run, history.Alone): `window`, `wait_bounds`. And "it waits" needs more than "it is still alive": `Usage`
reads how much CPU a process group used over a span and where its processes sleep (/proc), as run/rendezvous.py
judges a missing invocation idle. The bounds are shared by the scenarios, which repeat a trial whose outcome
a bound decided (Hypothesis replays a failure before it reports it), and by the checks, which judge it.
"""
from __future__ import annotations

import time
from collections.abc import Callable

from clirace.history import Watched
from clirace.run import procfs
from clirace.run.stopper import cpu_ns

FOLLOW_MIN = 2.0  # a contender still running after its window is followed at least this much longer
IDLE_SHARE = 0.05  # share of one CPU under which a watched process counts as idle (rendezvous.IDLE_SHARE)


def window(prompt: float, alone: float | None) -> float:
    """How long a contender has to answer while the lock is held: the prompt plus its own time alone."""
    return prompt + (alone or 0.0)


def follow(prompt: float) -> float:
    """How much longer a contender still running after its window is watched, the lock still held, so that
    its own answer is recorded (Python's sqlite3 gives up at 5 s, the default prompt): half the prompt, at
    least FOLLOW_MIN."""
    return max(FOLLOW_MIN, prompt / 2)


def wait_bounds(wait_ms: int, margin_ms: int, alone: float | None) -> tuple[int, int]:
    """(earliest, latest) ms a contender asked to wait `wait_ms` may end: half the wait, and the wait plus the
    margin plus what the same command takes with the lock free (start-up on a loaded machine is no late
    timeout)."""
    return wait_ms // 2, wait_ms + margin_ms + int((alone or 0.0) * 1000)


def signal_wait(base: float, finish: float | None) -> float:
    """How long a signalled holder may take to exit: `base` plus what the holder took to finish once let go
    normally (the release experiment's normal way), which a loaded machine stretches."""
    return base + (finish or 0.0)


STILL_POLLS = 5  # polls (1 ms apart) a process must stay asleep with its CPU time unchanged to count as settled


def settle(pids: Callable[[], list[int]], deadline: float, poll: float = 0.001) -> bool:
    """Wait until the processes `pids()` names are asleep (S) with their CPU time standing still for STILL_POLLS
    polls in a row: blocked in a call, not merely started or descheduled (a runnable process reads R). True
    when they settled before `deadline`; False when it passed, or they were gone."""
    still, last = 0, -1
    while time.monotonic() < deadline:
        members = pids()
        if not members:
            return False
        used = sum(cpu_ns(pid) for pid in members)
        asleep = all(procfs.stat_fields(pid)[:1] == ["S"] for pid in members)
        still = still + 1 if asleep and used == last else 0
        if still >= STILL_POLLS:
            return True
        last = used
        time.sleep(poll)
    return False


class Usage:
    """CPU used by a process group from now until `read()`, and its processes' states at that moment. `wrapper`:
    clirace's own strace leading the group, left out; and since every call it traces stops the tool, which counts
    as a wake, wakes are then no sign of a retry loop (the trace shows the retries themselves)."""

    def __init__(self, pgid: int, wrapper: int | None = None):
        self.pgid, self.wrapper = pgid, wrapper
        self.started = time.monotonic()
        members = self._members()  # (one scan of /proc for the group: it reads every process on the machine)
        self.cpu = self._cpu(members)
        self.switches = self._switches(members)

    def _members(self) -> list[int]:
        return [pid for pid in procfs.group(self.pgid) if pid != self.wrapper]

    @staticmethod
    def _cpu(members: list[int]) -> int:
        return sum(cpu_ns(pid) for pid in members)

    @staticmethod
    def _switches(members: list[int]) -> dict[int, int]:
        return {pid: procfs.voluntary_switches(pid) for pid in members}

    def read(self) -> Watched:
        members = self._members()
        states = tuple((procfs.stat_fields(pid)[:1] or ["?"])[0] for pid in members)
        wakes = sum(max(0, count - self.switches.get(pid, 0)) for pid, count in self._switches(members).items())
        return Watched(seconds=round(time.monotonic() - self.started, 3),
                       cpu_seconds=round(max(0, self._cpu(members) - self.cpu) / 1e9, 4), states=states,
                       sleeping_in=tuple(procfs.wchan(pid) for pid in members), wakes=wakes,
                       blocked=blocked_on_lock(self._looked(members, states), 0 if self.wrapper else wakes))

    def _looked(self, members: list[int], states: tuple[str, ...]) -> list[int]:
        """The members whose calls tell: one stopped by clirace's strace ("t") at a lock call's entry shows that
        call in /proc whether or not it would block (a LOCK_NB try)."""
        return [pid for pid, state in zip(members, states, strict=True) if state != "t"] if self.wrapper else members


RETRY_WAKES = 10  # wakes over a follow (at least FOLLOW_MIN s) that make a sleeping process a retry loop, not a sleep


def blocked_on_lock(members: list[int], wakes: int) -> str:
    """What shows one of `members` blocked on a kernel lock another process holds, "" when nothing does: blocked
    in its lock call (/proc/PID/syscall, or wchan in the kernel's lock wait); listed among /proc/locks' waiters;
    or a retry loop on the lock: it has a file open that another process holds locked (SQLite's busy loop on
    its database, a lock file polled with LOCK_NB) and woke RETRY_WAKES times or more meanwhile. A process
    asleep for one long sleep or network call shows none of these."""
    for pid in members:
        if how := procfs.waits_for_lock(pid):
            return f"process {pid} was blocked in {how}, waiting for the lock"
    locks = procfs.proc_locks()  # (read once: each read walks every lock on the machine)
    waiting = procfs.lock_waiters(locks)
    if found := next((pid for pid in members if pid in waiting), None):
        return f"process {found} was listed in /proc/locks waiting for the lock"
    if wakes >= RETRY_WAKES:
        held = {(lock.dev, lock.ino) for lock in locks if not lock.waiting and lock.pid not in members}
        for pid in members:
            locked = [path for identity, path in procfs.open_identities(pid).items() if identity in held]
            if locked:
                return (f"process {pid} kept {locked[0]} open, which another process held locked, and woke {wakes} "
                        "times meanwhile: retrying the lock")
    return ""


def idle(watched: Watched) -> bool:
    """Whether the watched processes were waiting rather than working: under IDLE_SHARE of a CPU over the span.
    (Their states are a glimpse of one instant, kept as evidence: a process polling its lock every 10 ms may
    read R at that instant, and its CPU share still says it waits.)"""
    return watched.seconds > 0 and bool(watched.states) and watched.cpu_seconds <= IDLE_SHARE * watched.seconds


def describe(watched: Watched) -> str:
    where = ", ".join(dict.fromkeys(w for w in watched.sleeping_in if w and w != "0"))
    return (f"over {watched.seconds:g} s it used {watched.cpu_seconds:g} s of CPU "
            f"({watched.cpu_seconds / watched.seconds:.1%} of one), its {len(watched.states)} process(es) "
            f"{'asleep' if all(s in ('S', 'D') for s in watched.states) else 'in states ' + ''.join(watched.states)}"
            + (f" in {where}" if where else "")) if watched.seconds > 0 else "not watched"
