"""Lock-wait timeout (level 3): asked to wait T for a held lock, the contender ends within T plus a margin
with the structured LOCK_HELD error, having really waited."""
from __future__ import annotations

from clirace.checks._common import cut_short, finding, flaky, not_run_verdict, records
from clirace.checks._lock import (
    UNHELD_HINT,
    blocked_while_waiting,
    conflict_trial,
    contender_state,
    holder_gone,
    lost_labels,
    silent_losses,
    too_close,
    unheld,
)
from clirace.checks.findings import FAIL, PASS, UNKNOWN, Finding, Verdict
from clirace.checks.lockerror import printed_error
from clirace.checks.timing import describe, wait_bounds
from clirace.history import History, LockConflict, LockWait
from clirace.history.vocab import EventKind

ID = "lock-wait-timeout"
WAIT_HINT = ("What would decide it: the contender seen waiting for the lock while it waits, blocked in its lock call "
             "(flock, fcntl F_SETLKW), listed among /proc/locks' waiters, polling the locked file (waking again and "
             "again with it open), or a lock statement the server made wait. Run clirace where it can read the "
             "contender's /proc entries; a tool that waits in none of these ways cannot be decided here.")


def _never_waits(history: History) -> Verdict:
    """A tool that fails fast: the contender's prompt answer while the lock was held is its lock timeout."""
    trial = conflict_trial(history, ID)
    if isinstance(trial, Verdict):
        return trial
    contender = trial.invocation("contender")
    assert contender is not None
    if (why := unheld(trial)) is not None:
        return Verdict(ID, UNKNOWN, why, hint=UNHELD_HINT)
    labels = ["holder", "contender"]
    if contender_state(trial) == "close" and not contender.ok:
        return too_close(ID, trial, history)
    if contender_state(trial) != "exited" or contender.ok:
        f = finding("CR405", trial, labels, "a prompt, structured LOCK_HELD error", contender.ending(),
                    outcome=contender.ending())
        return Verdict(ID, FAIL, f.message(), [f])
    printed = printed_error(contender)
    if printed.undecidable:
        return Verdict(ID, UNKNOWN, cut_short(contender, printed.cut))
    if not printed.structured or not printed.says_lock_held:
        f = finding("CR402", trial, labels, "a structured LOCK_HELD error", contender.printed(120),
                    option="no wait (never_waits)", elapsed_ms=int(contender.duration * 1000),
                    outcome=contender.ending(), printed=contender.printed(120))
        return Verdict(ID, FAIL, f.message(), [f])
    assert printed.error is not None
    return Verdict(ID, PASS, f"the tool never waits (the spec says so): its contender answered after "
                   f"{contender.duration * 1000:.0f} ms with {printed.code}, retry_after_ms={printed.error['retry_after_ms']}",
                   read=records(history.of(LockConflict)))


def check(history: History) -> Verdict:
    declared = history.not_run("lock-wait")
    if declared is not None and declared.declared == "never-waits":
        return _never_waits(history)
    trials = history.of(LockWait)
    if not trials:
        return not_run_verdict(ID, history, "lock-wait") or Verdict(
            ID, UNKNOWN, "the lock-wait experiment left no record")
    first, *again = (_judged(t, history) for t in trials)
    for other in again:  # a first run outside its time bounds was run again: only two alike decide
        if (other.status, [f.code for f in other.findings]) != (first.status, [f.code for f in first.findings]):
            return flaky(ID, f"a run gave {_short(first)}", _short(other),
                         "Run the check again on a less loaded machine, or raise lock.wait.")
        first.summary += f"; the same in a second run ({_short(other)})"
    return first


def _short(verdict: Verdict) -> str:
    return verdict.findings[0].message() if verdict.findings else f"{verdict.status}: {verdict.summary}"


