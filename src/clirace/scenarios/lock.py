"""Lock experiments: a contender while the lock is held, a bounded lock wait, and release on every exit.

Each trial records what the holder and contender did, and when clirace held, released or signalled;
judging (did the contender get past the lock, is its error structured, did the next one get the lock) is
left to the checks. A command that writes a key ({key} and {value}) has it read back once the holder has ended
(effects.py); a command that must find the lock free and is refused by a process an earlier one left holding it
is run again once that process has gone (Box.run_free, outlived.py).
"""
from __future__ import annotations

import dataclasses
import os
import re
import signal
import time
from collections.abc import Callable
from typing import TypedDict

from clirace.checks import timing
from clirace.history import FileOp, LockConflict, LockRelease, LockWait, Watched
from clirace.history.vocab import CONFLICT_CODES, EventKind, HoldMode, Way
from clirace.run import locking, observe, procfs
from clirace.run.launch import Running
from clirace.scenarios import effects
from clirace.scenarios._box import Box, Context
from clirace.scenarios.hold import POLL, Holder, holder, stop_hold_usable

SIGNAL_WAIT = 5.0  # how long a holder may take to exit after SIGINT/SIGTERM
RETRIES = 3  # "within a few tries" of obeying the hint
DEFAULT_RETRY_MS = 1000  # used when the hint cannot be read (that is a finding of its own)
MAX_RETRY_MS = 5000  # the longest clirace waits between retries, whatever the hint says


def twice(attempt: Callable[[int], bool]) -> None:
    """A finding the clock decided is re-run once before it is reported: `attempt(round)` runs one trial (round 0,
    then 1) and says whether the clock decided it; only then is it run a second time. The three lock experiments
    whose outcome a clock can decide (a contender past its window or close to it, a wait outside its bounds, a
    signalled holder still running) go through here, each saying what "the clock decided" means for it."""
    for round_ in range(2):
        if not attempt(round_):
            return


# How an agent would read the hint it obeys; whether the error is a valid LOCK_HELD is the checks' business.
_HINT = re.compile(r'"retry_after_ms"\s*:\s*(\d+)')
SIGNALS = {Way.SIGINT: signal.SIGINT, Way.SIGTERM: signal.SIGTERM, Way.SIGKILL: signal.SIGKILL}


class Stdin:
    """The conflict contender's stdin: a pipe nobody writes to, as an agent's inherited pipe or terminal, where
    /dev/null would answer a question at once. A contender blocked reading it (/proc/PID/syscall) after printing
    something asked; one that reads it without a word is reading input, not asking, and is given the end of
    input at once, as /dev/null would have."""
    SETTLE = 0.1  # how long it must sit in its read before what it printed is taken as all it printed

    def __init__(self) -> None:
        self.read_end, self._answer = os.pipe()
        self.name = f"pipe:[{os.fstat(self.read_end).st_ino}]"
        self._since: float | None = None

    def started(self) -> None:
        os.close(self.read_end)

    def end(self) -> None:
        """End of input: a tool that asked answers itself now."""
        answer, self._answer = self._answer, -1  # before the close: an end interrupted after it is not closed again
        if answer >= 0:
            os.close(answer)

    def asked(self, running: Running) -> str | None:
        """What it printed before it sat reading its stdin (its question), or None while it does not."""
        if self._answer < 0 or not _reads_stdin(running.pid, self.name):
            self._since = None
            return None
        now = time.monotonic()
        self._since = self._since or now
        if now - self._since < self.SETTLE:  # what it printed may still be on its way through the pipe
            return None
        printed = " ".join(f"{running.printed_on('stdout')} {running.printed_on('stderr')}".split())
        if not printed:
            self.end()
            return None
        return printed[-300:]


