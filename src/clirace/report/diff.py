"""`clirace diff`'s output: a baseline comparison in text, JSON, Markdown and GitHub annotations, each with the
verdict on its first line."""
from __future__ import annotations

import json

from clirace.report._safe import clean
from clirace.report.compare import lines, summary, verdict
from clirace.report.github import _annotation, comparison_lines
from clirace.report.markdown import comparison_block
from clirace.verdict.baseline import Comparison


def to_text(comparison: Comparison) -> str:
    rows = [f"clirace diff: {summary(comparison)}"]
    for status, subject, detail in lines(comparison):
        rows.append(f"  {status:9} {subject + ' ' if subject else ''}{clean(detail)}")
    return "\n".join(rows) + "\n"


def to_markdown(comparison: Comparison) -> str:
    icon = "❌ regression" if comparison.regressions() else "✅ no regression"
    return "\n".join([f"## clirace diff: {icon}", "", *comparison_block(comparison)]) + "\n"


def to_github(comparison: Comparison) -> str:
    """The verdict first (an ::error on a regression, else a ::notice), then an ::error per regression."""
    first = _annotation("error" if comparison.regressions() else "notice", clean(summary(comparison)),
                        title="clirace diff")
    return "\n".join([first, *comparison_lines(comparison)[:-1]]) + "\n"  # (its last line is the summary again)


def to_json(comparison: Comparison) -> str:
    return json.dumps({"verdict": verdict(comparison), **comparison.to_dict()}, indent=2)


RENDERERS = {"text": to_text, "json": to_json, "markdown": to_markdown, "github": to_github}
