"""A Markdown report for a pull request comment or a CI step summary, safe by construction.

Everything that came from the target (what it printed, paths, commands, values, summaries, notes) appears
only inside code spans or fenced blocks whose fence is longer than any backtick run inside them, so no
mention, link, image, HTML or emphasis can come from it; what is outside code is clirace's own text
(rubric lines, rule names, fixes). Each finding's evidence folds into <details>. The whole report stays
under GitHub's comment limit, dropping whole findings (with a note) rather than cutting a fence.
"""
from __future__ import annotations

import re

from ..rubric import load_section
from ._group import grouped, more_text, shown_invocations
from ._safe import clean, clip, replay, spec_dir_of, status_value

LIMIT = 65_536  # GitHub's limit on a comment or a step summary, in characters
CELL = 600  # characters of one table cell's evidence
FIELD = 2_000  # characters of one evidence field
OBSERVED_LINES = 30

ICON = {"pass": "✅ pass", "fail": "❌ fail", "not_tested": "⚪ not tested", "unknown": "⚠️ indeterminate",
        "not_applicable": "➖ not applicable"}
_TICKS = re.compile(r"`+")


def code(text, spec_dir: str | None = None, *, limit: int = FIELD, cell: bool = False) -> str:
    """Untrusted text as one inline code span (one line; `|` escaped inside a table cell, as GFM requires)."""
    text = clip(clean(text, spec_dir), limit)
    if not text:
        return "` `"
    ticks = "`" * (max((len(run) for run in _TICKS.findall(text)), default=0) + 1)
    pad = " " if text[0] in "` " or text[-1] in "` " else ""
    if cell:
        text = text.replace("|", "\\|")
    return f"{ticks}{pad}{text}{pad}{ticks}"


def fenced(text: str) -> str:
    """Untrusted lines as a fenced block whose fence no line inside can close."""
    longest = max((len(run) for run in _TICKS.findall(text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}text\n{text}\n{fence}"


class _Code:
    """A message argument that formats as a code span, whatever conversion the rule's template applies."""

    def __init__(self, value, spec_dir):
        self.value, self.spec_dir = value, spec_dir

    def __format__(self, spec: str) -> str:
        return code(format(self.value, spec), self.spec_dir)

    def __str__(self) -> str:
        return code(str(self.value), self.spec_dir)

    def __repr__(self) -> str:
        return code(repr(self.value), self.spec_dir)


def message(finding, spec_dir: str) -> str:
    """The rule's message (trusted template) with every argument (untrusted) in a code span."""
    try:
        return finding.rule["message"].format(**{k: _Code(v, spec_dir) for k, v in finding.args.items()})
    except (KeyError, IndexError, ValueError, TypeError):
        return code(finding.message(), spec_dir)


def _evidence_block(finding, others, spec_dir: str) -> str:
    ev = finding.evidence
    lines = []
    if ev.trial:
        lines.append(f"trial:    {ev.trial}")
    shown, hidden = shown_invocations(ev)
    for inv in shown:
        lines += [f"{inv['label']}: {inv['command']}", f"  -> {inv['outcome']}; {inv['printed']}"]
    if hidden:
        lines.append(f"... {hidden} more invocations (all in --format json)")
    if ev.expected or ev.found:
        lines += [f"expected: {ev.expected}", f"found:    {ev.found}"]
    if ev.observed:
        lines.append(f"observed: {ev.observed}")
    if others:
        lines.append(more_text(others))
    body = "\n".join(clip(clean(line, spec_dir), FIELD) for line in lines) or "(no evidence recorded)"
    return "\n".join(["<details><summary>Evidence</summary>", "", fenced(body), "", "</details>"])


def _finding(result, finding, others, spec_dir: str) -> str:
    parts = [f"#### {finding.code} {finding.rule['name']} ({finding.severity})", "", message(finding, spec_dir), ""]
    if finding.rule.get("fix"):
        parts += [f"**Fix:** {finding.rule['fix']}", ""]
    if finding.evidence.replay:
        parts += [f"Replay: {code(replay(result, finding.evidence.replay))}", ""]
    parts.append(_evidence_block(finding, others, spec_dir))
    return "\n".join(parts)


def to_markdown(result, limit: int = LIMIT) -> str:
    section = load_section("s15")
    spec_dir = spec_dir_of(result)
    top = max(level["score"] for level in section["levels"])
    head = [f"## clirace: §{section['section']} {section['title']}: **{result.score.score}/{top}**", "",
            f"> {result.score.line}", ""]
    if result.score.blocked_by:
        blocked = ", ".join(f"`{c.id}` ({ICON[status_value(c.status)]})" for c in result.score.blocked_by)
        head += [f"Not higher because: {blocked}.", ""]
    if result.score.corruption:
        head += ["**Silent corruption was found, which holds the score at 0.**", ""]
    missing = result.missing_evidence()
    if missing:
        head += ["**Not decided, so not counted for the tool (each says why, and what would decide it):**", ""]
        head += [f"- `{m['criterion']}` {m['status']}: {code(m['why'], spec_dir, limit=CELL)}"
                 + (f"; to decide it: {code(m['to_decide'], spec_dir, limit=CELL)}" if m["to_decide"] else "")
                 for m in missing]
        head += [""]
    head += ["| level | criterion | status | evidence |", "|---|---|---|---|"]
    for c in result.criteria:
        status = status_value(c.status)
        evidence = c.evidence + (f" | to test: {c.to_test}" if c.to_test and status != "fail" else "")
        head.append(f"| {c.level} | `{c.id}` | {ICON[status]} | {code(evidence, spec_dir, limit=CELL, cell=True)} |")

    tail = []
    observed = result.observed()
    if observed:
        tail += ["", "### Observed (strace)", "", *[f"- {code(line, spec_dir, limit=300)}" for line in
                                                    observed[:OBSERVED_LINES]]]
        if len(observed) > OBSERVED_LINES:
            tail.append(f"- … {len(observed) - OBSERVED_LINES} more (all in `--format json`)")
    tail += ["", f"Seed {result.seed}; {result.seconds:.1f}s; replay all: {code(replay(result, result.replay()))}"]
    tail += [f"- note: {code(note, spec_dir)}" for note in result.notes]

    blocks = [_finding(result, f, others, spec_dir) for f, others in grouped(result.findings())]
    text = _assemble(head, blocks, tail, 0)
    shown = len(blocks)
    while len(text) > limit and shown > 0:  # drop whole findings from the end, never cut inside one
        shown -= 1
        text = _assemble(head, blocks[:shown], tail, len(blocks) - shown)
    return text if len(text) <= limit else text[:limit - 100].rsplit("\n", 1)[0] + "\n\n_(report cut to fit)_\n"


def _assemble(head, blocks, tail, dropped: int) -> str:
    lines = list(head)
    if blocks or dropped:
        lines += ["", "### Findings", ""]
        for block in blocks:
            lines += [block, ""]
        if dropped:
            lines += [f"_{dropped} more findings not shown, to keep this under GitHub's {LIMIT:,}-character "
                      "limit; all are in `--format json`._", ""]
    return "\n".join(lines + tail) + "\n"