def _judged(trial: LockWait, history: History) -> Verdict:
    if trial.error:
        return Verdict(ID, UNKNOWN, f"could not decide: {trial.error}")
    alone, inv = trial.invocation("alone"), trial.invocation("contender")
    if alone is None or inv is None:
        return Verdict(ID, UNKNOWN, "the trial is incomplete (no alone or contender invocation)")
    if not alone.ok:
        return Verdict(ID, UNKNOWN, f"with {trial.option} the contender fails even when nobody holds the lock "
                       f"({alone.ending()}; {alone.printed(100)})", hint="Check lock.wait_option and lock.contender.")
    # The bounds add how long the command takes with the lock free: start-up on a loaded machine must not read
    # as a late timeout (timing.wait_bounds).
    if trial.event(EventKind.REACHED_STATE, "contender") and not holder_gone(trial):
        found = finding("CR201", trial, ["holder", "contender"], "a LOCK_HELD error", inv.ending(),
                        how=f"opened the state file the holder was reading, with {trial.option}")
        return Verdict(ID, FAIL, found.message(), [found])
    low_ms, high_ms = wait_bounds(trial.wait_ms, trial.margin_ms, alone.duration)
    margin_ms = high_ms - trial.wait_ms
    elapsed_ms = int(inv.duration * 1000)
    common = dict(option=trial.option, elapsed_ms=elapsed_ms, wait_ms=trial.wait_ms, margin_ms=margin_ms)
    labels = ["holder", "contender"]
    if holder_gone(trial):  # only a contender that ran while the lock was provably held is judged
        return Verdict(ID, UNKNOWN, "could not decide: the holder exited on its own during the wait, so the contender "
                       f"may have run with the lock free ({inv.ending()} after {elapsed_ms} ms)", hint=UNHELD_HINT)
    if inv.timed_out:
        found = finding("CR401", trial, labels, "an end after the wait", inv.ending(), seconds=f"{trial.limit_s:g}",
                        **common)
        return Verdict(ID, FAIL, found.message(), [found])
    if inv.ok:
        if "contender" in lost_labels(trial, history) and not printed_error(inv).says_lock_held:  # success claimed, nothing kept
            lost = [f for f in silent_losses(trial, history) if f.args["label"] == "contender"]
            return Verdict(ID, FAIL, lost[0].message(), lost)
        found = finding("CR201", trial, labels, "a LOCK_HELD error", inv.ending(), how=f"ran and exited 0 with {trial.option}")
        return Verdict(ID, FAIL, found.message(), [found])
    printed = printed_error(inv)
    if printed.undecidable:
        return Verdict(ID, UNKNOWN, cut_short(inv, printed.cut))
    if not printed.structured or not printed.says_lock_held:
        shown = inv.printed(120)
        if printed.error is not None and printed.problems:  # JSON, but not a valid LOCK_HELD: say what is wrong
            code, args = printed.problems[0]
            shown = f"{Finding(code, args).message()} ({shown})"
        found = finding("CR402", trial, labels, "a structured LOCK_HELD error", shown,
                        outcome=inv.ending(), printed=shown, **common)
        return Verdict(ID, FAIL, found.message(), [found])
    if elapsed_ms < low_ms:
        found = finding("CR403", trial, labels, f"about {trial.wait_ms} ms", f"{elapsed_ms} ms", **common)
        return Verdict(ID, FAIL, found.message(), [found])
    if elapsed_ms > high_ms:
        found = finding("CR404", trial, labels, f"at most {high_ms} ms", f"{elapsed_ms} ms", **common)
        return Verdict(ID, FAIL, found.message(), [found])
    assert printed.error is not None
    answered = (f"with {trial.option} the contender ended after {elapsed_ms} ms ({inv.ending()}) with {printed.code}, "
                f"retry_after_ms={printed.error['retry_after_ms']}, within {low_ms}-{high_ms} ms (the wait, plus "
                f"{trial.margin_ms} ms and {int(alone.duration * 1000)} ms, its time alone)")
    proof = blocked_while_waiting(trial)
    if not proof:
        seen = describe(trial.watched) if trial.watched else "it was not watched"
        return Verdict(ID, UNKNOWN, f"could not decide: {answered}, but nothing showed it blocked on the held lock while "
                       f"it waited ({seen}): a tool that sleeps through its wait and then prints LOCK_HELD answers the same",
                       hint=WAIT_HINT)
    return Verdict(ID, PASS, f"{answered}; while it waited, {proof}", read=records([trial]))