def _watch(box: Box, running: Running, hold: Holder, seconds: float, stdin: Stdin | None = None,
           waiting: Waiting | None = None) -> str:
    """Follow a contender while the lock is held until it exits ("ended"), opens the parked state ("reached"), sits
    asking on `stdin` ("asked"), or `seconds` pass ("running"); looking meanwhile at what it `waiting` for."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if waiting is not None:
            waiting.look()
        if running.poll() is not None:
            return "ended"
        if hold.reached_by(running.pid):
            box.event(EventKind.REACHED_STATE, running.label)
            return "reached"
        if stdin is not None and (question := stdin.asked(running)) is not None:
            box.event(EventKind.ASKED, running.label, question)
            return "asked"
        time.sleep(POLL)
    return "running"


class Waiting:
    """What shows a contender blocked on the held lock while it waits, looked at every LOOK seconds from its start
    (a contender asked to wait ends by itself, so it is looked at while it waits, not after): its lock call or its
    place among the kernel's waiters, a retry loop on the locked file (timing.blocked_on_lock), the parked state
    file it waits to lock (Holder.waiting_at_state), or PostgreSQL's lock wait. `watched` keeps the first look
    that showed it blocked, else the last one; idle alone proves nothing (a sleep is idle too)."""
    LOOK = 0.05

    def __init__(self, box: Box, running: Running, hold: Holder, traced: bool = False):
        self.box, self.running, self.hold = box, running, hold
        self.usage = timing.Usage(running.pid, wrapper=running.pid if traced else None)
        self.next = time.monotonic() + self.LOOK
        self.watched: Watched | None = None

    def look(self) -> None:
        if (self.watched is not None and self.watched.blocked) or time.monotonic() < self.next:
            return
        self.next = time.monotonic() + self.LOOK
        watched = self.usage.read()
        if not [s for s in watched.states if s != "Z"]:  # it has ended: what was seen before stands
            return
        if not watched.blocked and (how := self.hold.waiting_at_state(self.running.pid)):
            watched = dataclasses.replace(watched, blocked=how)
        if not watched.blocked and (how := _server_lock_wait(self.box)):
            watched = dataclasses.replace(watched, blocked=how)
        self.watched = watched

    @property
    def proof(self) -> str:
        """What any look showed of the contender blocked on the held lock, "" when none did."""
        return self.watched.blocked if self.watched is not None else ""

    def traced(self, ops: tuple[FileOp, ...]) -> None:
        """Once it has ended: what its trace of lock calls shows, when nothing seen of it as it waited did."""
        if (self.watched is None or not self.watched.blocked) and (proof := locking.waited_in_trace(ops)):
            self.watched = dataclasses.replace(self.watched or Watched(seconds=0.0, cpu_seconds=0.0), blocked=proof)


def _reads_stdin(pgid: int, pipe: str) -> bool:
    """A process of the group is blocked reading its fd 0, which is `pipe`."""
    for pid in procfs.group(pgid):
        call, fd = procfs.blocked_in(pid)
        if call in procfs.READS and fd == 0 and procfs.fd_target(pid, 0) == pipe:
            return True
    return False


def conflict(ctx: Context) -> None:
    lock = ctx.spec.lock
    if lock is None:
        ctx.not_run("lock-conflict", "the spec has no lock section", "Add lock.contender and lock.hold.")
        return
    # The contender has the prompt plus its own time alone to answer, then a little longer (the lock still held)
    # so that an answer just past the prompt is its own, and longer still, up to tool.timeout, while it is shown
    # retrying the lock (_while_retrying); only then does the holder let go.
    alone = ctx.alone_seconds("contender")
    window, follow = timing.window(lock.prompt, alone), timing.follow(lock.prompt)
    close_from = min(window, timing.window(lock.prompt, ctx.alone_seconds("contender", fastest=True)))

    def attempt(round_: int) -> bool:  # decided by the clock: the contender outlived its time to answer, or nearly
        ctx.say("lock: contender while the lock is held" + (" (again: it outlived its time to answer, or nearly)"
                                                             if round_ else ""))
        outlived = False
        with ctx.box(LockConflict, "contender while the lock is held", round_) as box:
            box.fields.update(hold=lock.hold.how, prompt=lock.prompt, alone=alone, window=round(window, 3),
                              close_from=round(close_from, 3), follow=follow)
            outlived = _contend(box, window, follow, close_from)
        return outlived and not ctx.trials[-1].error
    twice(attempt)


def _contend(box: Box, window: float, follow: float, close_from: float) -> bool:
    """One contender while the lock is held; True when the clock decided it: still running at the end of its
    window, or ended after `close_from` (too close to the window to tell on this machine at this load)."""
    lock = box.spec.lock
    assert lock is not None
    effects.state_before(box)
    # A contender shown retrying the held lock may be followed until it has run tool.timeout: held that long.
    with holder(box, longest=max(window + follow, box.spec.timeout)) as hold:
        hold.start()
        stdin = Stdin()  # a tool that asks on a conflict ("overwrite? [y/N]") waits there, as under an agent
        try:
            running = box.start("contender", lock.contender, timeout=window + follow + box.spec.timeout,
                                stdin=stdin.read_end, **effects.values(box, "contender", lock.contender))
        except BaseException:
            stdin.end()
            raise
        finally:
            stdin.started()
        try:
            seen = _watch(box, running, hold, window, stdin)
            if seen == "running":
                usage, waiting = timing.Usage(running.pid), Waiting(box, running, hold)
                seen = _watch(box, running, hold, follow, stdin, waiting)
                if seen == "running":
                    watched = _blocked(box, usage)  # idle, or working: whether it waits or is just slow
                    if not watched.blocked and (proof := waiting.proof):  # seen blocked before the follow's end
                        watched = dataclasses.replace(watched, blocked=proof)
                    box.fields["watched"] = watched
                    if watched.blocked and not hold.waiting_at_state(running.pid):
                        seen = _while_retrying(box, running, hold, stdin, follow)
        finally:
            stdin.end()  # a tool that asked answers itself now, the lock still held
        if seen == "reached":
            box.event(EventKind.STOPPED, "contender", "it had reached the state the holder was reading")
            running.stop("sent by clirace once it had reached the state the holder was reading")
        elif seen == "running" and (how := hold.waiting_at_state(running.pid)):
            # It locks the state file itself and holds the pipe open: let go, it would read the pipe, not the state.
            box.event(EventKind.BLOCKED_ON_LOCK, "contender", how)
            running.stop("sent by clirace: it waited for the lock on the parked pipe, which is not the state")
        elif seen == "running":  # still running after its window and the follow: let the holder go, watch it end
            hold.release()
            running.set_deadline(box.spec.timeout)
        contender = box.finish(running)
        _note_holder_gone(box, hold)
        if contender.outcome.value != "ok" and hold.alive() and any(
                code in contender.stdout + contender.stderr for code in CONFLICT_CODES):
            _follow_hint(box, hold, contender.stdout + contender.stderr)
        _let_holder_finish(box, hold)
    effects.read_back(box)
    return seen != "asked" and (contender.duration > window or seen == "running" or
                                (seen == "ended" and contender.duration > close_from))


def _blocked(box: Box, usage: timing.Usage) -> Watched:
    """The contender since `usage` began: with what shows it blocked on the held lock, where anything does."""
    watched = usage.read()
    if not watched.blocked and (how := _server_lock_wait(box)):
        watched = dataclasses.replace(watched, blocked=how)
    return watched


def _server_lock_wait(box: Box) -> str:
    """A contender waiting on the server's row or advisory lock, as PostgreSQL shows it; "" when it shows none."""
    waits = box.served.postgres.lock_waits() if box.served and box.served.postgres else []
    return f"the server shows {waits[0]}" if waits else ""


