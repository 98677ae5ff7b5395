"""The terminal report: criteria table, findings with evidence, and the score with the rubric line behind it.

Every string that can come from the target goes through `_safe.clean` (control characters escaped, runner
paths shortened), and into `Text` objects, never into Rich markup. Layout: a terminal's own width; piped output
uses $COLUMNS (default 100), no box drawing and no trailing spaces. NO_COLOR removes colour (and with it
bold and dim), nothing else: the layout is the same.
"""
from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable
from typing import IO, cast

from rich import box
from rich.console import Console
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from clirace.report._failed import Failed, Item
from clirace.report._group import grouped, more_text, shown_invocations
from clirace.report._locate import display_path
from clirace.report._safe import clean, replay, spec_dir_of, status_value
from clirace.verdict import gate
from clirace.verdict.baseline import Comparison
from clirace.verdict.result import Result
from clirace.verdict.rubric import load_section

STYLE = {"pass": "green", "fail": "bold red", "not_tested": "yellow", "unknown": "magenta", "not_applicable": "dim"}
WORD = {"pass": "pass", "fail": "FAIL", "not_tested": "not tested", "unknown": "indeterminate",
        "not_applicable": "not applicable"}
PIPE_WIDTH = 100


_TAIL = re.compile(r"(?:[ \t]|\x1b\[[0-9;]*m)+$")  # a line's end: spaces and colour codes, in any order
_CODE = re.compile(r"\x1b\[[0-9;]*m")


def _no_trailing_space(line: str) -> str:
    """`line` without the spaces at its end, its closing colour codes kept: a wrapped coloured line ends in the
    wrap's space, then the reset code, then the padding (`--only \x1b[0m    `)."""
    tail = _TAIL.search(line)
    return line if tail is None else line[:tail.start()] + "".join(_CODE.findall(tail.group()))


class _NoTrailingSpace:
    """A file wrapper that drops the spaces Rich pads table cells with at the end of each line (before the
    colour codes that close the line, when coloured)."""

    def __init__(self, file: IO[str]) -> None:
        self.file, self.pending = file, ""

    def write(self, text: str) -> int:
        lines = (self.pending + text).split("\n")
        self.pending = lines.pop()
        if lines:
            self.file.write("".join(_no_trailing_space(line) + "\n" for line in lines))
        return len(text)

    def flush(self) -> None:
        if self.pending.strip():
            self.file.write(_no_trailing_space(self.pending))
        self.pending = ""
        self.file.flush()

    def isatty(self) -> bool:
        return False


def wants_colour(file: IO[str], color: str = "auto") -> bool:
    """--color always|never, else NO_COLOR (set and not empty: no colour), else FORCE_COLOR (set and not empty:
    colour), else colour only on a terminal."""
    if color in ("always", "never"):
        return color == "always"
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR"):
        return True
    return file.isatty()


def console(file: IO[str] | None = None, color: str = "auto") -> Console:
    """A terminal gets its own width and a box around the table; anything else (a pipe, a file) is $COLUMNS
    wide (default 100), boxless, without trailing spaces. Colour is decided apart (wants_colour): it never
    changes the layout."""
    file = file or sys.stdout
    colour = wants_colour(file, color)
    if file.isatty():
        return Console(file=file, color_system="auto" if colour else None, force_terminal=True, no_color=not colour,
                       highlight=False, emoji=False)
    try:
        width = int(os.environ.get("COLUMNS", "")) or PIPE_WIDTH
    except ValueError:
        width = PIPE_WIDTH
    # rich asks its file for write, flush and isatty only (fileno through getattr, tolerating its absence)
    return Console(file=cast(IO[str], _NoTrailingSpace(file)), no_color=not colour, color_system="standard" if colour else None,
                   force_terminal=colour, highlight=False, emoji=False, width=max(40, width))


NARROW = 90  # below this many columns the evidence goes under its criterion, not in a narrow table cell


def _indented(text: Text, indent: int) -> Padding:
    """`text` wrapped to the console's width with every line, wrapped ones included, indented."""
    return Padding(text, (0, 0, 0, indent), expand=False)


