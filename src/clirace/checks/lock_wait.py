"""Lock-wait timeout (level 3): asked to wait T for a held lock, the contender ends within T plus a margin
with the structured LOCK_HELD error, having really waited."""
from ..findings import FAIL, NOT_TESTED, PASS, UNKNOWN, Verdict
from ._common import finding
from ..lockerror import find_error

ID = "lock-wait-timeout"


def check(history):
    trials = history.of("lock-wait")
    if not trials:
        return Verdict(ID, NOT_TESTED, "the spec names no lock-wait option",
                       hint='Add lock.wait_option, e.g. ["--lock-timeout", "{timeout_ms}"].')
    trial = trials[0]
    if trial.error:
        return Verdict(ID, UNKNOWN, f"could not decide: {trial.error}")
    f = trial.facts
    inv = trial.invocation("contender")
    if not f.get("alone_ok", True):
        alone = trial.invocation("alone")
        return Verdict(ID, UNKNOWN, f"with {f['option']} the contender fails even when nobody holds the lock "
                       f"({alone.outcome()}; {alone.printed(100)})", hint="Check lock.wait_option and lock.contender.")
    elapsed_ms = int(inv.duration * 1000)
    common = dict(option=f["option"], elapsed_ms=elapsed_ms, wait_ms=f["wait_ms"], margin_ms=f["margin_ms"])
    labels = ["holder", "contender"]
    if inv.timed_out:
        found = finding("CR401", trial, labels, "an end after the wait", inv.outcome(), seconds=f"{f['limit_s']:g}", **common)
        return Verdict(ID, FAIL, found.message(), [found])
    if inv.ok:
        if not f.get("holder_alive", True):
            return Verdict(ID, UNKNOWN, "the holder exited during the wait, so the contender may have got the lock")
        found = finding("CR201", trial, labels, "a LOCK_HELD error", inv.outcome(), how=f"ran and exited 0 with {f['option']}")
        return Verdict(ID, FAIL, found.message(), [found])
    printed = find_error(inv.stdout, inv.stderr)
    if not printed.structured or not printed.says_lock_held:
        found = finding("CR402", trial, labels, "a structured LOCK_HELD error", inv.printed(120),
                        outcome=inv.outcome(), printed=inv.printed(120), **common)
        return Verdict(ID, FAIL, found.message(), [found])
    if elapsed_ms < f["wait_ms"] * 0.5:
        found = finding("CR403", trial, labels, f"about {f['wait_ms']} ms", f"{elapsed_ms} ms", **common)
        return Verdict(ID, FAIL, found.message(), [found])
    if elapsed_ms > f["wait_ms"] + f["margin_ms"]:
        found = finding("CR404", trial, labels, f"at most {f['wait_ms'] + f['margin_ms']} ms", f"{elapsed_ms} ms", **common)
        return Verdict(ID, FAIL, found.message(), [found])
    return Verdict(ID, PASS, f"with {f['option']} the contender ended after {elapsed_ms} ms ({inv.outcome()}) "
                   f"with LOCK_HELD, retry_after_ms={printed.error['retry_after_ms']}")
