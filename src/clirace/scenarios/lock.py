"""Lock experiments: a contender while the lock is held, a bounded lock wait, and release on every exit.

Each trial records what the holder and contender did, and when clirace held, released or signalled;
judging (did the contender get past the lock, is its error structured, did the next one get the lock) is
left to the checks.
"""
from __future__ import annotations

import re
import signal
import time

from .. import timing
from ..history import LockConflict, LockRelease, LockWait
from ..launch import Running
from ..vocab import CONFLICT_CODES, EventKind, HoldMode, Way
from ._box import Box, Context
from .hold import POLL, Holder, holder, stop_hold_usable

SIGNAL_WAIT = 5.0  # how long a holder may take to exit after SIGINT/SIGTERM
RETRIES = 3  # "within a few tries" of obeying the hint
DEFAULT_RETRY_MS = 1000  # used when the hint cannot be read (that is a finding of its own)
MAX_RETRY_MS = 5000  # the longest clirace waits between retries, whatever the hint says
# How an agent would read the hint it obeys; whether the error is a valid LOCK_HELD is the checks' business.
_HINT = re.compile(r'"retry_after_ms"\s*:\s*(\d+)')
SIGNALS = {Way.SIGINT: signal.SIGINT, Way.SIGTERM: signal.SIGTERM, Way.SIGKILL: signal.SIGKILL}


def _watch(box: Box, running: Running, hold: Holder, seconds: float) -> str:
    """Follow a contender while the lock is held until it exits ("ended"), opens the parked state ("reached"), or
    `seconds` pass ("running")."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if running.poll() is not None:
            return "ended"
        if hold.reached_by(running.pid):
            box.event(EventKind.REACHED_STATE, "contender")
            return "reached"
        time.sleep(POLL)
    return "running"


def conflict(ctx: Context) -> None:
    lock = ctx.spec.lock
    if lock is None:
        ctx.not_run("lock-conflict", "the spec has no lock section", "Add lock.contender and lock.hold.")
        return
    # The contender has the prompt plus its own time alone to answer, then a little longer (the lock still held)
    # so that an answer just past the prompt is its own; only then does the holder let go.
    alone = ctx.alone_seconds("contender")
    window, follow = timing.window(lock.prompt, alone), timing.follow(lock.prompt)
    for round_ in range(2):  # a second time when the clock decided the first: a timing finding is seen twice
        ctx.say("lock: contender while the lock is held" + (" (again: it outlived its time to answer)" if round_ else ""))
        outlived = False
        with ctx.box(LockConflict, "contender while the lock is held", round_) as box:
            box.fields.update(hold=lock.hold.how, prompt=lock.prompt, alone=alone, window=round(window, 3),
                              follow=follow)
            outlived = _contend(box, window, follow)
        if not outlived or ctx.trials[-1].error:
            return


def _contend(box: Box, window: float, follow: float) -> bool:
    """One contender while the lock is held; True when it was still running at the end of its window."""
    lock = box.spec.lock
    assert lock is not None
    with holder(box, longest=window + follow) as hold:
        hold.start()
        running = box.start("contender", lock.contender, timeout=window + follow + box.spec.timeout)
        seen = _watch(box, running, hold, window)
        if seen == "running":
            usage = timing.Usage(running.pid)
            seen = _watch(box, running, hold, follow)
            if seen == "running":
                box.fields["watched"] = usage.read()  # idle, or working: whether it waits or is just slow
        if seen == "reached":
            box.event(EventKind.STOPPED, "contender", "it had reached the state the holder was reading")
            running.stop("sent by clirace once it had reached the state the holder was reading")
        elif seen == "running":  # still running after its window and the follow: let the holder go, watch it end
            hold.release()
            running.deadline = time.monotonic() + box.spec.timeout
        contender = box.finish(running)
        _note_holder_gone(box, hold)
        if contender.outcome.value != "ok" and hold.alive() and any(
                code in contender.stdout + contender.stderr for code in CONFLICT_CODES):
            _follow_hint(box, hold, contender.stdout + contender.stderr)
    return contender.duration > window or seen == "running"


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
    for attempt in range(1, RETRIES + 1):
        time.sleep(waited / 1000)
        if box.run(f"retry-{attempt}", box.spec.lock.contender).exit_code == 0:
            return


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
    timeouts = {"timeout_ms": wait_ms, "timeout_s": f"{lock.wait:g}"}
    prefix = lock.wait_option or ()
    for round_ in range(2):  # a second time when the first ended outside its bounds: a timing finding is seen twice
        ctx.say(f"lock: contender asked to wait {wait_ms} ms" + (" (again: it ended outside its bounds)" if round_ else ""))
        with ctx.box(LockWait, f"contender with a {wait_ms} ms lock wait", round_) as box:
            env = {name: box.path(value, **timeouts) for name, value in lock.wait_env}  # the option, as variables
            option = [*(f"{name}={value}" for name, value in env.items()),
                      *box.argv(prefix, **timeouts)[len(ctx.spec.command):]]
            # How long the command takes when the lock is free: start-up on a loaded machine must not be
            # mistaken for a late timeout, so the bounds add it (timing.wait_bounds).
            alone = box.run("alone", lock.contender, prefix=prefix, extra_env=env, **timeouts)
            limit = lock.wait + margin + min(alone.duration, ctx.spec.timeout) + 2
            box.fields.update(hold=lock.hold.how, option=" ".join(option), wait_ms=wait_ms,
                              margin_ms=int(margin * 1000), limit_s=round(limit, 3))
            with holder(box) as hold:
                hold.start()
                box.run("contender", lock.contender, prefix=prefix, extra_env=env, timeout=limit, **timeouts)
                _note_holder_gone(box, hold)
        done = ctx.trials[-1]
        alone, contender = done.invocation("alone"), done.invocation("contender")
        if done.error or alone is None or contender is None:
            return  # judged undecided as it is: repeating it would not tell the clock from the tool
        low, high = timing.wait_bounds(wait_ms, int(margin * 1000), alone.duration)
        if not contender.timed_out and low <= contender.duration * 1000 <= high:
            return


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
        for round_ in range(2):  # a signalled holder still running at the end of the wait: seen twice
            ctx.say(f"lock: release after {way}" + (" (again: the holder outlived the wait)" if round_ else ""))
            with ctx.box(LockRelease, way.value, round_) as box:
                box.fields.update(way=way, hold=lock.hold.how, signal_wait=round(wait, 3))
                _release(box, way, wait)
            done = ctx.trials[-1]
            holder_inv = done.invocation("holder")
            if way is Way.NORMAL and holder_inv is not None and (let_go := done.event(EventKind.RELEASED, "holder")):
                finish = max(0.0, holder_inv.ended - let_go.at)
            if way not in SIGNALS or done.error or holder_inv is None or not holder_inv.timed_out:
                break


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
    box.run("next", lock.contender)
