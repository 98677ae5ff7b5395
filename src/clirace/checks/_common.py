"""Helpers shared by checks: summarising rounds, and turning trials into a verdict."""
from __future__ import annotations

from collections import Counter

from ..findings import FAIL, NOT_APPLICABLE, NOT_TESTED, PASS, UNKNOWN, Evidence, Finding, Verdict
from ..lockerror import succeeded


def evidence(trial, labels=(), expected="", found="") -> Evidence:
    invocations = []
    for label in labels:
        inv = trial.invocation(label)
        if inv is not None:
            invocations.append({"label": label, "command": inv.command(), "outcome": inv.outcome(),
                                "printed": inv.printed()})
    amplified = " amplified" if trial.facts.get("amplified") else ""
    return Evidence(trial=f"{trial.scenario}: {trial.name} (round {trial.round + 1}{amplified})", invocations=invocations,
                    expected=one_line(expected), found=one_line(found), observed=describe_observed(trial))


def one_line(value, limit=200) -> str:
    text = " ".join(str(value).split())
    return text[:limit] + ("…" if len(text) > limit else "")


def describe_observed(trial) -> str:
    """One sentence on how the traced invocations of a trial wrote files: shared paths, in-place writes, locks."""
    observed = trial.facts.get("observed")
    if not observed:
        return ""
    n = len(observed)
    writers = Counter(path for s in observed.values() for path in set(s["written"]))
    parts = [f"all {n} invocations wrote {path}" if count == n else f"{count} of {n} invocations wrote {path}"
             for path, count in writers.most_common() if count > 1][:2]
    in_place = sorted({p for s in observed.values() for p in s["in_place"]})
    if in_place:
        parts.append(f"rewrote {', '.join(in_place[:2])} in place (O_TRUNC) instead of temp + rename")
    renamed = sorted({p for s in observed.values() for p in s["renamed_onto"]})
    if renamed:
        parts.append(f"replaced {', '.join(renamed[:2])} by rename")
    locks = sorted({m for s in observed.values() for m in s["locks"]})
    parts.append(f"locking seen: {', '.join(locks)}" if locks else "no lock call seen (flock, fcntl, O_EXCL)")
    return "; ".join(parts)


class Undecided(Exception):
    """Raised by a `judge_one` whose trial cannot decide the invariant: Undecided(reason, hint)."""


def verdict_over_rounds(check_id: str, trials, judge_one, describe_pass, tally=None, prefix=None) -> Verdict:
    """Judge each trial with `judge_one(trial) -> list[Finding]`; any finding fails, errors make it unknown.

    The summary says in how many rounds it failed, so a race seen once in five rounds reads as such.
    `prefix` names the parallel invocations (e.g. "inc-"): if none of them ever exited 0 there is nothing
    to judge, and the verdict is unknown rather than a vacuous pass.
    """
    if not trials:
        return Verdict(check_id, NOT_APPLICABLE, "no such workload in the spec")
    findings, failed_rounds, errors, judged = [], [], [], []
    hint = "Fix the spec or the tool so that the trial can run (see the error)."
    for trial in trials:
        if trial.error:
            errors.append(trial.error)
            continue
        try:
            mine = judge_one(trial)
        except Undecided as exc:
            errors.append(exc.args[0])
            hint = exc.args[1]
            continue
        judged.append(trial)
        if any(not f.advisory for f in mine):
            failed_rounds.append(trial)
        findings.extend(mine)
    amplified = [t for t in judged if t.facts.get("amplified")]
    rates = {"rounds": len(judged), "failed_rounds": len(failed_rounds), "amplified_rounds": len(amplified),
             "failed_amplified_rounds": sum(1 for t in failed_rounds if t.facts.get("amplified"))}
    how = f"{len(amplified)} of them amplified" if amplified else "none amplified"
    if failed_rounds:
        first = next(f for f in findings if not f.advisory)
        what = tally(findings) if tally else first.message()
        summary = f"{what} in {len(failed_rounds)} of {len(judged)} rounds ({how})"
        if 0 < len(failed_rounds) < len(judged):
            summary += f"; non-deterministic: rounds {', '.join(str(t.round + 1) for t in failed_rounds)} failed"
        return Verdict(check_id, FAIL, summary, findings, rates=rates)
    if errors:
        return Verdict(check_id, UNKNOWN, f"could not decide: {errors[0]}", findings, hint=hint)
    if prefix and judged and not any(ok_count(t, prefix) for t in judged):
        sample = judged[0].labelled(prefix)[0]
        return Verdict(check_id, UNKNOWN, f"no parallel invocation exited 0 in any round, so the invariant was never "
                       f"exercised (e.g. {sample.label}: {sample.outcome()}; {sample.printed(100)})", findings,
                       hint="Check the workload's run command: it must succeed when run alone.", rates=rates)
    return Verdict(check_id, PASS, f"{describe_pass(judged)} ({how}){_refusals(judged, prefix)}", findings, rates=rates)


def _refusals(trials, prefix) -> str:
    """How many parallel invocations were refused or failed, with one of them: a pass on 3 increments out of 24 is
    weaker evidence than a pass on 24, and says so."""
    if not prefix:
        return ""
    runs = [inv for t in trials for inv in t.labelled(prefix)]
    refused = [inv for inv in runs if not succeeded(inv)]
    if not refused:
        return ""
    sample = refused[0]
    return (f"; {len(refused)} of {len(runs)} invocations were refused or failed (e.g. {sample.label}: "
            f"{sample.outcome()}; {sample.printed(100)})")


def ok_count(trial, prefix: str) -> int:
    return sum(1 for inv in trial.labelled(prefix) if succeeded(inv))


def finding(code: str, trial, labels=(), expected="", found="", /, **args) -> Finding:
    """A finding with its evidence; `args` fill the rule's message template (positional-only above so that
    templates may use the names labels, expected and found too)."""
    return Finding(code, args, evidence(trial, labels, expected, found))


def conflict_trial(history, check_id: str):
    """(the lock-conflict trial, None) when it can be judged, else (None, the not-tested/unknown verdict)."""
    trials = history.of("lock-conflict")
    if not trials:
        return None, Verdict(check_id, NOT_TESTED, "the spec has no lock section", hint="Add lock.contender and lock.hold.")
    trial = trials[0]
    if trial.error:
        return None, Verdict(check_id, UNKNOWN, f"could not decide: {trial.error}")
    if not trial.facts["baseline_ok"]:
        base = trial.invocation("baseline")
        return None, Verdict(check_id, UNKNOWN, f"the contender fails even with nobody holding the lock "
                             f"({base.outcome()}; {base.printed()})",
                             hint="lock.contender must be a command that succeeds on its own.")
    return trial, None


def not_excluded(trial) -> str | None:
    """How the contender got past a held lock ('reached' the parked state, or ran and exited 0), else None."""
    state = trial.facts.get("while_held")
    if state == "reached":
        return "opened the state file the holder was reading, without waiting for any lock"
    if state == "exited" and succeeded(trial.invocation("contender")):
        return "ran and exited 0"
    return None
