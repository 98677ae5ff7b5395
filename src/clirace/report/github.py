"""GitHub Actions workflow commands: one annotation per finding rule, at the spec line of what was exercised.

`::error file=SPEC,line=L,col=C,title=CRxxx name::message`, escaped as the runner expects: in the message
`%`, CR and LF; in properties also `:` and `,`. Target text is cleaned first (control characters escaped, one
line), so nothing it printed can start a workflow command of its own.
"""
from __future__ import annotations

from clirace.checks.findings import Finding
from clirace.report._failed import Failed, Items
from clirace.report._group import more_text
from clirace.report._locate import Place, display_path, located_findings
from clirace.report._safe import clean, replay, spec_dir_of
from clirace.verdict import gate
from clirace.verdict.baseline import Comparison
from clirace.verdict.result import Result

LEVEL = {"corruption": "error", "error": "error"}  # advisory and info: notice


def escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def _annotation(level: str, message: str, **props: str) -> str:
    rendered = ",".join(f"{k}={escape_property(v)}" for k, v in props.items() if v)
    return f"::{level} {rendered}::{escape_data(message)}" if rendered else f"::{level}::{escape_data(message)}"


def to_github(items: Items) -> str:
    """One result, a Failed spec, or a list of them."""
    if not isinstance(items, list):
        items = [items]
    return "\n".join(_failed(item) if isinstance(item, Failed) else _one(item) for item in items)


def _failed(failed: Failed) -> str:
    place = failed.place()
    return _annotation("error", clean(failed.message()), file=place.path, line=str(place.line),
                       col=str(place.column), title=f"clirace {failed.kind}")


def _one(result: Result) -> str:
    spec_dir = spec_dir_of(result)
    spec = display_path(result.spec_path)
    verdict = gate.of(result)
    lines: list[str] = []
    groups: dict[str, list[tuple[Finding, str, Place]]] = {}
    for finding, check, place in located_findings(result):
        groups.setdefault(finding.code, []).append((finding, check, place))
    for code, items in groups.items():
        finding, check, place = items[0]
        message = clean(finding.message(), spec_dir)
        if len(items) > 1:
            message += f" ({more_text([f for f, _, _ in items[1:]])})"
        if finding.rule.get("fix"):
            message += f" Fix: {finding.rule['fix']}"
        message += f" Replay: {replay(result, finding.evidence.replay)}"
        lines.append(_annotation(LEVEL.get(finding.severity, "notice"), message, file=place.path,
                                 line=str(place.line), col=str(place.column), title=f"{code} {finding.rule['name']}"))
    if result.comparison is not None:
        lines += comparison_lines(result.comparison, spec)
    level = "notice" if verdict.passed else "error" if verdict.enforced else "warning"
    lines.append(_annotation(level, f"{verdict.line()} ({clean(spec)})", file=spec, title="clirace gate"))
    lines.append(_annotation("notice", f"clirace {clean(result.score.headline())} ({clean(spec)}). "
                                       f"{result.score.level_text()}", title="clirace score"))
    return "\n".join(lines)


def comparison_lines(comparison: Comparison, spec: str = "") -> list[str]:
    """An ::error per regression, then one ::notice that sums the comparison up."""
    from clirace.report.compare import summary
    lines = [_annotation("error", clean(change.said()), file=spec,
                         title="clirace regression") for change in comparison.changes if change.regression]
    lines.append(_annotation("notice", clean(summary(comparison)), title="clirace baseline"))
    return lines
