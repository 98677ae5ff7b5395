"""Helpers shared by checks: summarising rounds, and turning trials into a verdict."""
from __future__ import annotations

import shlex

from ..findings import FAIL, NOT_APPLICABLE, PASS, UNKNOWN, Evidence, Finding, Verdict


def evidence(trial, labels=(), expected="", found="") -> Evidence:
    invocations = []
    for label in labels:
        inv = trial.invocation(label)
        if inv is not None:
            invocations.append({"label": label, "command": shlex.join(inv.argv), "outcome": inv.outcome(),
                                "printed": inv.printed()})
    return Evidence(trial=f"{trial.scenario}: {trial.name} (round {trial.round + 1})", invocations=invocations,
                    expected=str(expected), found=str(found))


def verdict_over_rounds(check_id: str, trials, judge_one, describe_pass) -> Verdict:
    """Judge each trial with `judge_one(trial) -> list[Finding]`; any finding fails, errors make it unknown.

    The summary says in how many rounds it failed, so a race seen once in five rounds reads as such.
    """
    if not trials:
        return Verdict(check_id, NOT_APPLICABLE, "no such workload in the spec")
    findings, failed_rounds, errors = [], [], []
    for trial in trials:
        if trial.error:
            errors.append(trial)
            continue
        mine = judge_one(trial)
        if any(not f.advisory for f in mine):
            failed_rounds.append(trial)
        findings.extend(mine)
    judged = len(trials) - len(errors)
    if failed_rounds:
        first = next(f for f in findings if not f.advisory)
        summary = f"failed in {len(failed_rounds)} of {judged} rounds; first: {first.message()}"
        if 0 < len(failed_rounds) < judged:
            summary += f" (non-deterministic: rounds {', '.join(str(t.round + 1) for t in failed_rounds)} failed)"
        return Verdict(check_id, FAIL, summary, findings)
    if errors:
        return Verdict(check_id, UNKNOWN, f"could not decide: {errors[0].error}", findings,
                       hint="Fix the spec or the tool so that the trial can run (see the error).")
    return Verdict(check_id, PASS, describe_pass(trials), findings)


def ok_count(trial, prefix: str) -> int:
    return sum(1 for inv in trial.labelled(prefix) if inv.ok)


def finding(code: str, trial, labels=(), expected="", found="", /, **args) -> Finding:
    """A finding with its evidence; `args` fill the rule's message template (positional-only above so that
    templates may use the names labels, expected and found too)."""
    return Finding(code, args, evidence(trial, labels, expected, found))
