"""A Markdown report for a pull request: score, criteria table, findings with evidence and replay."""
from __future__ import annotations

from ..rubric import load_section
from ._group import grouped, more_text, shown_invocations

ICON = {"pass": "✅ pass", "fail": "❌ fail", "not_tested": "⚪ not tested", "unknown": "⚠️ indeterminate"}


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def to_markdown(result) -> str:
    section = load_section("s15")
    top = max(level["score"] for level in section["levels"])
    lines = [f"## clirace: §{section['section']} {section['title']}: **{result.score.score}/{top}**", "",
             f"> {result.score.line}", ""]
    if result.score.blocked_by:
        blocked = ", ".join(f"`{c.id}` ({ICON[c.status]})" for c in result.score.blocked_by)
        lines += [f"Not higher because: {blocked}.", ""]
    lines += ["| level | criterion | status | evidence |", "|---|---|---|---|"]
    for c in result.criteria:
        evidence = c.evidence + (f" — to test: {c.to_test}" if c.to_test and c.status != "fail" else "")
        lines.append(f"| {c.level} | `{c.id}` | {ICON[c.status]} | {_cell(evidence)} |")
    findings = result.findings()
    if findings:
        lines += ["", "### Findings", ""]
        for f, others in grouped(findings):
            lines.append(f"- **{f.code}** `{f.rule['name']}` ({f.severity}): {f.message()}")
            ev = f.evidence
            if ev.trial:
                lines.append(f"  - trial: {ev.trial}")
            shown, hidden = shown_invocations(ev)
            for inv in shown:
                lines.append(f"  - `{inv['label']}`: `{_cell(inv['command'])}` → {inv['outcome']}; {_cell(inv['printed'])}")
            if hidden:
                lines.append(f"  - … {hidden} more invocations (all in `--format json`)")
            if ev.expected or ev.found:
                lines.append(f"  - expected: {_cell(ev.expected)}; found: {_cell(ev.found)}")
            if ev.observed:
                lines.append(f"  - observed: {_cell(ev.observed)}")
            if f.rule.get("fix"):
                lines.append(f"  - fix: {f.rule['fix']}")
            lines.append(f"  - replay: `{ev.replay}`")
            if others:
                lines.append(f"  - {more_text(others)}")
    observed = result.observed()
    if observed:
        lines += ["", "### Observed (strace)", "", *[f"- {_cell(line)}" for line in observed]]
    lines += ["", f"Seed {result.seed}; replay all: `{result.replay()}`; {result.seconds:.1f}s."]
    lines += [f"_{note}_" for note in result.notes]
    return "\n".join(lines) + "\n"
