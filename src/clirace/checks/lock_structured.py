"""Structured lock error (level 2): a contender fails promptly, non-zero, with LOCK_HELD and retry_after_ms."""
from __future__ import annotations

from clirace.checks._common import cut_short, finding, records
from clirace.checks._lock import (
    UNHELD_HINT,
    again,
    asked,
    conflict_trial,
    contender_state,
    lost_labels,
    silent_losses,
    too_close,
    unheld,
    window,
)
from clirace.checks.findings import FAIL, PASS, UNKNOWN, Verdict
from clirace.checks.lockerror import advisories, printed_error, succeeded
from clirace.history import History, LockConflict

ID = "lock-error-structured"


def check(history: History) -> Verdict:
    trial = conflict_trial(history, ID)
    if isinstance(trial, Verdict):
        return trial
    state = contender_state(trial)
    contender = trial.invocation("contender")
    assert contender is not None
    if (why := unheld(trial)) is not None:
        return Verdict(ID, UNKNOWN, why, hint=UNHELD_HINT)
    labels = ["holder", "contender"]
    if state == "waiting":
        f = finding("CR207", trial, labels, "a prompt LOCK_HELD error", "still waiting" + again(history),
                    seconds=f"{round(window(trial) + trial.follow + trial.retried, 1):g}")
        return Verdict(ID, FAIL, f.message(), [f])
    if state == "close" and not contender.ok:  # both runs' error answers too close to their time to answer to tell
        return too_close(ID, trial, history)  # (an exit 0 under the held lock fails below, whenever it came)
    if state == "late":  # its own answer, recorded because it was followed past its window
        f = finding("CR213", trial, labels, f"an answer within {window(trial):g}s", contender.printed(120)
                    + again(history), elapsed=f"{contender.duration:.1f}", outcome=contender.ending(),
                    printed=contender.printed(120), window=f"{window(trial):g}", prompt=f"{trial.prompt:g}",
                    alone=f"{trial.alone or 0:.1f}")
        return Verdict(ID, FAIL, f.message(), [f])
    if state == "asked":  # judged like a contender that hangs: an agent running it with a pipe or a terminal waits
        f = finding("CR210", trial, labels, "a prompt LOCK_HELD error", f"it waited on its stdin after printing "
                    f"{asked(trial)}", printed=asked(trial))
        return Verdict(ID, FAIL, f.message(), [f])
    if state == "reached":
        f = finding("CR202", trial, labels, "a LOCK_HELD error", "no lock conflict at all",
                    outcome="it was never refused", printed="it read the state while the lock was held")
        return Verdict(ID, FAIL, f.message(), [f])
    printed = printed_error(contender)
    advisory = [finding(code, trial, ["contender"], **args) for code, args in advisories(printed, contender.exit_code)]
    if contender.ok:
        if not printed.says_lock_held and "contender" in lost_labels(trial, history):  # success claimed, nothing done
            lost = [f for f in silent_losses(trial, history) if f.args["label"] == "contender"]
            return Verdict(ID, FAIL, lost[0].message(), lost)
        code = "CR203" if printed.says_lock_held else "CR201"
        f = finding(code, trial, labels, "a non-zero exit", contender.ending(), how="ran and exited 0")
        return Verdict(ID, FAIL, f.message(), [f, *advisory])
    if printed.undecidable:
        return Verdict(ID, UNKNOWN, cut_short(contender, printed.cut),
                       hint="Print the LOCK_HELD error first, or keep the contender's output under 64 KiB.")
    if printed.error is None:
        f = finding("CR202", trial, labels, "a JSON LOCK_HELD error", contender.printed(120),
                    outcome=contender.ending(), printed=contender.printed(120))
        return Verdict(ID, FAIL, f.message(), [f])
    if printed.problems:
        found = [finding(code, trial, labels, "code LOCK_HELD with integer retry_after_ms >= 0",
                         contender.printed(120), **args) for code, args in printed.problems]
        return Verdict(ID, FAIL, found[0].message(), [*found, *advisory])
    retries = trial.labelled("retry-")
    hint = printed.error["retry_after_ms"]
    if retries and not any(succeeded(inv) for inv in retries):
        f = finding("CR208", trial, ["holder", *(inv.label for inv in retries)], "a retry succeeds",
                    retries[-1].printed(120), tries=len(retries), waited_ms=trial.retry_wait_ms)
        return Verdict(ID, FAIL, f.message(), [f, *advisory])
    followed = ""
    if retries:
        tries = next(n for n, inv in enumerate(retries, 1) if succeeded(inv))
        followed = f"; after the holder ended, a retry {trial.retry_wait_ms} ms later got through on try {tries}"
    return Verdict(ID, PASS, f"{contender.ending()} after {contender.duration * 1000:.0f} ms with {printed.code}, "
                   f"retry_after_ms={hint} on {printed.stream}{followed}", advisory,
                   read=records(history.of(LockConflict)))

