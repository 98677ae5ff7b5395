"""Lock release (level 2): after the holder ends normally, with an error, by Ctrl-C or by SIGTERM, the next
invocation gets the lock. After SIGKILL, whether it does is reported as advice only."""
from ..findings import FAIL, NOT_TESTED, PASS, UNKNOWN, Verdict
from ..lockerror import succeeded
from ._common import finding, not_excluded

ID = "lock-release"
REQUIRED = {"normal": "CR301", "error": "CR302", "sigint": "CR303", "sigterm": "CR304"}
SIGNAL_NAMES = {"sigint": "Ctrl-C (SIGINT)", "sigterm": "SIGTERM", "sigkill": "SIGKILL"}


def check(history):
    trials = {t.name: t for t in history.of("lock-release")}
    if not trials:
        hold = history.spec.get("lock", {}).get("hold", {})
        if "take" in hold:
            return Verdict(ID, NOT_TESTED, "clirace holds the lock itself (lock.hold.take), so the tool is never "
                           "the holder", hint="Add lock.hold.command or lock.hold.park so the tool holds the lock.")
        return Verdict(ID, NOT_TESTED, "the spec has no lock section", hint="Add lock.contender and lock.hold.")
    conflict = history.of("lock-conflict")
    if conflict and not conflict[0].error and not_excluded(conflict[0]):
        return Verdict(ID, NOT_TESTED, "the contender was not excluded while the lock was held, so there is no "
                       "lock whose release could be tested")
    findings, passed, untested, unknown = [], [], [], []
    for way, trial in trials.items():
        if "untestable" in trial.facts:
            untested.append(f"{way} ({trial.facts['untestable']})")
            continue
        if trial.error:
            unknown.append(f"{way}: {trial.error}")
            continue
        holder, nxt = trial.invocation("holder"), trial.invocation("next")
        if way == "normal" and not holder.ok:
            unknown.append(f"normal: the holder did not exit 0 when released ({holder.outcome()}; {holder.printed()})")
            continue
        if way == "error" and (holder.ok or holder.timed_out):
            unknown.append(f"error: the holder was expected to fail but ended with {holder.outcome()}")
            continue
        if trial.facts.get("holder_timed_out") and way in SIGNAL_NAMES:
            findings.append(finding("CR305", trial, ["holder"], "exit soon after the signal", holder.outcome(),
                                    seconds=5, signal=SIGNAL_NAMES[way]))
            continue
        if succeeded(nxt):
            passed.append(way)
            if way == "sigkill":
                findings.append(finding("CR906", trial, ["holder", "next"]))
            continue
        args = dict(outcome=nxt.outcome(), printed=nxt.printed(100), holder=holder.outcome())
        code = REQUIRED.get(way, "CR905")
        findings.append(finding(code, trial, ["holder", "next"], "the next invocation runs", nxt.outcome(), **args))
    required_fail = [f for f in findings if not f.advisory]
    ok = [w for w in passed if w in REQUIRED]
    if required_fail:
        return Verdict(ID, FAIL, "; ".join(f.message() for f in required_fail), findings)
    if unknown:
        return Verdict(ID, UNKNOWN, f"could not decide: {unknown[0]}", findings)
    if untested:
        return Verdict(ID, NOT_TESTED, f"released after {', '.join(ok)}; not tested: {', '.join(untested)}", findings,
                       hint="Add lock.error_command (a command that takes the lock, then fails) or "
                            "lock.hold.park.invalid_content.")
    return Verdict(ID, PASS, f"the next invocation ran after the holder ended by {', '.join(passed)}", findings)
