"""Findings grouped for reading: the first of each rule in full, the rest counted (all stay in the JSON)."""
from __future__ import annotations

from clirace.checks.findings import Evidence, Finding

MAX_INVOCATIONS = 4


def grouped(findings: list[Finding]) -> list[tuple[Finding, list[Finding]]]:
    """[(first finding, [others with the same code])] in order of first appearance."""
    groups: dict[str, list[Finding]] = {}
    for f in findings:
        groups.setdefault(f.code, []).append(f)
    out: list[tuple[Finding, list[Finding]]] = []
    for fs in groups.values():
        # Show the instance with the most evidence (a traced round says how the tool wrote its files).
        first = next((f for f in fs if f.evidence.observed), fs[0])
        out.append((first, [f for f in fs if f is not first]))
    return out


def more_text(others: list[Finding]) -> str:
    if not others:
        return ""
    trials = sorted({o.evidence.trial for o in others if o.evidence.trial})
    where = f" ({'; '.join(trials[:3])}{'; …' if len(trials) > 3 else ''})" if trials else ""
    return f"and {len(others)} more like it{where}"


def shown_invocations(evidence: Evidence) -> tuple[list[dict[str, str]], int]:
    invs = evidence.invocations
    return invs[:MAX_INVOCATIONS], max(0, len(invs) - MAX_INVOCATIONS)
