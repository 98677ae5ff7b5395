"""Lock excludes (level 1): while the lock is held, a contender does not run against the shared state."""
from ..findings import FAIL, NOT_TESTED, PASS, UNKNOWN, Verdict
from ._common import finding

ID = "lock-excludes"


def check(history):
    trials = history.of("lock-conflict")
    if not trials:
        return Verdict(ID, NOT_TESTED, "the spec has no lock section", hint="Add lock.contender and lock.hold.")
    trial = trials[0]
    if trial.error:
        return Verdict(ID, UNKNOWN, f"could not decide: {trial.error}")
    facts = trial.facts
    contender = trial.invocation("contender")
    if not facts["baseline_ok"]:
        base = trial.invocation("baseline")
        return Verdict(ID, UNKNOWN, f"the contender fails even with nobody holding the lock ({base.outcome()}; "
                       f"{base.printed()})", hint="lock.contender must be a command that succeeds on its own.")
    state = facts["while_held"]
    if state == "reached":
        how = "opened the state file the holder was reading, without waiting for any lock"
    elif state == "exited" and contender.ok:
        how = "ran and exited 0"
    else:
        how = None
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
