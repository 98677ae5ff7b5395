"""A Markdown report for a pull request comment or a CI step summary, safe by construction.

Everything that came from the target (what it printed, paths, commands, values, summaries, notes) appears
only inside code spans or fenced blocks whose fence is longer than any backtick run inside them, so no
mention, link, image, HTML or emphasis can come from it; what is outside code is clirace's own text
(rubric lines, rule names, fixes). Each finding's evidence folds into <details>. The whole report stays
under GitHub's comment limit, dropping whole findings (with a note) rather than cutting a fence.
"""
from __future__ import annotations

import re

from clirace.checks.findings import Finding
from clirace.report._failed import Failed, Items
from clirace.report._group import grouped, more_text, shown_invocations
from clirace.report._safe import clean, clip, escape_controls, replay, spec_dir_of, status_value
from clirace.verdict import gate
from clirace.verdict.baseline import Comparison
from clirace.verdict.result import Result
from clirace.verdict.rubric import load_section

LIMIT = 65_536  # GitHub's limit on a comment or a step summary, in characters
CELL = 600  # characters of one table cell's evidence
FIELD = 2_000  # characters of one evidence field
OBSERVED_LINES = 30

ICON = {"pass": "✅ pass", "fail": "❌ fail", "not_tested": "⚪ not tested", "unknown": "⚠️ indeterminate",
        "not_applicable": "➖ not applicable"}
_TICKS = re.compile(r"`+")


def code(text: object, spec_dir: str | None = None, *, limit: int = FIELD, cell: bool = False, verbatim: bool = False) -> str:
    """Untrusted text as one inline code span (one line; `|` escaped inside a table cell, as GFM requires).
    `verbatim`: controls escaped but paths not shortened (a command to paste)."""
    text = clip(escape_controls(" ".join(str(text).split())) if verbatim else clean(text, spec_dir), limit)
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

    def __init__(self, value: object, spec_dir: str) -> None:
        self.value, self.spec_dir = value, spec_dir

    def __format__(self, spec: str) -> str:
        if isinstance(self.value, (int, float)) and not isinstance(self.value, bool):
            return format(self.value, spec)  # clirace's own counts: plain, not code
        return code(format(self.value, spec), self.spec_dir)

    def __str__(self) -> str:
        return code(str(self.value), self.spec_dir)

    def __repr__(self) -> str:
        return code(repr(self.value), self.spec_dir)


def message(finding: Finding, spec_dir: str) -> str:
    """The rule's message (trusted template) with every argument (untrusted) in a code span."""
    try:
        template: str = finding.rule["message"]
        return template.format(**{k: _Code(v, spec_dir) for k, v in finding.args.items()})
    except (KeyError, IndexError, ValueError, TypeError):
        return code(finding.message(), spec_dir)


def _evidence_block(finding: Finding, others: list[Finding], spec_dir: str) -> str:
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


def _finding(result: Result, finding: Finding, others: list[Finding], spec_dir: str) -> str:
    parts = [f"#### {finding.code} {finding.rule['name']} ({finding.severity})", "", message(finding, spec_dir), ""]
    if finding.rule.get("fix"):
        parts += [f"**Fix:** {finding.rule['fix']}", ""]
    if finding.evidence.replay:
        parts += [f"Replay: {code(replay(result, finding.evidence.replay), verbatim=True)}", ""]
    parts.append(_evidence_block(finding, others, spec_dir))
    return "\n".join(parts)


GATE_ICON = {True: "✅ passed", False: "❌ failed"}


def to_markdown(items: Items, limit: int = LIMIT) -> str:
    """One result, a Failed spec, or a list of them (each its own section, sharing GitHub's limit)."""
    if not isinstance(items, list):
        items = [items]
    share = limit // max(1, len(items))
    overall = gate.overall(items)
    head = [f"## {overall.line()}", ""] if overall is not None else []
    return "\n".join(head + [_failed(item) if isinstance(item, Failed) else _one(item, share) for item in items])


