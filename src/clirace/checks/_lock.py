"""What the lock-conflict trial shows: whether it can be judged, what the contender did while the lock was held,
and whether it got past the lock. Shared by lock-excludes, lock-error-structured, lock-released-on-exit and
lock-wait-timeout (for a tool that never waits)."""
from __future__ import annotations

from ..findings import NOT_TESTED, UNKNOWN, Verdict
from ..history import History, LockConflict, Trial
from ..lockerror import succeeded
from ..vocab import EventKind
from ._common import not_run_verdict
from .reference import lock_undecided


NO_LOCK = ("the spec has no lock section", "Add lock.contender and lock.hold.")


def conflict_trial(history: History, check_id: str) -> LockConflict | Verdict:
    """The lock-conflict trial when it can be judged, else the not-tested or undecided verdict to return."""
    trials = history.of(LockConflict)
    if not trials:
        return not_run_verdict(check_id, history, "lock-conflict", *NO_LOCK) or Verdict(
            check_id, NOT_TESTED, NO_LOCK[0], hint=NO_LOCK[1])
    trial = trials[0]
    if trial.error:
        return Verdict(check_id, UNKNOWN, f"could not decide: {trial.error}")
    why = lock_undecided(history)
    if why:
        return Verdict(check_id, UNKNOWN, f"could not decide: {why}",
                       hint="lock.contender must be a command that finishes when run alone.")
    return trial


def contender_state(trial: LockConflict) -> str:
    """What the contender did while the lock was held: 'reached' the parked state, 'waiting' until clirace
    released the holder after `prompt`, or 'exited' while it was still held."""
    contender = trial.invocation("contender")
    if trial.event(EventKind.REACHED_STATE, "contender"):
        return "reached"
    released = trial.event(EventKind.RELEASED, "holder")
    if contender is not None and released is not None and released.at <= contender.ended:
        return "waiting"
    return "exited"


def holder_gone(trial: Trial) -> bool:
    return trial.event(EventKind.HOLDER_GONE) is not None


def not_excluded(trial: LockConflict) -> str | None:
    """How the contender got past a held lock ('reached' the parked state, or ran and exited 0), else None."""
    state = contender_state(trial)
    if state == "reached":
        return "opened the state file the holder was reading, without waiting for any lock"
    contender = trial.invocation("contender")
    if state == "exited" and contender is not None and succeeded(contender):
        return "ran and exited 0"
    return None
