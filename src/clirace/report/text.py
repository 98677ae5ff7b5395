"""The terminal report: criteria table, findings with evidence, and the score with the rubric line behind it.

Plain text (no colour, no box drawing) when stdout is not a terminal or NO_COLOR is set.
"""
from __future__ import annotations

import os
import sys

from rich.console import Console
from rich.table import Table
from rich.text import Text

from ..rubric import load_section
from ._group import grouped, more_text, shown_invocations

STYLE = {"pass": "green", "fail": "bold red", "not_tested": "yellow", "unknown": "magenta"}
WORD = {"pass": "pass", "fail": "FAIL", "not_tested": "not tested", "unknown": "indeterminate"}


def console(file=None) -> Console:
    file = file or sys.stdout
    plain = bool(os.environ.get("NO_COLOR")) or not file.isatty()
    return Console(file=file, no_color=plain, highlight=False, emoji=False, soft_wrap=plain,
                   force_terminal=None if not plain else False, width=None if not plain else 200)


def render_text(result, out: Console) -> None:
    section = load_section("s15")
    plain = out.no_color
    table = Table(title=f"§{section['section']} {section['title']}", show_lines=False, expand=False,
                  box=None if plain else __import__("rich.box").box.SIMPLE_HEAD)
    table.add_column("lvl", justify="right")
    table.add_column("criterion")
    table.add_column("status")
    table.add_column("evidence", overflow="fold")
    for c in result.criteria:
        evidence = c.evidence
        if c.to_test and c.status != "fail":
            evidence += f" | to test: {c.to_test}"
        table.add_row(str(c.level), c.id, Text(WORD[c.status], style=STYLE[c.status]), evidence)
    out.print(table)
    findings = result.findings()
    if findings:
        out.print()
        out.print(Text("Findings", style="bold"))
        for f, others in grouped(findings):
            style = {"corruption": "bold red", "error": "red"}.get(f.severity, "cyan")
            out.print(Text.assemble((f"{f.code} {f.rule['name']}", style), f" [{f.severity}] ", f.message()))
            ev = f.evidence
            shown, hidden = shown_invocations(ev)
            for inv in shown:
                out.print(Text(f"    {inv['label']}: {inv['command']}\n      -> {inv['outcome']}; {inv['printed']}"))
            if hidden:
                out.print(Text(f"    … {hidden} more invocations (all in --format json)"))
            if ev.expected or ev.found:
                out.print(Text(f"    expected: {ev.expected}   found: {ev.found}"))
            if ev.observed:
                out.print(Text(f"    observed: {ev.observed}"))
            if not f.advisory:
                out.print(Text(f"    fix: {f.rule.get('fix', '')}"))
                out.print(Text(f"    replay: {ev.replay}", style="dim"))
            if others:
                out.print(Text(f"    {more_text(others)}", style="dim"))
    observed = result.observed()
    if observed:
        out.print()
        out.print(Text("Observed (strace)", style="bold"))
        for line in observed:
            out.print(Text(f"  {line}"))
    for note in result.notes:
        out.print(Text(f"note: {note}", style="yellow"))
    top = max(level["score"] for level in section["levels"])
    out.print()
    out.print(Text.assemble(("score ", "bold"), (f"{result.score.score}/{top}", "bold green" if result.score.score == top else "bold"),
                            f"  {result.score.line}"))
    if result.score.blocked_by:
        out.print(Text("  not higher: " + "; ".join(f"{c.id} is {WORD[c.status]}" for c in result.score.blocked_by)))
    if result.score.corruption:
        out.print(Text("  silent corruption was found, which holds the score at 0", style="bold red"))
    out.print(Text(f"  seed {result.seed}, {result.seconds:.1f}s; replay: {result.replay()}", style="dim"))
