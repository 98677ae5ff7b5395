"""Lock excludes (level 1): while the lock is held, a contender does not run against the shared state, and no
invocation of a lock experiment that exits 0 loses what it wrote.

Judged once, on every lock experiment: the conflict's contender, the lock-wait experiment's contender (a tool that
takes over a lock it thinks stale gets past it only while it waits), and the keys every invocation that exited 0
wrote, read back once the holder ended (silent loss: a contender answering a busy lock with success and doing
nothing, or a write another rewrote away)."""
from __future__ import annotations

from clirace.checks._common import finding, records
from clirace.checks._lock import (
    again,
    asked,
    conflict_trial,
    contender_state,
    effects_note,
    holder_gone,
    lock_trials,
    lost_labels,
    not_excluded,
    ran_while_held,
    silent_losses,
    waited,
    window,
)
from clirace.checks.findings import FAIL, NOT_TESTED, PASS, UNKNOWN, Verdict
from clirace.checks.reference import lock_undecided
from clirace.checks.timing import idle
from clirace.history import History, LockConflict

ID = "lock-excludes"


def check(history: History) -> Verdict:
    found = conflict_trial(history, ID)
    if isinstance(found, Verdict) and (found.status == NOT_TESTED or lock_undecided(history)):
        return found
    verdict = found if isinstance(found, Verdict) else _conflict(found, history)
    # Silent loss seen in any trial is corruption, whatever the others show: a conflict trial's too when the
    # conflict itself could not be judged (two runs the clock decided differently, flaky).
    judged = isinstance(found, LockConflict)  # the conflict trials' own losses are in its verdict
    elsewhere = ran_while_held(history) + [f for t in lock_trials(history)
                                           if not (judged and isinstance(t, LockConflict))
                                           for f in silent_losses(t, history)]
    failed = [f for f in verdict.findings + elsewhere if not f.advisory]
    if failed:
        return Verdict(ID, FAIL, "; ".join(dict.fromkeys(f.message() for f in failed)), verdict.findings + elsewhere)
    if verdict.status == PASS:
        verdict.summary += effects_note(history)
    return verdict


def _conflict(trial: LockConflict, history: History) -> Verdict:
    contender = trial.invocation("contender")
    assert contender is not None
    losses = silent_losses(trial, history)
    how = not_excluded(trial)
    if how and "contender" not in lost_labels(trial, history):  # a contender whose key is gone is judged by its loss
        if holder_gone(trial):
            return Verdict(ID, UNKNOWN, "the holder had exited before the contender finished, so the contender "
                           "may have run after the lock was free", losses)
        f = finding("CR201", trial, ["holder", "contender"], "the contender fails or waits", how + again(history),
                    how=how)
        return Verdict(ID, FAIL, f.message(), [f, *losses])
    if losses:
        return Verdict(ID, FAIL, losses[0].message(), losses)
    state = contender_state(trial)
    after = "then completed after the lock was released" if contender.ok else f"then {contender.ending()}"
    if state == "asked":
        return Verdict(ID, PASS, f"the contender stopped to ask on its stdin while the lock was held ({asked(trial)}),"
                       f" without running; given no answer (end of input), it ended with {contender.ending()}",
                       read=records(history.of(LockConflict)))
    if state == "waiting":
        proof, watched = waited(trial)
        held = f"{window(trial):g} s" + (f" and {round(trial.follow + trial.retried, 1):g} s more" if trial.follow else "")
        if proof:
            return Verdict(ID, PASS, f"the contender waited while the lock was held ({held}; {proof}; {watched}), "
                           f"{after}" + again(history), read=records(history.of(LockConflict)))
        if trial.watched is not None and idle(trial.watched):
            return Verdict(ID, UNKNOWN, f"could not decide: the contender was still running after {held} while the "
                           f"lock was held, idle ({watched}), {after}; but nothing showed it blocked on the lock: a "
                           "sleep or a network call is idle too" + again(history),
                           hint="What would decide it: the contender blocked in its lock call (flock, fcntl "
                                "F_SETLKW) or among /proc/locks' waiters, retrying a file the holder keeps locked, "
                                "or waiting on a server lock; check that it takes the lock the spec's lock.hold "
                                "holds.")
        return Verdict(ID, UNKNOWN, f"could not decide: the contender was still running after {held} while the "
                       f"lock was held, but working, not waiting ({watched}), {after}: slow, not shown blocked"
                       + again(history),
                       hint="Raise lock.prompt above the time the contender needs, or check that it takes the lock.")
    if state == "late":
        return Verdict(ID, PASS, f"the contender was refused while the lock was held, after {contender.duration:.1f} s "
                       f"({contender.ending()}; {contender.printed(100)}){again(history)}",
                       read=records(history.of(LockConflict)))
    return Verdict(ID, PASS, f"the contender was refused while the lock was held ({contender.ending()}; "
                   f"{contender.printed(100)})", read=records(history.of(LockConflict)))

