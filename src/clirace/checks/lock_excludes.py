"""Lock excludes (level 1): while the lock is held, a contender does not run against the shared state."""
from __future__ import annotations

from ..findings import FAIL, PASS, UNKNOWN, Verdict
from ..history import History
from ._common import finding
from ._lock import again, conflict_trial, contender_state, holder_gone, not_excluded, waited, window

ID = "lock-excludes"


def check(history: History) -> Verdict:
    trial = conflict_trial(history, ID)
    if isinstance(trial, Verdict):
        return trial
    contender = trial.invocation("contender")
    assert contender is not None
    how = not_excluded(trial)
    if how:
        if holder_gone(trial):
            return Verdict(ID, UNKNOWN, "the holder had exited before the contender finished, so the contender "
                           "may have run after the lock was free")
        f = finding("CR201", trial, ["holder", "contender"], "the contender fails or waits", how + again(history),
                    how=how)
        return Verdict(ID, FAIL, f.message(), [f])
    state = contender_state(trial)
    after = "then completed after the lock was released" if contender.ok else f"then {contender.ending()}"
    if state == "waiting":
        blocked, watched = waited(trial)
        held = f"{window(trial):g} s" + (f" and {trial.follow:g} s more" if trial.follow else "")
        if not blocked:
            return Verdict(ID, UNKNOWN, f"could not decide: the contender was still running after {held} while the "
                           f"lock was held, but working, not waiting ({watched}), {after}: slow, not shown blocked"
                           + again(history),
                           hint="Raise lock.prompt above the time the contender needs, or check that it takes the lock.")
        return Verdict(ID, PASS, f"the contender waited while the lock was held ({held}; {watched}), {after}"
                       + again(history))
    if state == "late":
        return Verdict(ID, PASS, f"the contender was refused while the lock was held, after {contender.duration:.1f} s "
                       f"({contender.ending()}; {contender.printed(100)}){again(history)}")
    return Verdict(ID, PASS, f"the contender was refused while the lock was held ({contender.ending()}; "
                   f"{contender.printed(100)})")
