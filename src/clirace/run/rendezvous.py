"""A rendezvous inside the race window, and how much a clean run proves.

Random delays cannot cover the start spread of eight start-ups on two busy cores. Instead each of N parallel
invocations runs under `commit_point_prefix` (run/stopper.py has the strace mechanism), which stops it after
every call of a chosen set on its state (and lock) files; `Rendezvous` continues each stop at once until the
invocation has *arrived* (`Arrival`): its state read is over. It waits until every live invocation has
arrived, then lets them go on, together or one at a time:

- an unlocked read-modify-write then loses updates by construction: every invocation has read the same
  state before any of them writes, whatever the load and however far apart they started;
- a correctly locked tool only costs the wait: the invocation holding the lock stops inside its critical
  section, the others are blocked on the lock (or gave up) and never arrive.

Where the read ends (scenarios/aim.py chooses it from a traced round): after the `count`-th close of a state
fd or open that found no state (`ends="close"`), counted over every thread and process of the invocation,
for a tool that reads its state through fds it closes before it locks or writes: a tool reading twice, Go's
open/fstat/read/close on whatever thread, a libuv threadpool; or after its first read call of the state
(`ends="read"`, the default) for one that keeps its reading fd open (jq) or locks before it reads.

When to stop waiting: every live invocation has arrived; or at least one has, and every one still missing is
*proven* blocked on a lock: the kernel lists it as waiting for one (/proc/locks), or its trace shows a lock
call refused and it has used under `IDLE_SHARE` of a CPU for `settle` seconds since (polling the lock).
Idleness alone proves nothing (Go parks its threads on futexes; a process waits for strace on a crowded
CPU), so an invocation that is neither arrived nor proven blocked is waited for, up to `overall` seconds
from the start (a cap, reported as such, sized from the tool's own time by `cap_for`). An invocation that
exits before arriving (refused by the lock, crashed) is not waited for.

`checks._common.detection_bound` turns a clean run into a statement: which per-round failure rate it would
have caught.
"""
from __future__ import annotations

import math
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TypedDict

from clirace.history import FileOp
from clirace.run import locking
from clirace.run.launch import Running
from clirace.run.observe import parse_line
from clirace.run.procfs import alive, lock_waiters
from clirace.run.stopper import (
    POLL,
    READ_CALLS,
    STOPPED,
    TICK,
    Continuer,
    Listings,
    Stop,
    StopLog,
    TraceChanges,
    cpu_ns,
    ended,
    path_forms,
    require,
    stop_prefix,
    wait_ended,
)

SETTLE = 0.3
# A cap, not the usual cost: a locked tool is released `settle` after its holder arrives, because the others
# are idle. Missing invocations that are still busy are waited for: under strace every syscall of a start-up
# is a ptrace stop (--seccomp-bpf would avoid that, but strace 6.1 then injects no signal at all), and a
# 1500-file start-up measured 0.03 s plain, 1.0 s traced; eight of those on two busy cores take seconds.
OVERALL = 10.0
# The cap grows with what the round asks of the machine, never below OVERALL (cap_for): `width` start-ups share
# its CPUs, each taking about what the slowest serial reference run of the same workload took (the tool's own
# time, alone, at this load), TRACED_SLOWER times that under the rendezvous' strace (the level-3 tool 64 -> 104
# ms of CPU measured, a Python tool's 1,400 syscalls each a ptrace stop), and CAP_SLACK for the scheduler.
TRACED_SLOWER = 4.0
CAP_SLACK = 2.0
# Share of one CPU above which a missing invocation counts as busy (still starting up). Measured under strace:
# level3 polling its flock every 10 ms used 0.6% (tool and strace together); a start-up gets a fair share of
# a core, 15% or more with a dozen runnable processes on two cores.
IDLE_SHARE = 0.05
PATIENCE = 1.0  # seconds to wait for every thread of a stopped invocation to join its stop
CLOSE_CALLS = "open,openat,openat2,close"  # stopped at for ends="close": a close, or an open finding nothing


def cap_for(width: int, alone: float | None) -> float:
    """How long a rendezvous of `width` invocations waits at most for the missing ones: OVERALL, or longer when
    their traced start-ups need longer on this machine. `alone`: the slowest serial reference run of the
    workload (s; None without one: OVERALL)."""
    if not alone:
        return OVERALL
    cpus = len(os.sched_getaffinity(0)) or 1
    return max(OVERALL, round(CAP_SLACK * math.ceil(width / cpus) * alone * TRACED_SLOWER, 1))


def commit_point_prefix(trace_out: Path, paths: list[str], calls: str = READ_CALLS, cwd: str | None = None,
                        also_trace: str = "") -> list[str]:
    """strace arguments that stop an invocation just after each of its calls of `calls` on `paths` (the state,
    and the lock files whose refusals prove it blocked); one trace file per process at `trace_out`.PID."""
    return stop_prefix(trace_out, paths, calls, when="1+", cwd=cwd, also_trace=also_trace)