def render_text(result: Item, out: Console) -> None:
    if isinstance(result, Failed):
        _render_failed(result, out)
        return
    section = load_section("s15")
    spec_dir = spec_dir_of(result)

    def safe(text: object) -> str:
        return clean(text, spec_dir)

    def say(text: str, indent: int = 0, style: str = "") -> None:
        out.print(_indented(Text(text, style=style), indent) if indent else Text(text, style=style))

    passed = gate.of(result)
    out.print(Text(f"{passed.line()} ({display_path(result.spec_path) or 'spec'})",
                   style="bold green" if passed.passed else "bold red" if passed.enforced else "bold yellow"))
    missing = result.missing_evidence()
    if missing:
        say("Not decided, so not counted for the tool (each says why, and what would decide it):", style="bold yellow")
        for m in missing:
            line = f"{m['criterion']} {m['status']}: {m['why']}"
            say(safe(line + (f"; to decide it: {m['to_decide']}" if m["to_decide"] else "")), 2)
    out.print()
    _criteria(result, out, safe)
    findings = result.findings()
    if findings:
        out.print()
        out.print(Text("Findings", style="bold"))
        for f, others in grouped(findings):
            style = {"corruption": "bold red", "error": "red"}.get(f.severity, "cyan")
            out.print(Text.assemble((f"{f.code} {f.rule['name']}", style), f" [{f.severity}]"))
            say(safe(f.message()), 4)
            ev = f.evidence
            shown, hidden = shown_invocations(ev)
            for inv in shown:
                say(f"{safe(inv['label'])}: {safe(inv['command'])}", 4)
                say(f"-> {safe(inv['outcome'])}; {safe(inv['printed'])}", 6)
            if hidden:
                say(f"… {hidden} more invocations (all in --format json)", 4)
            if ev.expected or ev.found:
                say(f"expected: {safe(ev.expected)}   found: {safe(ev.found)}", 4)
            if ev.observed:
                say(f"observed: {safe(ev.observed)}", 4)
            if not f.advisory:
                if f.rule.get("fix"):
                    say(f"fix: {f.rule['fix']}", 4)
                say(f"replay: {replay(result, ev.replay)}", 4, "dim")
            if others:
                say(safe(more_text(others)), 4, "dim")
    observed = result.observed()
    if observed:
        out.print()
        out.print(Text("Observed (strace)", style="bold"))
        for line in observed:
            say(safe(line), 2)
    if result.comparison is not None:
        out.print()
        _comparison(result.comparison, out, safe)
    for note in result.notes:
        say(f"note: {safe(note)}", 0, "yellow")
    out.print()
    top = max(level["score"] for level in section["levels"])
    head, _, rest = result.score.headline().partition(": ")
    out.print(_indented(Text.assemble((head, "bold green" if result.score.score == top else "bold"), f": {safe(rest)}"), 0))
    say(safe(result.score.level_text()), 2)
    if result.score.corruption:
        say("silent corruption was found, which holds the score at 0", 2, "bold red")
    say(f"seed {result.seed}, {result.seconds:.1f}s; replay: {replay(result, result.replay())}", 2, "dim")
    out.file.flush()


def _criteria(result: Result, out: Console, safe: Callable[[object], str]) -> None:
    section = load_section("s15")
    rows = []
    for c in result.criteria:
        status = status_value(c.status)
        evidence = c.evidence + (f" | to test: {c.to_test}" if c.to_test and status != "fail" else "")
        rows.append((c, status, safe(evidence)))
    if out.width < NARROW:
        out.print(Text(f"§{section['section']} {section['title']}", style="italic"))
        for c, status, evidence in rows:
            out.print(Text.assemble(f"{c.level} ", c.id, "  ", (WORD[status], STYLE[status])))
            out.print(_indented(Text(evidence), 4))
        return
    ids = [c.id for c in result.criteria]
    table = Table(title=f"§{section['section']} {section['title']}", show_lines=False, expand=False,
                  box=box.SIMPLE_HEAD if out.file.isatty() else None, pad_edge=False)
    table.add_column("lvl", justify="right", no_wrap=True)
    table.add_column("criterion", no_wrap=True, min_width=max(map(len, ids), default=9))
    table.add_column("status", no_wrap=True)
    table.add_column("evidence", overflow="fold", ratio=1)
    for c, status, evidence in rows:
        table.add_row(str(c.level), Text(c.id), Text(WORD[status], style=STYLE[status]), Text(evidence))
    out.print(table)


def _comparison(comparison: Comparison, out: Console, safe: Callable[[object], str]) -> None:
    from clirace.report.compare import lines
    out.print(Text(f"Compared with {safe(comparison.old.source)}", style="bold"))
    for status, subject, detail in lines(comparison):
        out.print(_indented(Text.assemble((f"{status:9} ", COMPARE_STYLE.get(status, "")),
                                          (f"{subject} " if subject else "", "bold"), safe(detail)), 2))


COMPARE_STYLE = {"fixed": "green", "new": "bold red", "still": "yellow", "undecided": "magenta"}


def _render_failed(failed: Failed, out: Console) -> None:
    place = failed.place()
    out.print(Text(f"clirace gate failed: the {failed.kind} stopped the check", style="bold red"))
    out.print(_indented(Text(clean(f"{place.path}:{place.line}:{place.column}: {failed.message()}")), 2))
    out.file.flush()
