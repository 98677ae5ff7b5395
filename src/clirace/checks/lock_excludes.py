"""Lock excludes (level 1): while the lock is held, a contender does not run against the shared state."""
from __future__ import annotations

from ..findings import FAIL, PASS, UNKNOWN, Verdict
from ..history import History
from ._common import finding
from ._lock import conflict_trial, contender_state, holder_gone, not_excluded

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
        f = finding("CR201", trial, ["holder", "contender"], "the contender fails or waits", how, how=how)
        return Verdict(ID, FAIL, f.message(), [f])
    if contender_state(trial) == "waiting":
        after = "then completed after the lock was released" if contender.ok else f"then {contender.ending()}"
        return Verdict(ID, PASS, f"the contender waited while the lock was held ({trial.prompt:g}s), {after}")
    return Verdict(ID, PASS, f"the contender was refused while the lock was held ({contender.ending()}; "
                   f"{contender.printed(100)})")