@dataclass(frozen=True)
class Arrival:
    """Where an invocation has arrived: just after its `count`-th end of a read of `state` (absolute paths).
    Without `state`, at its first stop of any kind."""
    state: frozenset[str] = frozenset()
    ends: str = "read"  # "read": a read call on the state; "close": a close of a state fd, or an open of it that failed
    count: int = 1

    @classmethod
    def of(cls, state: list[str], ends: str = "read", count: int = 1, cwd: str | None = None) -> Arrival:
        return cls(frozenset(state) | frozenset(path_forms(state, cwd)), ends, count)

    def _on_state(self, line: str) -> FileOp | None:
        op = parse_line(line, "") if line != STOPPED else None
        return op if op is not None and op.paths and op.paths[0] in self.state else None

    def ends_read(self, line: str, opened: set[int]) -> bool:
        """Whether the call on this line ends a read of the state. `opened`: the fds its opens of the state
        returned (any thread's): a close ends a read only on one of those, not on another fd whose file now
        bears the state's name (stdout redirected to a temp file that another invocation renamed onto it)."""
        op = self._on_state(line)
        if op is None:
            return False
        if self.ends == "close":
            return (op.call == "close" and op.fd in opened) or (op.call in ("open", "openat", "openat2") and not op.ok)
        return op.call in READ_CALLS.split(",")

    def reached(self, log: StopLog) -> Stop | None:
        """Call it while the process is stopped (`Rendezvous` does, once every thread has stopped): the stop it
        arrived at, if its `count`-th read has ended by now, else None."""
        if not self.state:
            return log.stops[0] if log.stops else None
        opened = {op.fd for events in log.events.values() for line in events  # an open that succeeded has an fd
                  if (op := self._on_state(line)) is not None and op.call in ("open", "openat", "openat2") and op.ok
                  and op.fd is not None}
        ends = [(pid, line) for pid, events in log.events.items() for line in events if self.ends_read(line, opened)]
        return Stop(ends[-1][0], time.monotonic(), ends[-1][1]) if len(ends) >= self.count else None


class Meeting:
    """The one wait of both rendezvous: the file one (Rendezvous, below) and the server one (run/services/meet.py,
    whose proxy holds each invocation at its first read). Wait until every live invocation has arrived, or the
    kind of rendezvous says the missing ones are not coming (`_not_coming`: proven blocked on a lock, idle), or
    `overall` s have passed since the start. Whether a missing invocation is still busy (starting up) or idle is
    sampled from its CPU time every settle/2 s: busy while it uses over IDLE_SHARE of a CPU."""
    settle: float
    overall: float
    started: float
    why: str
    timed_out: bool
    every: float = POLL  # seconds between two looks at the arrivals

    def wait_all_arrived(self) -> bool:
        """Block until the rule says go; True if every live invocation arrived."""
        self._used: dict[str, tuple[int, float]] = {}  # label -> (CPU ns, when sampled)
        self._busy: dict[str, float] = {}  # label -> the end of the last window in which it used over IDLE_SHARE
        look = time.monotonic()
        while True:
            now = time.monotonic()
            missing = self._missing(now)
            if not missing:
                self.why = "all arrived"
                return True
            if now - self.started >= self.overall:
                self.timed_out, self.why = True, f"overall cap ({self.overall:g} s)"
                return False
            if now >= look:  # (reading every /proc file of every invocation costs: not at every poll)
                look = now + self.settle / 10
                self._sample(missing, now)
                why = self._not_coming(missing, now)
                if why:
                    self.timed_out, self.why = True, why
                    return False
            self._pause()

    def _pause(self) -> None:
        """Between two looks at the arrivals."""
        time.sleep(self.every)

    def idle_for(self, label: str, now: float) -> float:
        """Seconds since the invocation last used over IDLE_SHARE of a CPU."""
        return now - self._busy[label]

    def _sample(self, missing: list[str], now: float) -> None:
        for label in missing:
            if label not in self._used:
                self._used[label], self._busy[label] = (self._cpu(label), now), now
                continue
            used, at = self._used[label]
            if now - at >= self.settle / 2:
                cpu = self._cpu(label)
                if (cpu - used) / 1e9 > IDLE_SHARE * (now - at):
                    self._busy[label] = now
                self._used[label] = (cpu, now)

    def _missing(self, now: float) -> list[str]:
        """Take in the arrivals and exits seen by now; the labels of the live invocations that have not arrived."""
        raise NotImplementedError

    def _not_coming(self, missing: list[str], now: float) -> str:
        """Why the `missing` ones are not waited for any longer ("" to wait on)."""
        raise NotImplementedError

    def _cpu(self, label: str) -> int:
        """CPU time (ns) the invocation has used so far."""
        raise NotImplementedError


