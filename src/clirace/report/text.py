"""The terminal report: criteria table, findings with evidence, and the score with the rubric line behind it.

Every string that can come from the target goes through `_safe.clean` (control characters escaped, runner
paths shortened), and into `Text` objects, never into Rich markup. Layout: a terminal's own width; piped output
uses $COLUMNS (default 100), no box drawing and no trailing spaces. NO_COLOR removes colour (and with it
bold and dim), nothing else: the layout is the same.
"""
from __future__ import annotations

import os
import sys

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from ..rubric import load_section
from ._group import grouped, more_text, shown_invocations
from ._safe import clean, replay, spec_dir_of, status_value

STYLE = {"pass": "green", "fail": "bold red", "not_tested": "yellow", "unknown": "magenta", "not_applicable": "dim"}
WORD = {"pass": "pass", "fail": "FAIL", "not_tested": "not tested", "unknown": "indeterminate",
        "not_applicable": "not applicable"}
PIPE_WIDTH = 100


class _NoTrailingSpace:
    """A file wrapper that drops the spaces Rich pads table cells with at the end of each line."""

    def __init__(self, file):
        self.file, self.pending = file, ""

    def write(self, text: str) -> int:
        lines = (self.pending + text).split("\n")
        self.pending = lines.pop()
        if lines:
            self.file.write("".join(line.rstrip() + "\n" for line in lines))
        return len(text)

    def flush(self) -> None:
        if self.pending.rstrip():
            self.file.write(self.pending.rstrip())
        self.pending = ""
        self.file.flush()

    def isatty(self) -> bool:
        return False


def console(file=None) -> Console:
    file = file or sys.stdout
    tty = file.isatty()
    no_color = bool(os.environ.get("NO_COLOR"))
    if tty:  # NO_COLOR: no colour system at all, so no escape codes either; the layout stays the terminal's
        return Console(file=file, color_system=None if no_color else "auto", highlight=False, emoji=False)
    try:
        width = int(os.environ.get("COLUMNS", "")) or PIPE_WIDTH
    except ValueError:
        width = PIPE_WIDTH
    return Console(file=_NoTrailingSpace(file), no_color=True, highlight=False, emoji=False, force_terminal=False,
                   width=max(40, width))


def render_text(result, out: Console) -> None:
    section = load_section("s15")
    spec_dir = spec_dir_of(result)

    def safe(text) -> str:
        return clean(text, spec_dir)

    ids = [c.id for c in result.criteria]
    table = Table(title=f"§{section['section']} {section['title']}", show_lines=False, expand=False,
                  box=box.SIMPLE_HEAD if out.is_terminal else None, pad_edge=False)
    table.add_column("lvl", justify="right", no_wrap=True)
    table.add_column("criterion", no_wrap=True, min_width=max(map(len, ids), default=9))
    table.add_column("status", no_wrap=True)
    table.add_column("evidence", overflow="fold", ratio=1)
    for c in result.criteria:
        status = status_value(c.status)
        evidence = c.evidence
        if c.to_test and status != "fail":
            evidence += f" | to test: {c.to_test}"
        table.add_row(str(c.level), Text(c.id), Text(WORD[status], style=STYLE[status]), Text(safe(evidence)))
    missing = result.missing_evidence()
    if missing:
        out.print(Text("Not decided, so not counted for the tool (each says why, and what would decide it):", style="bold yellow"))
        for m in missing:
            line = f"  {m['criterion']} {m['status']}: {m['why']}"
            out.print(Text(safe(line + (f"; to decide it: {m['to_decide']}" if m["to_decide"] else ""))))
        out.print()
    out.print(table)
    findings = result.findings()
    if findings:
        out.print()
        out.print(Text("Findings", style="bold"))
        for f, others in grouped(findings):
            style = {"corruption": "bold red", "error": "red"}.get(f.severity, "cyan")
            out.print(Text.assemble((f"{f.code} {f.rule['name']}", style), f" [{f.severity}] ", safe(f.message())))
            ev = f.evidence
            shown, hidden = shown_invocations(ev)
            for inv in shown:
                out.print(Text(f"    {safe(inv['label'])}: {safe(inv['command'])}"))
                out.print(Text(f"      -> {safe(inv['outcome'])}; {safe(inv['printed'])}"))
            if hidden:
                out.print(Text(f"    … {hidden} more invocations (all in --format json)"))
            if ev.expected or ev.found:
                out.print(Text(f"    expected: {safe(ev.expected)}   found: {safe(ev.found)}"))
            if ev.observed:
                out.print(Text(f"    observed: {safe(ev.observed)}"))
            if not f.advisory:
                if f.rule.get("fix"):
                    out.print(Text(f"    fix: {f.rule['fix']}"))
                out.print(Text(f"    replay: {replay(result, ev.replay)}", style="dim"))
            if others:
                out.print(Text(f"    {safe(more_text(others))}", style="dim"))
    observed = result.observed()
    if observed:
        out.print()
        out.print(Text("Observed (strace)", style="bold"))
        for line in observed:
            out.print(Text(f"  {safe(line)}"))
    for note in result.notes:
        out.print(Text(f"note: {safe(note)}", style="yellow"))
    top = max(level["score"] for level in section["levels"])
    out.print()
    out.print(Text.assemble(("score ", "bold"), (f"{result.score.score}/{top}", "bold green" if result.score.score == top else "bold"),
                            f"  {result.score.line}"))
    if result.score.blocked_by:
        out.print(Text("  not higher: " + "; ".join(f"{c.id} is {WORD[status_value(c.status)]}"
                                                    for c in result.score.blocked_by)))
    if result.score.corruption:
        out.print(Text("  silent corruption was found, which holds the score at 0", style="bold red"))
    out.print(Text(f"  seed {result.seed}, {result.seconds:.1f}s; replay: {replay(result, result.replay())}", style="dim"))
    out.file.flush()
