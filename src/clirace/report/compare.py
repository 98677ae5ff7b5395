"""A baseline comparison (baseline.Comparison) as report lines, shared by every format (`clirace diff`'s own
output: diff.py)."""
from __future__ import annotations

from clirace.report._safe import clean
from clirace.verdict.baseline import Comparison


def lines(comparison: Comparison) -> list[tuple[str, str, str]]:
    """(status, subject, detail) for every finding code, then every criterion, then the score."""
    out: list[tuple[str, str, str]] = []
    for change in comparison.changes:
        subject = {"criterion": f"criterion {change.subject}", "score": "score"}.get(change.name,
                                                                                     f"{change.subject} {change.name}")
        out.append((change.status, subject, change.detail + (" (a regression)" if change.regression else "")))
    out += [("note", "", note) for note in comparison.notes]
    return out


def summary(comparison: Comparison) -> str:
    """One line, the verdict first: `regression against OLD: new CR702; score 2 -> 0; regressions: ...` or
    `no regression against OLD: fixed CR111; still CR601; score 0 -> 2`."""
    groups: dict[str, list[str]] = {}
    for change in comparison.findings():
        groups.setdefault(change.status, []).append(change.subject)
    said = [f"{status} {', '.join(codes)}" for status, codes in groups.items()]
    said.append(f"score {comparison.old.score} -> {comparison.new.score}")
    regressions = comparison.regressions()
    tail = f"; regressions: {'; '.join(regressions)}" if regressions else ""
    return f"{verdict(comparison)} against {clean(comparison.old.source)}: {'; '.join(said)}{tail}"


def verdict(comparison: Comparison) -> str:
    return "regression" if comparison.regressions() else "no regression"