def _failed(failed: Failed) -> str:
    place = failed.place()
    return "\n".join([f"## clirace: {code(place.path)}: {failed.kind} · gate ❌ failed", "",
                      f"Line {place.line}, column {place.column}: {code(failed.message(), limit=CELL * 2)}", ""])


def _gate_word(result: Result) -> str:
    verdict = gate.of(result)
    return GATE_ICON[verdict.passed] + ("" if verdict.enforced or verdict.passed else " (not enforced: --exit-zero)")


def _one(result: Result, limit: int) -> str:
    section = load_section("s15")
    spec_dir = spec_dir_of(result)
    top = max(level["score"] for level in section["levels"])
    verdict = gate.of(result)
    head = [f"## clirace: §{section['section']} {section['title']}: **{result.score.score}/{top}** · "
            f"gate {_gate_word(result)}", "", f"Gate: {plain_or_code(verdict.why)}.", ""]
    blockers = result.score.blockers()
    if blockers:
        head += [f"**Level {result.score.score + 1} needs:**", ""]
        head += [f"- `{b.criterion}` {b.status}: {plain_or_code(clip(clean(b.change, spec_dir), CELL))}"
                 for b in blockers]
        head += [""]
    elif result.score.score < top:
        head += [f"**{result.score.headline()}**", ""]
    head += [f"> {result.score.level_text()}", ""]
    if result.score.corruption:
        head += ["**Silent corruption was found, which holds the score at 0.**", ""]
    missing = result.missing_evidence()
    if missing:
        head += ["**Not decided, so not counted for the tool (each says why, and what would decide it):**", ""]
        head += [f"- `{m['criterion']}` {m['status']}: {code(m['why'], spec_dir, limit=CELL)}"
                 + (f"; to decide it: {code(m['to_decide'], spec_dir, limit=CELL)}" if m["to_decide"] else "")
                 for m in missing]
        head += [""]
    if result.comparison is not None:
        head += comparison_block(result.comparison) + [""]
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
    tail += ["", f"Seed {result.seed}; {result.seconds:.1f}s; replay all: {code(replay(result, result.replay()), verbatim=True)}"]
    tail += [f"- note: {code(note, spec_dir)}" for note in result.notes]

    blocks = [_finding(result, f, others, spec_dir) for f, others in grouped(result.findings())]
    text = _assemble(head, blocks, tail, 0)
    shown = len(blocks)
    while len(text) > limit and shown > 0:  # drop whole findings from the end, never cut inside one
        shown -= 1
        text = _assemble(head, blocks[:shown], tail, len(blocks) - shown)
    return text if len(text) <= limit else text[:limit - 100].rsplit("\n", 1)[0] + "\n\n_(report cut to fit)_\n"


def comparison_block(comparison: Comparison) -> list[str]:
    from clirace.report.compare import lines
    out = [f"### Compared with the baseline {code(comparison.old.source)}", ""]
    for status, subject, detail in lines(comparison):
        out.append(f"- **{status}** {plain_or_code(subject) + ' ' if subject else ''}{plain_or_code(detail)}")
    return out


_PLAIN = re.compile(r"[A-Za-z0-9 .,:;()'\"=+%/>-]*")


def plain_or_code(text: object) -> str:
    """clirace's own words and numbers as they are; anything that could be Markdown (or came from the target
    and is not plain) in a code span."""
    text = clean(text)
    if _PLAIN.fullmatch(text) and "www." not in text and "://" not in text:
        return text
    return code(text)


def _assemble(head: list[str], blocks: list[str], tail: list[str], dropped: int) -> str:
    lines = list(head)
    if blocks or dropped:
        lines += ["", "### Findings", ""]
        for block in blocks:
            lines += [block, ""]
        if dropped:
            lines += [f"_{dropped} more findings not shown, to keep this under GitHub's {LIMIT:,}-character "
                      "limit; all are in `--format json`._", ""]
    return "\n".join(lines + tail) + "\n"
