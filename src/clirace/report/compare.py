"""A baseline comparison (baseline.Comparison) as report lines, shared by every format, and `clirace diff`'s
own output in text, JSON, Markdown and GitHub annotations."""
from __future__ import annotations

import json

from clirace.report._safe import clean


def lines(comparison) -> list[tuple[str, str, str]]:
    """(status, subject, detail) for every finding code, then every criterion, then the score."""
    out = []
    for change in comparison.changes:
        subject = {"criterion": f"criterion {change.subject}", "score": "score"}.get(change.name,
                                                                                     f"{change.subject} {change.name}")
        out.append((change.status, subject, change.detail + (" (a regression)" if change.regression else "")))
    out += [("note", "", note) for note in comparison.notes]
    return out


def summary(comparison) -> str:
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


def verdict(comparison) -> str:
    return "regression" if comparison.regressions() else "no regression"


def to_text(comparison) -> str:
    rows = [f"clirace diff: {summary(comparison)}"]
    for status, subject, detail in lines(comparison):
        rows.append(f"  {status:9} {subject + ' ' if subject else ''}{clean(detail)}")
    return "\n".join(rows) + "\n"


def to_markdown(comparison) -> str:
    from clirace.report.markdown import comparison_block
    icon = "❌ regression" if comparison.regressions() else "✅ no regression"
    return "\n".join([f"## clirace diff: {icon}", "", *comparison_block(comparison)]) + "\n"


def to_github(comparison) -> str:
    """The verdict first (an ::error on a regression, else a ::notice), then an ::error per regression."""
    from clirace.report.github import _annotation, comparison_lines
    first = _annotation("error" if comparison.regressions() else "notice", clean(summary(comparison)),
                        title="clirace diff")
    return "\n".join([first, *comparison_lines(comparison)[:-1]]) + "\n"  # (its last line is the summary again)


def to_json(comparison) -> str:
    return json.dumps({"verdict": verdict(comparison), **comparison.to_dict()}, indent=2)


RENDERERS = {"text": to_text, "json": to_json, "markdown": to_markdown, "github": to_github}