def _while_retrying(box: Box, running: Running, hold: Holder, stdin: Stdin, period: float) -> str:
    """Past its follow, a contender shown blocked on the held lock over the last `period` (its lock call, a waiter
    in /proc/locks, a retry loop on the locked file, a server lock wait) is followed one `period` more, the lock
    still held, and again while each period shows it, until it has run tool.timeout in all: a tool whose own
    lock retry outlasts the prompt (15 s for some system tools, 5 s for SQLite's busy timeout) then gives its own
    answer, which is the evidence. Returns what `_watch` saw last; "running" when the proof stopped or the
    time ran out, and the holder is then let go as after the follow. `retried` records the extra seconds."""
    seen, start, cap = "running", time.monotonic(), running.started + box.spec.timeout
    while seen == "running" and (left := cap - time.monotonic()) > 0:
        waiting = Waiting(box, running, hold)  # looked at every 50 ms: one look showing it blocked is enough
        seen = _watch(box, running, hold, min(period, left), stdin, waiting)
        if seen == "running" and not waiting.proof:
            break  # idle or working with nothing to show it waits: no reason to hold the lock any longer
    box.fields["retried"] = round(time.monotonic() - start, 3)
    return seen


def _let_holder_finish(box: Box, hold: Holder) -> None:
    """A holder that writes a key of its own ends normally, so that its key can be read back; another is ended
    with the trial."""
    if hold.alive() and "holder" in box.fields.get("effects", {}):
        hold.release()


