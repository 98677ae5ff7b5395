"""A rendezvous inside the race window, and how much a clean run proves.

Random delays cannot cover the start spread of eight start-ups on two busy cores. Instead each of N parallel
invocations runs under `commit_point_prefix` (stopper.py has the strace mechanism): it stops just after the
call that opens its race window (by default its first read of the state; for a tool that reads its state
and only then locks, its lock call). `Rendezvous` waits until every live invocation has stopped there, then
continues them all at once:

- an unlocked read-modify-write then loses updates by construction: every invocation has read the same
  state before any of them writes, whatever the load and however far apart they started;
- a correctly locked tool only costs the wait: the invocation holding the lock stops inside its critical
  section, the others are blocked on the lock (or gave up) and never arrive.

Which call: the first read of the state (`READ_CALLS`, the default) suits a tool that locks before it reads
or never locks. It stops after the *first* read call, and Python's and Go's whole-file reads make a second
one (to see EOF) only after the release: a late reader of a file rewritten in place may then read torn
content and fail, a real outcome but not a lost update. For a tool that reads and only then locks, stop at
its lock call instead (`stopper.LOCK_CALLS[kind]` on the lock file): every invocation has read all of its
state by then, the first holds the lock and the others have been refused once and retry after the release.

When to stop waiting: all live invocations have arrived; or at least one has, `settle` seconds have passed
since the last arrival, and every one still missing has been idle meanwhile (under `IDLE_SHARE` of a CPU: blocked
on a lock, or polling it, rather than still starting up on a crowded CPU); or `overall` seconds
have passed since the start (a cap for invocations that stay busy without arriving). An invocation that
exits before arriving (refused by the lock, crashed) is not waited for.

`checks._common.detection_bound` turns a clean run into a statement: which per-round failure rate it would
have caught.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

from .stopper import POLL, READ_CALLS, Continuer, Stop, StopLog, cpu_ns, ended, require, stop_prefix

SETTLE = 0.3
# A cap, not the usual cost: a locked tool is released `settle` after its holder arrives, because the others
# are idle. Missing invocations that are still busy are waited for: under strace every syscall of a start-up
# is a ptrace stop (--seccomp-bpf would avoid that, but strace 6.1 then injects no signal at all), and a
# 1500-file start-up measured 0.03 s plain, 1.0 s traced; eight of those on two busy cores take seconds.
OVERALL = 10.0
# Share of one CPU above which a missing invocation counts as busy (still starting up). Measured under strace:
# level3 polling its flock every 10 ms used 0.6% (tool and strace together); a start-up gets a fair share of
# a core, 15% or more with a dozen runnable processes on two cores.
IDLE_SHARE = 0.05


def commit_point_prefix(trace_out: Path, paths: list[str], calls: str = READ_CALLS, cwd: str | None = None,
                        also_trace: str = "") -> list[str]:
    """strace arguments that stop an invocation just after its first call of each of `calls` on `paths`
    (the state file and, for the lock call, the lock file); one trace file per process at `trace_out`.PID."""
    return stop_prefix(trace_out, paths, calls, when=1, cwd=cwd, also_trace=also_trace)


@dataclass
class Member:
    label: str
    running: object  # launch.Running, or anything with `pid` (and `proc`)
    log: StopLog
    arrived: Stop | None = None
    exited_before: bool = False
    _cpu: int = 0  # CPU time (ns) at the last snapshot, taken every settle/2
    _cpu_at: float = 0.0
    _cpu_changed: float = 0.0  # the end of the last window in which it was busy (used over IDLE_SHARE)


@dataclass
class Rendezvous:
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
    why: str = ""  # "all arrived", "the others idle" (settle rule) or "overall cap"
    continuer: Continuer | None = None

    @classmethod
    def of(cls, runnings, trace_dir: Path, settle: float = SETTLE, overall: float = OVERALL) -> "Rendezvous":
        require()
        return cls([Member(r.label, r, StopLog(trace_dir / r.label)) for r in runnings], settle, overall)

    # ------------------------------------------------------------------------------------------- waiting
    def wait_all_arrived(self) -> bool:
        """Block until the release rule (module docstring) says go; True if every live invocation arrived."""
        now = time.monotonic()
        for member in self.members:
            member._cpu, member._cpu_at, member._cpu_changed = self._cpu(member), now, now
        next_idle_check = now
        while True:
            now = time.monotonic()
            self._poll()
            missing = [m for m in self.members if m.arrived is None and not m.exited_before]
            if not missing:
                self.why = "all arrived"
                return True
            if now - self.started >= self.overall:
                self.timed_out, self.why = True, "overall cap"
                return False
            if now >= next_idle_check:
                next_idle_check = now + self.settle / 10
                self._note_cpu(missing, now)
            last = max((m.arrived.at for m in self.members if m.arrived), default=None)
            if (last is not None and now - last >= self.settle
                    and all(now - m._cpu_changed >= self.settle for m in missing)):
                self.timed_out, self.why = True, "the others idle"
                return False
            time.sleep(POLL)

    def _poll(self) -> None:
        for member in self.members:
            stops = member.log.poll()
            if stops and member.arrived is None:
                member.arrived = stops[0]
            if member.arrived is None and not member.exited_before and ended(member.running):
                member.log.poll()
                member.exited_before = not member.log.stops
                member.arrived = member.log.stops[0] if member.log.stops else None

    def _cpu(self, member: Member) -> int:
        return sum(cpu_ns(pid) for pid in {member.running.pid, *member.log.pids()})

    def _note_cpu(self, missing: list[Member], now: float) -> None:
        for member in missing:
            if now - member._cpu_at >= self.settle / 2:
                used = self._cpu(member)
                if (used - member._cpu) / 1e9 > IDLE_SHARE * (now - member._cpu_at):
                    member._cpu_changed = now
                member._cpu, member._cpu_at = used, now

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

    def release_in_turn(self, each: float = 5.0) -> None:
        """Continue the stopped invocations one at a time, in the order they arrived, each once the one before
        has ended (or `each` seconds passed); then everything else.

        Why in turn: every one of them has read the same state. Released together, a tool whose lock comes
        after its read (or fails fast, like an O_EXCL lock file) only collides on the lock; released in turn,
        each takes the lock after the one before released it and writes back what it read before: the
        updates of the ones before are lost, deterministically. A tool that locks before it reads has only one
        invocation here (the others wait at the lock), and loses nothing."""
        for member in self.members:
            member.log.poll()
        self.released = time.monotonic()
        released: list[Member] = []
        for member in sorted((m for m in self.members if m.arrived), key=lambda m: m.arrived.at):
            member.log.continue_pending()
            released.append(member)
            turn = Continuer([m.log for m in released], lambda m=member: ended(m.running))
            deadline = time.monotonic() + each
            while not ended(member.running) and time.monotonic() < deadline:
                time.sleep(POLL)
            turn.close()
        self._continue_the_rest()

    def close(self) -> None:
        if self.continuer is None:
            self.release()
        self.continuer.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # ---------------------------------------------------------------------------------------- the record
    @property
    def arrived(self) -> list[str]:
        return [m.label for m in self.members if m.arrived]

    def record(self) -> dict:
        """What the rendezvous saw, as plain data for the trial's facts (times in s from its start)."""
        at = lambda t: round(t - self.started, 4)  # noqa: E731
        return {
            "arrived": {m.label: {"after_s": at(m.arrived.at), "pid": m.arrived.pid, "call": m.arrived.call[:200]}
                        for m in self.members if m.arrived},
            "exited_before_arriving": [m.label for m in self.members if m.exited_before],
            "timed_out": self.timed_out, "why": self.why,
            "released_after_s": at(self.released) if self.released is not None else None,
            "late_stops_continued": len(self.continuer.late) if self.continuer else 0,
            "settle_s": self.settle, "overall_s": self.overall,
        }
