"""Lock excludes (level 1): while the lock is held, a contender does not run against the shared state."""
from ..findings import FAIL, PASS, UNKNOWN, Verdict
from ._common import conflict_trial, finding, not_excluded

ID = "lock-excludes"


def check(history):
    trial, undecided = conflict_trial(history, ID)
    if undecided:
        return undecided
    facts = trial.facts
    contender = trial.invocation("contender")
    state = facts["while_held"]
    how = not_excluded(trial)
    if how:
        if not facts.get("holder_alive", True):
            return Verdict(ID, UNKNOWN, "the holder had exited before the contender finished, so the contender "
                           "may have run after the lock was free")
        f = finding("CR201", trial, ["holder", "contender"], "the contender fails or waits", how, how=how)
        return Verdict(ID, FAIL, f.message(), [f])
    if state == "waiting":
        after = "then completed after the lock was released" if contender.ok else f"then {contender.outcome()}"
        return Verdict(ID, PASS, f"the contender waited while the lock was held ({facts['prompt']:g}s), {after}")
    return Verdict(ID, PASS, f"the contender was refused while the lock was held ({contender.outcome()}; "
                   f"{contender.printed(100)})")
