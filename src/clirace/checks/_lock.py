"""What the lock-conflict trial shows: whether it can be judged, what the contender did while the lock was held,
and whether it got past the lock. Shared by lock-excludes, lock-error-structured, lock-released-on-exit and
lock-wait-timeout (for a tool that never waits).

Time is judged against the tool itself: the contender had the prompt plus its own time alone (its `window`)
to answer, then was followed a little longer with the lock still held. An outcome the clock decided (it
outlived its window) was run twice; two runs that disagree are flaky, and decide nothing."""
from __future__ import annotations

from ..findings import NOT_TESTED, UNKNOWN, Verdict
from ..history import History, LockConflict, Trial
from ..lockerror import succeeded
from ..timing import describe, idle
from ..vocab import EventKind
from ._common import not_run_verdict
from .reference import lock_undecided

NO_LOCK = ("the spec has no lock section", "Add lock.contender and lock.hold.")
STATES = {"reached": "opened the state the holder was reading", "waiting": "was still running when the holder let go",
          "late": "answered only after its time to answer", "exited": "answered within its time to answer"}


def conflict_trial(history: History, check_id: str) -> LockConflict | Verdict:
    """The lock-conflict trial when it can be judged, else the not-tested or undecided verdict to return."""
    trials = history.of(LockConflict)
    if not trials:
        return not_run_verdict(check_id, history, "lock-conflict", *NO_LOCK) or Verdict(
            check_id, NOT_TESTED, NO_LOCK[0], hint=NO_LOCK[1])
    failed = next((t for t in trials if t.error), None)
    if failed is not None:
        return Verdict(check_id, UNKNOWN, f"could not decide: {failed.error}")
    why = lock_undecided(history)
    if why:
        return Verdict(check_id, UNKNOWN, f"could not decide: {why}",
                       hint="lock.contender must be a command that finishes when run alone.")
    first, *again = trials
    for other in again:
        if _outcome(other) != _outcome(first):
            return Verdict(check_id, UNKNOWN, f"flaky: the contender {_said(first)} in a first run, and "
                           f"{_said(other)} in a second; an outcome decided by the clock is reported only when two "
                           "runs agree", hint="Run the check again on a less loaded machine, or raise lock.prompt.")
    return first


def _outcome(trial: LockConflict) -> tuple[str, bool]:
    contender = trial.invocation("contender")
    return contender_state(trial), contender is not None and succeeded(contender)


def _said(trial: LockConflict) -> str:
    contender = trial.invocation("contender")
    ending = f" ({contender.ending()} after {contender.duration:.1f} s)" if contender else ""
    return STATES[contender_state(trial)] + ending


def window(trial: LockConflict) -> float:
    """How long the contender had to answer: the prompt plus its time alone (older histories: the prompt)."""
    return trial.window or trial.prompt


def contender_state(trial: LockConflict) -> str:
    """What the contender did while the lock was held: 'reached' the parked state; 'waiting', still running when
    clirace let the holder go (after its window and the follow); 'late', it answered while the lock was still
    held but after its window; or 'exited' within its window."""
    contender = trial.invocation("contender")
    if trial.event(EventKind.REACHED_STATE, "contender"):
        return "reached"
    released = trial.event(EventKind.RELEASED, "holder")
    if contender is not None and released is not None and released.at <= contender.ended:
        return "waiting"
    if contender is not None and trial.window and contender.duration > trial.window:
        return "late"
    return "exited"


def waited(trial: LockConflict) -> tuple[bool, str]:
    """Whether a contender still running when the holder let go was waiting for the lock, with what the record
    shows of it: only alive is no proof, a slow tool is alive too; idle (its CPU share) is. Older histories, which
    did not watch it, count it as waiting, as they were judged then."""
    if trial.watched is None:
        return not trial.window, "not watched"
    return idle(trial.watched), describe(trial.watched)


def again(history: History) -> str:
    """The words for a second run that agreed with the first, for the evidence ("" without one)."""
    trials = history.of(LockConflict)
    return f"; the same in a second run ({_said(trials[1])})" if len(trials) > 1 else ""


def holder_gone(trial: Trial) -> bool:
    return trial.event(EventKind.HOLDER_GONE) is not None


def not_excluded(trial: LockConflict) -> str | None:
    """How the contender got past a held lock ('reached' the parked state, or ran and exited 0), else None."""
    state = contender_state(trial)
    if state == "reached":
        return "opened the state file the holder was reading, without waiting for any lock"
    contender = trial.invocation("contender")
    if state in ("exited", "late") and contender is not None and succeeded(contender):
        return "ran and exited 0"
    return None
