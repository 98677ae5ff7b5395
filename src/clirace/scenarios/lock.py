"""Lock experiments: a contender while the lock is held, a bounded lock wait, and release on every exit.

Each trial records what the holder and contender did; judging (is the error structured, did the next
invocation get the lock) is left to the checks.
"""
from __future__ import annotations

import signal
import time

from ..history import Trial
from ..lockerror import find_error, succeeded
from ._box import Context
from ._hold import POLL, Holder

SIGNAL_WAIT = 5.0  # how long a holder may take to exit after SIGINT/SIGTERM
RETRIES = 3  # "within a few tries" of obeying the hint
DEFAULT_RETRY_MS = 1000  # used when the hint is unusable (that is a finding of its own)
MAX_RETRY_MS = 5000  # the longest clirace waits between retries, whatever the hint says
WAYS = ("normal", "error", "sigint", "sigterm", "sigkill")


def _watch(box, running, holder: Holder, seconds: float) -> str:
    """Follow a contender while the lock is held: 'exited', 'reached' (it opened the parked state) or 'waiting'."""
    deadline = time.monotonic() + seconds
    check_reach = holder.hold.how == "park"
    while time.monotonic() < deadline:
        if running.poll() is not None:
            return "exited"
        if check_reach and holder.reached_by(running.pid):
            return "reached"
        time.sleep(POLL)
    return "waiting"


def conflict(ctx: Context) -> list[Trial]:
    lock = ctx.spec.lock
    if lock is None:
        return []
    ctx.say("lock: contender while the lock is held")
    trial = Trial("lock-conflict", "contender while the lock is held")
    with ctx.box(trial) as box:
        baseline = box.run("baseline", lock.contender)
        trial.facts.update(hold=lock.hold.how, baseline_ok=baseline.ok, prompt=lock.prompt)
        with Holder(box) as holder:
            trial.facts["ready_after"] = round(holder.start(), 4)
            running = box.start("contender", lock.contender)
            state = _watch(box, running, holder, lock.prompt)
            trial.facts["while_held"] = state
            trial.facts["holder_alive"] = holder.hold.how == "take" or holder._alive()
            if state == "waiting":
                holder.release()
                running.deadline = time.monotonic() + ctx.spec.timeout
                trial.facts["after_release"] = "finished"
            elif state == "reached":
                running.stop("sent by clirace once it had reached the state the holder was reading")
            contender = box.finish(running)
            printed = find_error(contender.stdout, contender.stderr)
            if state == "exited" and printed.says_lock_held:
                _follow_hint(ctx, box, holder, printed.error.get("retry_after_ms"), trial)
    return [trial]


def _follow_hint(ctx, box, holder, hint, trial):
    """Act as an agent obeying retry_after_ms once the holder has finished: it should get through."""
    holder.release()
    wait_ms = hint if isinstance(hint, int) and not isinstance(hint, bool) and hint >= 0 else DEFAULT_RETRY_MS
    waited = min(wait_ms, MAX_RETRY_MS)
    trial.facts["retry"] = {"hint": hint, "waited_ms": waited, "tries": 0, "succeeded": False}
    for attempt in range(1, RETRIES + 1):
        time.sleep(waited / 1000)
        inv = box.run(f"retry-{attempt}", ctx.spec.lock.contender)
        trial.facts["retry"]["tries"] = attempt
        if succeeded(inv):  # a LOCK_HELD with exit 0 is not getting through
            trial.facts["retry"]["succeeded"] = True
            return


def wait(ctx: Context) -> list[Trial]:
    lock = ctx.spec.lock
    if lock is None or lock.wait_option is None:
        return []
    wait_ms = int(lock.wait * 1000)
    margin = max(1.0, lock.wait * 0.5)
    ctx.say(f"lock: contender asked to wait {wait_ms} ms")
    trial = Trial("lock-wait", f"contender with a {wait_ms} ms lock wait")
    with ctx.box(trial) as box:
        option = box.argv(lock.wait_option, timeout_ms=wait_ms, timeout_s=f"{lock.wait:g}")[len(ctx.spec.command):]
        # How long the command takes when the lock is free: start-up on a loaded machine must not be
        # mistaken for a late timeout, so it is added to the margin.
        alone = box.run("alone", lock.contender, prefix=lock.wait_option, timeout_ms=wait_ms, timeout_s=f"{lock.wait:g}")
        margin += min(alone.duration, ctx.spec.timeout) if alone.ok else 0
        trial.facts.update(option=" ".join(option), wait_ms=wait_ms, margin_ms=int(margin * 1000),
                           limit_s=lock.wait + margin + 2, alone_ok=alone.ok)
        with Holder(box) as holder:
            holder.start()
            box.run("contender", lock.contender, prefix=lock.wait_option, timeout=lock.wait + margin + 2,
                    timeout_ms=wait_ms, timeout_s=f"{lock.wait:g}")
            trial.facts["holder_alive"] = holder.hold.how == "take" or holder._alive()
    return [trial]


def release(ctx: Context) -> list[Trial]:
    lock = ctx.spec.lock
    if lock is None or lock.hold.how == "take":
        return []
    trials = []
    for way in WAYS:
        trial = Trial("lock-release", way)
        trials.append(trial)
        if way == "error" and lock.error_command is None and lock.hold.invalid_content is None:
            trial.facts["untestable"] = "no lock.error_command and no lock.hold.park.invalid_content"
            continue
        ctx.say(f"lock: release after {way}")
        with ctx.box(trial) as box:
            if way == "error" and lock.error_command is not None:
                holder_inv = box.run("holder", lock.error_command)
            else:
                with Holder(box, pty=(way == "sigint")) as holder:
                    holder.start()
                    if way == "normal":
                        holder_inv = holder.release()
                    elif way == "error":
                        holder_inv = holder.release(invalid=True)
                    else:
                        sig = {"sigint": signal.SIGINT, "sigterm": signal.SIGTERM, "sigkill": signal.SIGKILL}[way]
                        holder_inv = holder.interrupt(sig, SIGNAL_WAIT)
            trial.facts["holder_timed_out"] = holder_inv.timed_out
            box.run("next", lock.contender)
    return trials
