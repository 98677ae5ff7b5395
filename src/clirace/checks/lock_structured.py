"""Structured lock error (level 2): a contender fails promptly, non-zero, with LOCK_HELD and retry_after_ms."""
from ..findings import FAIL, PASS, Verdict
from ..lockerror import advisories, find_error
from ._common import conflict_trial, finding

ID = "lock-error-structured"


def check(history):
    trial, undecided = conflict_trial(history, ID)
    if undecided:
        return undecided
    state = trial.facts["while_held"]
    contender = trial.invocation("contender")
    labels = ["holder", "contender"]
    if state == "waiting":
        f = finding("CR207", trial, labels, "a prompt LOCK_HELD error", "still waiting", seconds=f"{trial.facts['prompt']:g}")
        return Verdict(ID, FAIL, f.message(), [f])
    if state == "reached":
        f = finding("CR202", trial, labels, "a LOCK_HELD error", "no lock conflict at all",
                    outcome="it was never refused", printed="it read the state while the lock was held")
        return Verdict(ID, FAIL, f.message(), [f])
    printed = find_error(contender.stdout, contender.stderr)
    advisory = [finding(code, trial, ["contender"], **args) for code, args in advisories(printed, contender.exit_code)]
    if contender.ok:
        code = "CR203" if printed.says_lock_held else "CR201"
        f = finding(code, trial, labels, "a non-zero exit", contender.outcome(), how="ran and exited 0")
        return Verdict(ID, FAIL, f.message(), [f, *advisory])
    if printed.error is None:
        f = finding("CR202", trial, labels, "a JSON LOCK_HELD error", contender.printed(120),
                    outcome=contender.outcome(), printed=contender.printed(120))
        return Verdict(ID, FAIL, f.message(), [f])
    if printed.problems:
        found = [finding(code, trial, labels, "code LOCK_HELD with integer retry_after_ms >= 0",
                         contender.printed(120), **args) for code, args in printed.problems]
        return Verdict(ID, FAIL, found[0].message(), [*found, *advisory])
    retry = trial.facts.get("retry")
    if retry and not retry["succeeded"]:
        tries = [i.label for i in trial.invocations if i.label.startswith("retry-")]
        f = finding("CR208", trial, ["holder", *tries], "a retry succeeds", trial.invocation(tries[-1]).printed(120),
                    tries=retry["tries"], waited_ms=retry["waited_ms"])
        return Verdict(ID, FAIL, f.message(), [f, *advisory])
    followed = f"; after the holder ended, a retry {retry['waited_ms']} ms later got through on try {retry['tries']}" \
        if retry else ""
    return Verdict(ID, PASS, f"{contender.outcome()} after {contender.duration * 1000:.0f} ms with LOCK_HELD, "
                   f"retry_after_ms={printed.error['retry_after_ms']} on {printed.stream}{followed}", advisory)
