"""Lock released on exit (level 2): after the holder ends normally, with an error, by Ctrl-C or by SIGTERM,
the next invocation gets the lock. After SIGKILL, whether it does is reported as advice only.

Wherever a command that needed the lock free was refused while a process an earlier, finished command had left
running held on, and ran once that process had gone, the lock outlived its command (CR306): in a reference run,
a setup, the release experiment's next, a retry after the holder ended. The finding rests on a lock, not on the
order of events: the refusal says a lock refused it, or /proc showed the leftover holding one. A leftover found holding a kernel lock
before a parallel round or a lock holder, with no refusal to show for it, is advice (CR307)."""
from __future__ import annotations

import re

from clirace.checks._common import FLAKY, finding, flaky_words, not_run_verdict, records
from clirace.checks._lock import NO_LOCK, not_excluded
from clirace.checks.findings import FAIL, NOT_TESTED, PASS, UNKNOWN, Finding, Verdict
from clirace.checks.lockerror import printed_error, succeeded
from clirace.checks.reference import lock_undecided
from clirace.history import History, Invocation, Leftover, LockConflict, LockRelease, Trial
from clirace.history.vocab import Way

ID = "lock-released-on-exit"
REQUIRED = {Way.NORMAL: "CR301", Way.ERROR: "CR302", Way.SIGINT: "CR303", Way.SIGTERM: "CR304"}
SIGNAL_NAMES = {Way.SIGINT: "Ctrl-C (SIGINT)", Way.SIGTERM: "SIGTERM", Way.SIGKILL: "SIGKILL"}


def _ended(trial: LockRelease) -> tuple[bool, bool]:
    """What a release trial shows: (the holder outlived its signal wait, the next invocation ran)."""
    holder, nxt = trial.invocation("holder"), trial.invocation("next")
    return holder is not None and holder.timed_out, nxt is not None and succeeded(nxt)


def check(history: History) -> Verdict:
    runs: dict[Way, list[LockRelease]] = {}
    for t in history.of(LockRelease):
        runs.setdefault(t.way, []).append(t)
    trials = {way: mine[0] for way, mine in runs.items()}  # a second run of a way only confirms or refutes the first
    outlived = _outlived(history)
    if outlived:
        return Verdict(ID, FAIL, outlived[0].message(), outlived)
    if not trials:
        return not_run_verdict(ID, history, "lock-release", *NO_LOCK) or Verdict(
            ID, NOT_TESTED, NO_LOCK[0], hint=NO_LOCK[1])
    if why := lock_undecided(history):  # each way's next invocation is the contender: it cannot finish even alone
        return Verdict(ID, UNKNOWN, f"could not decide: {why}",
                       hint="lock.contender must be a command that finishes when run alone.")
    conflict = history.of(LockConflict)
    if conflict and not conflict[0].error and not_excluded(conflict[0]):
        return Verdict(ID, NOT_TESTED, "the contender was not excluded while the lock was held, so there is no "
                       "lock whose release could be tested", hint="Make lock-excludes pass first (see its finding).")
    findings: list[Finding] = []
    passed: list[Way] = []
    unknown: list[str] = []
    disagreed = False
    for way, trial in trials.items():
        if trial.error:
            unknown.append(f"{way}: {trial.error}")
            continue
        if any(_ended(other) != _ended(trial) for other in runs[way][1:]):
            late = f"the holder outlived its {trial.signal_wait:g} s wait"
            in_time = f"the holder ended within its {trial.signal_wait:g} s wait"
            first, second = (late, in_time) if _ended(trial)[0] else (in_time, late)
            unknown.append(f"{way}: {FLAKY}: {flaky_words(first, second)}")
            disagreed = True
            continue
        holder, nxt = trial.invocation("holder"), trial.invocation("next")
        if holder is None or nxt is None:
            unknown.append(f"{way}: the trial has no {'holder' if holder is None else 'next'} invocation")
            continue
        if way is Way.NORMAL and not holder.ok:
            unknown.append(f"normal: the holder did not exit 0 when released ({holder.ending()}; {holder.printed()})")
            continue
        if way is Way.ERROR and (holder.ok or holder.timed_out):
            unknown.append(f"error: the holder was expected to fail but ended with {holder.ending()}")
            continue
        if holder.timed_out and way in SIGNAL_NAMES:
            again = "; the same in a second run" if len(runs[way]) > 1 else ""
            findings.append(finding("CR305", trial, ["holder"], "exit soon after the signal", holder.ending() + again,
                                    seconds=f"{trial.signal_wait:g}", signal=SIGNAL_NAMES[way]))
            continue
        if succeeded(nxt):
            passed.append(way)
            if way is Way.SIGKILL:
                findings.append(finding("CR906", trial, ["holder", "next"]))
            continue
        args = dict(outcome=nxt.ending(), printed=nxt.printed(100), holder=holder.ending())
        code = REQUIRED.get(way, "CR905")
        findings.append(finding(code, trial, ["holder", "next"], "the next invocation runs", nxt.ending(), **args))
    findings += _held_before_a_step(history)
    required_fail = [f for f in findings if not f.advisory]
    ok = [str(w) for w in passed if w in REQUIRED]
    if required_fail:
        return Verdict(ID, FAIL, "; ".join(f.message() for f in required_fail), findings)
    if unknown:
        return Verdict(ID, UNKNOWN, f"could not decide: {unknown[0]}", findings, rates={FLAKY: True} if disagreed else {})
    untested = history.not_run("lock-release/error")
    unseen = [str(w) for w in REQUIRED if w not in trials and not (w is Way.ERROR and untested)]
    if unseen:  # a pass names its evidence: every way the holder must be able to end
        return Verdict(ID, UNKNOWN, f"could not decide: no record of the holder ending by {', '.join(unseen)}",
                       findings, hint="Run the check again to its end.")
    if untested:
        return Verdict(ID, NOT_TESTED, f"released after {', '.join(ok)}; not tested: error ({untested.why})", findings,
                       hint=untested.hint)
    return Verdict(ID, PASS, f"the next invocation ran after the holder ended by {', '.join(map(str, passed))}",
                   findings, read=records(t for mine in runs.values() for t in mine))


