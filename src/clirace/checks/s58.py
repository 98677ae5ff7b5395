"""§58 "Multi-Agent Concurrent Invocation Conflict", as advice beside §15 (never part of its score): what it asks
beyond §15, recorded with rule codes of its own (CR950-CR959) so that a later rubric choice can score it alone.

Here: the lock wait defaults to 5 s (CR951: the contender's structured refusal came after a time far from it);
with distinct instance ids (the spec's session id, when the tool namespaces per-agent state with it, as §58's
--instance-id does), parallel writers never refuse or lose each other (CR952). Emitted by lock-error-structured,
beside the envelope advice: a CONCURRENT_MODIFICATION refusal exits 6 (CR950).
"""
from __future__ import annotations

from clirace.checks._common import finding
from clirace.checks.findings import NOT_APPLICABLE, Finding, Verdict
from clirace.checks.lockerror import find_error, succeeded
from clirace.history import History, LockConflict, SessionRun

ID = "s58-advice"
DEFAULT_WAIT = (4.0, 6.5)  # seconds around §58's default lock timeout of 5 s


def check(history: History) -> Verdict:
    found: list[Finding] = []
    for conflict in history.of(LockConflict):
        contender = conflict.invocation("contender")
        if contender is None or conflict.error or contender.ok:
            continue
        printed = find_error(contender.stdout, contender.stderr)
        if printed.says_lock_held and not DEFAULT_WAIT[0] <= contender.duration <= DEFAULT_WAIT[1]:
            found.append(finding("CR951", conflict, ["contender"], "about 5 s", f"{contender.duration:.1f}s",
                                 elapsed_ms=int(contender.duration * 1000), code=printed.code))
    for trial in history.of(SessionRun):
        if not trial.with_ids or trial.error:
            continue
        refused = [inv for inv in trial.invocations if inv.label.startswith("run-") and not succeeded(inv)]
        if refused:
            inv = refused[0]
            found.append(finding("CR952", trial, [inv.label], "every writer with its own instance id succeeds",
                                 inv.printed(120), label=inv.label, count=len(refused),
                                 total=len(trial.labelled("run-")), outcome=inv.ending()))
            break
    said = "; ".join(f.message() for f in found) or "nothing beyond §15 to say"
    return Verdict(ID, NOT_APPLICABLE, f"§58 (advice, not scored): {said}", found)