def _note_holder_gone(box: Box, hold: Holder) -> None:
    """A tool holder that exited by itself while the contender ran may have let it through: say so."""
    if hold.tool_holds and hold.invocation is None and not hold.alive():
        box.event(EventKind.HOLDER_GONE, "holder")


def _follow_hint(box: Box, hold: Holder, printed: str) -> None:
    """Act as an agent obeying retry_after_ms once the holder has finished: it should get through."""
    assert box.spec.lock is not None
    hold.release()
    found = _HINT.search(printed)
    waited = min(int(found.group(1)) if found else DEFAULT_RETRY_MS, MAX_RETRY_MS)
    box.fields["retry_wait_ms"] = waited
    contender = box.spec.lock.contender
    for attempt in range(1, RETRIES + 1):
        time.sleep(waited / 1000)
        label = f"retry-{attempt}"
        if box.run_free(label, box.argv(contender, **effects.values(box, label, contender))).ok:  # answered, and succeeded
            return


class _Timeouts(TypedDict):
    """The placeholders lock.wait_option and lock.wait_env may name: the wait asked of the contender."""
    timeout_ms: int
    timeout_s: str


def wait(ctx: Context) -> None:
    lock = ctx.spec.lock
    if lock is not None and lock.never_waits:
        ctx.not_run("lock-wait", "the spec says the tool never waits for a held lock: its prompt answer in the "
                    "lock-conflict experiment is its lock timeout (of 0)", declared="never-waits")
        return
    if lock is None or (lock.wait_option is None and not lock.wait_env):
        ctx.not_run("lock-wait", "the spec names no lock-wait option",
                    'Add lock.wait_option, e.g. ["--lock-timeout", "{timeout_ms}"], or lock.wait_env.')
        return
    wait_ms = int(lock.wait * 1000)
    margin = max(1.0, lock.wait * 0.5)
    timeouts = _Timeouts(timeout_ms=wait_ms, timeout_s=f"{lock.wait:g}")
    prefix = lock.wait_option or ()

    def attempt(round_: int) -> bool:  # decided by the clock: the contender ended outside its bounds
        ctx.say(f"lock: contender asked to wait {wait_ms} ms" + (" (again: it ended outside its bounds)" if round_ else ""))
        with ctx.box(LockWait, f"contender with a {wait_ms} ms lock wait", round_) as box:
            env = {name: box.path(value, **timeouts) for name, value in lock.wait_env}  # the option, as variables
            option = [*(f"{name}={value}" for name, value in env.items()),
                      *box.argv(prefix, **timeouts)[len(ctx.spec.command):]]
            # How long the command takes when the lock is free: start-up on a loaded machine must not be
            # mistaken for a late timeout, so the bounds add it (timing.wait_bounds).
            alone = box.run("alone", lock.contender, prefix=prefix, extra_env=env, **timeouts,
                            **effects.values(box, "alone", lock.contender))
            limit = lock.wait + margin + min(alone.duration, ctx.spec.timeout) + 2
            box.fields.update(hold=lock.hold.how, option=" ".join(option), wait_ms=wait_ms,
                              margin_ms=int(margin * 1000), limit_s=round(limit, 3))
            effects.state_before(box)  # after `alone`, whose change is already there
            with holder(box) as hold:
                hold.start()
                # Its lock calls traced, when strace can: a retry loop on a lock file shows in no /proc entry.
                wrap = observe.lock_prefix(box.trace_dir / "contender") if ctx.strace else ()
                running = box.start("contender", lock.contender, prefix=prefix, extra_env=env, timeout=limit,
                                    wrap=wrap, **timeouts, **effects.values(box, "contender", lock.contender))
                waiting = Waiting(box, running, hold, traced=bool(wrap))
                if _watch(box, running, hold, limit + 1, waiting=waiting) == "reached":
                    box.event(EventKind.STOPPED, "contender", "it had reached the state the holder was reading")
                    running.stop("sent by clirace once it had reached the state the holder was reading")
                box.finish(running)
                if wrap:
                    waiting.traced(box.file_ops("contender"))
                box.fields["watched"] = waiting.watched
                _note_holder_gone(box, hold)
                _let_holder_finish(box, hold)
            effects.read_back(box)
        done = ctx.trials[-1]
        ran_alone, contended = done.invocation("alone"), done.invocation("contender")
        if done.error or ran_alone is None or contended is None:
            return False  # judged undecided as it is: repeating it would not tell the clock from the tool
        low, high = timing.wait_bounds(wait_ms, int(margin * 1000), ran_alone.duration)
        return contended.timed_out or not low <= contended.duration * 1000 <= high
    twice(attempt)