def _shown(trial: Trial, leftover: Leftover) -> dict[str, str]:
    """The finding arguments that name a leftover: who it is, what it held, how long after its command."""
    sandbox = trial.sandbox or "\0"
    locks = "; ".join(lock.replace(sandbox, "{sandbox}") for lock in leftover.locks) or "no kernel lock /proc shows"
    return dict(left_by=leftover.left_by, pid=str(leftover.pid), parent=str(leftover.parent),
                age=f"{leftover.age:.1f}", outlived=f"{leftover.outlived:.1f}",
                command=leftover.command.replace(sandbox, "{sandbox}"), locks=locks,
                ended="clirace ended it" if leftover.ended_by_clirace else f"it ended by itself within {leftover.waited:g}s")


def _outlived(history: History) -> list[Finding]:
    """CR306, once per kind of experiment: a refused command that ran once the leftover holding on had gone."""
    out: dict[str, Finding] = {}
    for trial in history.trials:
        for leftover in trial.leftovers:
            refused, again = trial.invocation(f"refused-{leftover.refused}"), trial.invocation(leftover.refused)
            if not leftover.refused or refused is None or again is None or not succeeded(again) or trial.KIND in out:
                continue
            if not leftover.locks and not lock_refusal(refused):  # refused after it, but no lock shown to refuse it
                continue
            out[trial.KIND] = finding("CR306", trial, [leftover.left_by, refused.label, again.label],
                                      f"{refused.label} gets the lock", f"{refused.ending()}; {refused.printed(100)}",
                                      refused=leftover.refused, outcome=refused.ending(),
                                      printed=refused.printed(100), **_shown(trial, leftover))
    return list(out.values())


_LOCK_WORD = re.compile(r"\block(?:ed|ing|s|file)?\b|\block_held\b", re.IGNORECASE)


def lock_refusal(inv: Invocation) -> bool:
    """The refusal says a lock refused it: a structured LOCK_HELD (or conflict) error, or words about a lock
    ("database is locked", "lock file exists"). Without that, or /proc showing the leftover holding a lock, a
    refusal that merely followed another command proves no lock outlived anything (CR306 needs the lock)."""
    return printed_error(inv).says_lock_held or bool(_LOCK_WORD.search(f"{inv.stdout}\n{inv.stderr}"))


def _held_before_a_step(history: History) -> list[Finding]:
    """CR307 (advice), once per kind of experiment: a leftover still holding a kernel lock when a parallel round or
    a lock holder was about to start, ended by clirace before it did."""
    out: dict[str, Finding] = {}
    for trial in history.trials:
        for leftover in trial.leftovers:
            if not leftover.refused and leftover.locks and trial.KIND not in out:
                out[trial.KIND] = finding("CR307", trial, [leftover.left_by], **_shown(trial, leftover))
    return list(out.values())
