"""Stage 8, report: one Result rendered in every format, one module each.

text (a terminal), json (machines; its JSON Schema ships as result_schema.json), markdown (a pull request or
step summary), github (workflow-command annotations), junit (CI test results), sarif (code scanning).
Everything that came from the target is untrusted: each renderer shows it through `_safe`.

May import: everything below it: errors, history, spec, checks, verdict; never run, scenarios or cli.
"""
from __future__ import annotations

import io
from collections.abc import Callable
from typing import TYPE_CHECKING, cast

if TYPE_CHECKING:  # what __getattr__ gives, for type checkers
    from rich.console import Console

    from clirace.report._failed import Item, Items
    from clirace.report.github import to_github as to_github
    from clirace.report.jsonout import to_json as to_json
    from clirace.report.junit import to_junit as to_junit
    from clirace.report.markdown import to_markdown as to_markdown
    from clirace.report.sarif import to_sarif as to_sarif
    from clirace.report.text import render_text as render_text

    RENDERERS: dict[str, Callable[[Items], str]]


def to_text(items: Items) -> str:
    """The text report as a file holds it: plain, $COLUMNS wide (default 100), no trailing spaces. A list of
    results gives each in turn."""
    from clirace.report.text import console

    buffer = io.StringIO()
    render_all(items, console(buffer))
    return buffer.getvalue()


def render_all(items: Items, out: Console, everything: list[Item] | None = None) -> None:
    """Each item in turn, after the overall gate line when `everything` (default: the items) is several specs."""
    from rich.text import Text

    from clirace.report.text import render_text
    from clirace.verdict import gate
    items = items if isinstance(items, list) else [items]
    overall = gate.overall(everything if everything is not None else items)
    if overall is not None:
        out.print(Text(overall.line(), style="bold green" if overall.passed else
                       "bold red" if overall.enforced else "bold yellow"))
        out.print()
    for n, item in enumerate(items):
        if n:
            out.print()
        render_text(item, out)


# Each renderer's module is imported on first use, not with the package: `clirace explain` reads
# report/explain.py, and neither it nor `--help` should load rich and every format (docs/benchmarks.md, Start-up).
_LAZY = {"to_github": "github", "to_json": "jsonout", "to_junit": "junit", "to_markdown": "markdown",
         "to_sarif": "sarif", "render_text": "text"}


def renderer(fmt: str) -> Callable[[Items], str]:
    """The one renderer of `fmt`, its module imported now: a `--format json` run loads neither rich nor the
    other formats (40-50 ms of a check's start-up)."""
    return to_text if fmt == "text" else cast("Callable[[Items], str]", __getattr__(f"to_{fmt}"))


def __getattr__(name: str) -> object:
    import importlib

    if name in _LAZY:
        return getattr(importlib.import_module(f"clirace.report.{_LAZY[name]}"), name)
    if name == "RENDERERS":
        renderers = {fmt: renderer(fmt) for fmt in ("text", "json", "markdown", "github", "junit", "sarif")}
        globals()["RENDERERS"] = renderers  # one table, as the module had before it was lazy
        return renderers
    raise AttributeError(name)


__all__ = ["RENDERERS", "render_all", "render_text", "renderer", "to_github", "to_json", "to_junit", "to_markdown",
           "to_sarif", "to_text"]