@dataclass
class Member:
    label: str
    running: Running
    log: StopLog
    arrival: Arrival = field(default_factory=Arrival)
    arrived: Stop | None = None
    blocked: str = ""  # why it counts as blocked on a lock (it never arrived): the proof
    refused_at: float | None = None  # when its trace first showed a lock call refused
    exited_before: bool = False
    _continued: dict[int, int] = field(default_factory=dict)  # tid -> its stops (StopLog.stopped) when last continued
    _stop_seen: float | None = None  # when a stop was first seen that not every thread has joined yet
    _looked: dict[int, int] = field(default_factory=dict)  # pid -> its events `_refused` has read already


@dataclass
class Rendezvous(Meeting):
    """N invocations started under `commit_point_prefix(trace_dir / label, ...)`, released together.

    Create it right after they were started (`launch.Launcher.start_together`); `wait_all_arrived()`, then
    `release()`, then `close()` once they are finished (or use it as a context manager).
    """
    members: list[Member]
    settle: float = SETTLE
    overall: float = OVERALL
    started: float = field(default_factory=time.monotonic)
    released: float | None = None
    timed_out: bool = False  # released before every live invocation had arrived
    why: str = ""  # "all arrived", "the others blocked on the lock" or "overall cap (N s)"
    continuer: Continuer | None = None
    _listings: Listings = field(default_factory=Listings, repr=False)  # the last poll's (_poll)

    @classmethod
    def of(cls, runnings: Sequence[Running], trace_dir: Path, settle: float = SETTLE, overall: float = OVERALL,
           arrival: Arrival | None = None) -> Rendezvous:
        require()
        return cls([Member(r.label, r, StopLog(trace_dir / r.label), arrival or Arrival()) for r in runnings],
                   settle, overall)

    # ------------------------------------------------------------------------------------------- waiting
    def wait_all_arrived(self) -> bool:
        self._changes = TraceChanges(m.log.prefix.parent for m in self.members)
        try:
            return super().wait_all_arrived()
        finally:
            self._changes.close()

    def _pause(self) -> None:
        self._changes.wait(TICK)  # woken by the next trace line; an exit (no line) is seen at the next tick

    def _missing(self, now: float) -> list[str]:
        self._poll(now)
        return [m.label for m in self.members if m.arrived is None and not m.exited_before]

    def _not_coming(self, missing: list[str], now: float) -> str:
        if not any(m.arrived for m in self.members):
            return ""  # (before /proc/locks is read: on a busy machine one read of it can cost milliseconds)
        waiting = lock_waiters()
        by_label = {m.label: m for m in self.members}
        if all(self._blocked(by_label[label], waiting, now) for label in missing):
            return "the others blocked on the lock"
        return ""

    def _poll(self, now: float) -> None:
        # One listing of the trace directory per poll, not one per member; _blocked and _cpu, in the same turn of
        # wait_all_arrived, read it too.
        self._listings = listings = Listings()
        for member in self.members:
            member.log.poll(listings.of(member.log))
            if member.arrived is None and member.log.pending and self._all_stopped(member, now):
                member.arrived = member.arrival.reached(member.log)
                if member.arrived is None:  # not there yet: on to its next call
                    member._continued, member._stop_seen = dict(member.log.stopped), None
                    member.log.continue_pending()
            if member.arrived is None:
                if member.refused_at is None and _refused(member.log, member._looked):
                    member.refused_at = now
                if not member.exited_before and ended(member.running):
                    member.exited_before = True  # (refused by the lock, failed, or never stopped where aimed)

    @staticmethod
    def _all_stopped(member: Member, now: float) -> bool:
        """Whether every live thread of the invocation has stopped since it was last continued. Only then are all
        its calls so far in the trace, and only then may it be continued: SIGCONT discards the stop strace
        queued for a call another thread was finishing meanwhile (two Go threads closing the state at once),
        so a read that ended then would go unstopped. A thread that never joins within PATIENCE (a stuck
        one) is not waited for."""
        member._stop_seen = member._stop_seen or now
        live = [tid for tid in member.log.pids() if alive(tid)]  # (listed anew: a thread started since counts)
        joined = all(member.log.stopped.get(tid, 0) > member._continued.get(tid, 0) for tid in live)
        return joined or now - member._stop_seen >= PATIENCE

    def _blocked(self, member: Member, waiting: set[int], now: float) -> bool:
        """Whether a missing invocation is proven blocked on a lock (module docstring); says why in `blocked`."""
        if waiting & {member.running.pid, *member.log.pids(self._listings.of(member.log))}:
            member.blocked = "the kernel lists it waiting for a lock (/proc/locks)"
        elif (member.refused_at is not None and now - member.refused_at >= self.settle
              and self.idle_for(member.label, now) >= self.settle):
            member.blocked = (f"its lock call was refused, and it used under {IDLE_SHARE:.0%} of a CPU for "
                              f"{self.settle:g} s since (waiting to try again)")
        else:
            member.blocked = ""
        return bool(member.blocked)

    def _cpu(self, label: str) -> int:
        member = next(m for m in self.members if m.label == label)
        return sum(cpu_ns(pid) for pid in {member.running.pid, *member.log.pids(self._listings.of(member.log))})

    # ------------------------------------------------------------------------------------------ release
    def release(self) -> None:
        """Continue every stopped invocation at once; later stops are continued as they come."""
        for member in self.members:
            member.log.poll()
        self.released = time.monotonic()
        self._continue_the_rest()

    def _continue_the_rest(self) -> None:
        """Continue every stop still pending, and from now on each later one as it comes, until all have ended."""
        for member in self.members:
            member.log.continue_pending()
        self.continuer = Continuer([m.log for m in self.members],
                                   lambda: all(ended(m.running) for m in self.members))

    def release_in_turn(self, each: float = 5.0, in_turn: int = 8) -> None:
        """Continue the first `in_turn` stopped invocations one at a time, in the order they arrived, each once
        the one before has ended (or `each` seconds passed); then everything else together.

        Why in turn: every one of them has read the same state. Released together, a tool whose lock comes
        after its read (or fails fast, like an O_EXCL lock file) only collides on the lock; released in turn,
        each takes the lock after the one before released it and writes back what it read before: the
        updates of the ones before are lost, deterministically. A tool that locks before it reads has only one
        invocation here (the others wait at the lock), and loses nothing.

        Why only the first eight: two in turn already lose an update by construction; the turns are sequential,
        so at 256 wide they took longer than ten minutes under strace on 2 loaded cores. The rest, released
        together, have read the same stale state too."""
        for member in self.members:
            member.log.poll()
        self.released = time.monotonic()
        released: list[Member] = []
        arrivals = [(m.arrived.at, m) for m in self.members if m.arrived is not None]
        for _, member in sorted(arrivals, key=lambda arrival: arrival[0])[:in_turn]:
            member.log.continue_pending()
            released.append(member)
            turn = Continuer([m.log for m in released], partial(ended, member.running))
            wait_ended(member.running, time.monotonic() + each)
            turn.close()
        self._continue_the_rest()

    def close(self) -> None:
        if self.continuer is None:
            self.release()
        assert self.continuer is not None  # release() starts one
        self.continuer.close()

    def __enter__(self) -> Rendezvous:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---------------------------------------------------------------------------------------- the record
    @property
    def arrived(self) -> list[str]:
        return [m.label for m in self.members if m.arrived]

    def record(self) -> Seen:
        """What the rendezvous saw, as plain data for the trial's facts (times in s from its start)."""
        def at(t: float) -> float:
            return round(t - self.started, 4)
        return {
            "arrived": {m.label: {"after_s": at(m.arrived.at), "pid": m.arrived.pid, "call": m.arrived.call[:200]}
                        for m in self.members if m.arrived},
            "exited_before_arriving": [m.label for m in self.members if m.exited_before],
            "blocked": {m.label: m.blocked for m in self.members if m.arrived is None and m.blocked},
            "timed_out": self.timed_out, "why": self.why,
            "released_after_s": at(self.released) if self.released is not None else None,
            "late_stops_continued": len(self.continuer.late) if self.continuer else 0,
            "settle_s": self.settle, "overall_s": self.overall,
        }


class Arrived(TypedDict):
    after_s: float
    pid: int
    call: str


class Seen(TypedDict):
    """Rendezvous.record(): what the rendezvous saw."""
    arrived: dict[str, Arrived]
    exited_before_arriving: list[str]
    blocked: dict[str, str]
    timed_out: bool
    why: str
    released_after_s: float | None
    late_stops_continued: int
    settle_s: float
    overall_s: float


def _refused(log: StopLog, looked: dict[int, int]) -> bool:
    """Whether the trace shows a lock call that did not take its lock (refused, or interrupted while waiting).
    Only the events after those `looked` at by an earlier call are parsed (every poll of a rendezvous asks, until
    the answer is yes: the earlier ones said no); `looked` is brought up to date."""
    found = False
    for pid, events in log.events.items():  # (events only grow: a StopLog appends)
        new, looked[pid] = events[looked.get(pid, 0):], len(events)
        found = found or any(line != STOPPED and (op := parse_line(line, "")) is not None and locking.asks(op)
                             and not op.ok for line in new)
    return found