def release(ctx: Context) -> None:
    lock = ctx.spec.lock
    if lock is None:
        ctx.not_run("lock-release", "the spec has no lock section", "Add lock.contender and lock.hold.")
        return
    if lock.hold.kind is not None and lock.hold.kind.on_server:
        ctx.not_run("lock-release", f"with lock.hold.take {lock.hold.kind} clirace holds the lock itself, and strace "
                    "cannot stop a real invocation at a lock kept in a server",
                    "Add lock.hold.command (a hook that takes the lock and waits for {release_file}) so the tool "
                    "is the holder, instead of lock.hold.take.")
        return
    if lock.hold.own:
        ctx.not_run("lock-release", "lock.hold.run is a helper program, not the tool: how it lets go of the lock says "
                    "nothing of how the tool does",
                    "Add lock.hold.command (a hook of the tool's own) or lock.hold.park so that the tool is the holder.")
        return
    if lock.hold.how is HoldMode.TAKE and (why := stop_hold_usable() or ("" if ctx.strace else ctx.strace_note)):
        ctx.not_run("lock-release", f"with lock.hold.take the tool is held at its lock by strace, which cannot "
                    f"here ({why})", "Install strace, or add lock.hold.command or lock.hold.park so the tool holds "
                    "the lock.")
        return
    finish: float | None = None  # how long the holder took to end once let go normally: the signal wait adds it
    for way in Way:
        if way is Way.ERROR and lock.error_command is None and lock.hold.invalid_content is None:
            ctx.not_run("lock-release/error", "no lock.error_command and no lock.hold.park.invalid_content",
                        "Add lock.error_command (a command that takes the lock, then fails) or "
                        "lock.hold.park.invalid_content.")
            continue
        wait = timing.signal_wait(SIGNAL_WAIT, finish)

        def attempt(round_: int, way: Way = way, wait: float = wait) -> bool:
            """Decided by the clock: a signalled holder still running at the end of the wait."""
            nonlocal finish
            ctx.say(f"lock: release after {way}" + (" (again: the holder outlived the wait)" if round_ else ""))
            with ctx.box(LockRelease, way.value, round_) as box:
                box.fields.update(way=way, hold=lock.hold.how, signal_wait=round(wait, 3))
                _release(box, way, wait)
            done = ctx.trials[-1]
            holder_inv = done.invocation("holder")
            if way is Way.NORMAL and holder_inv is not None and (let_go := done.event(EventKind.RELEASED, "holder")):
                finish = max(0.0, holder_inv.ended - let_go.at)
            return way in SIGNALS and not done.error and holder_inv is not None and holder_inv.timed_out
        twice(attempt)


def _release(box: Box, way: Way, wait: float) -> None:
    """The holder takes the lock and ends `way` (signals given `wait` seconds to take effect); then the next."""
    lock = box.spec.lock
    assert lock is not None
    if way is Way.ERROR and lock.error_command is not None:
        box.run("holder", lock.error_command)
    else:
        with holder(box, pty=(way is Way.SIGINT), tool=True) as hold:
            hold.start()
            if way is Way.NORMAL:
                hold.release()
            elif way is Way.ERROR:
                hold.release(invalid=True)
            else:
                hold.interrupt(SIGNALS[way], wait)
    # Nothing of the trial runs now: refused by a process the holder left holding its lock, it runs again once
    # that process has gone, and the leftover is on record (the lock outlived its command).
    effects.state_before(box)
    box.run_free("next", box.argv(lock.contender, **effects.values(box, "next", lock.contender)))
    effects.read_back(box)
