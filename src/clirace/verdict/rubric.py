"""Stage 7, score: the rubric (rubric/*.yaml, data) applied to the checks' verdicts.

A criterion's status comes from the checks it names, ignoring checks that do not apply to the spec: any
fail fails it, any unknown leaves it unknown, any not-tested part leaves it not tested, and it passes only
when every applicable check passed. A level is reached when its criteria and all lower levels' pass; any
corruption finding holds the score at 0. Another rubric section is another YAML file beside s15.yaml.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# re-exported: the rubric's sections and rules, as reports and commands read them
from clirace.checks.catalogue import load_section as load_section
from clirace.checks.catalogue import rubric_dir as rubric_dir
from clirace.checks.catalogue import rules as rules
from clirace.checks.findings import FAIL, NOT_APPLICABLE, NOT_TESTED, PASS, UNKNOWN, Finding, Status, Verdict


@dataclass
class Criterion:
    id: str
    level: int
    text: str
    status: Status
    evidence: str
    checks: list[str]
    to_test: str = ""
    findings: list[Finding] = field(default_factory=list)

    @property
    def indeterminate(self) -> bool:
        return self.status == UNKNOWN


@dataclass
class Score:
    score: int
    line: str  # the rubric line of the level reached
    blocked_by: list[Criterion]  # criteria of the next level that did not pass
    corruption: bool
    top: int = 3  # the rubric's highest level
    passed_above: list[str] = field(default_factory=list)  # criteria of the next level that did pass
    corrupting: list[Criterion] = field(default_factory=list)  # criteria holding a corruption finding

    def headline(self) -> str:
        """What stops the next level, criterion by criterion, with its status and the one change that would
        move it: `score 1/3: level 2 needs lock-released-on-exit (not tested: add lock.error_command, ...)`."""
        head = f"score {self.score}/{self.top}"
        if self.score == self.top:
            return f"{head}: every criterion passed"
        needs = "; ".join(f"{b.criterion} ({b.status}: {_lower_first(b.change).rstrip('.')})" for b in self.blockers())
        if needs:
            return f"{head}: level {self.score + 1} needs {needs}"
        codes = sorted({f.code for c in self.corrupting for f in c.findings if f.severity == "corruption"})
        return f"{head}: silent corruption ({', '.join(codes)}) holds the score at 0"

    def blockers(self) -> list[Blocker]:
        return [Blocker(c.id, STATUS_WORDS.get(str(c.status), str(c.status)), _change(c)) for c in self.blocked_by]

    def level_text(self) -> str:
        """The rubric's line for the level reached, said as the rubric's description of that level, with the
        next level's criteria that passed named, so that it never reads as if they had failed."""
        if self.line.startswith("Level 1 was not shown"):
            return self.line
        said = f"Level {self.score} in the rubric: {self.line}"
        if self.passed_above:
            said += f" (already met at level {self.score + 1}: {', '.join(self.passed_above)})"
        return said


@dataclass(frozen=True)
class Blocker:
    criterion: str
    status: str  # "failed", "not tested" or "undecided"
    change: str  # the one spec change or fix that would move it


STATUS_WORDS = {"fail": "failed", "not_tested": "not tested", "unknown": "undecided"}
# The hint of a criterion that was exercised and could not decide: the spec has what it needs, so the rubric's
# "add X to the spec" would be wrong; the evidence says what went wrong.
UNDECIDED_HINT = ("Nothing is missing from the spec: the experiment ran but could not decide (see why); fix what "
                  "stopped it, then run again.")


def _change(c: Criterion) -> str:
    if c.status == FAIL:
        first = next((f for f in c.findings if not f.advisory), None)
        if first is not None:
            fix = first.rule.get("fix") or first.message()
            return f"{first.code} {first.rule['name']}; fix: {_lower_first(fix)}"
        return c.evidence
    return c.to_test or c.evidence


def _lower_first(text: str) -> str:
    return text[:1].lower() + text[1:] if text[:2] != text[:2].upper() else text


def combine(statuses: list[Status]) -> Status:
    relevant = [s for s in statuses if s != NOT_APPLICABLE]
    if not relevant:
        return NOT_TESTED
    for status in (FAIL, UNKNOWN, NOT_TESTED):
        if status in relevant:
            return status
    return PASS


def criteria(section: dict[str, Any], verdicts: dict[str, Verdict]) -> list[Criterion]:
    out = []
    for level in section["levels"]:
        for c in level.get("criteria", []):
            mine = [verdicts[name] for name in c["checks"] if name in verdicts]
            status = combine([v.status for v in mine])
            shown = [v for v in mine if v.status != NOT_APPLICABLE]
            if not shown:
                evidence = "not exercised by this spec"
            else:
                evidence = "; ".join(f"{v.check}: {v.summary}" for v in shown)
            out.append(Criterion(c["id"], level["score"], c["text"], status, evidence, list(c["checks"]),
                                 _hint(c, status, shown), [f for v in mine for f in v.findings]))
    return out


def _hint(c: dict[str, Any], status: Status, shown: list[Verdict]) -> str:
    """What would decide a criterion not tested or undecided. The rubric's own `to_test` asks to add keys to the
    spec, so it is said only when nothing in the spec exercised the criterion; a check that ran says why it
    could not decide, and what to change (its hint). A failed or passed criterion gets no hint."""
    if status not in (NOT_TESTED, UNKNOWN):
        return ""
    specific = list(dict.fromkeys(v.hint for v in shown if v.status in (NOT_TESTED, UNKNOWN) and v.hint))
    if specific:
        return " ".join(specific)
    if not shown:
        return str(c.get("to_test", ""))
    return UNDECIDED_HINT if status == UNKNOWN else ""


def score(section: dict[str, Any], crits: list[Criterion]) -> Score:
    corruption = any(f.severity == "corruption" for c in crits for f in c.findings)
    reached = 0
    blocked: list[Criterion] = []
    for level in section["levels"][1:]:
        mine = [c for c in crits if c.level == level["score"]]
        failing = [c for c in mine if c.status != PASS]
        if failing or corruption:
            blocked = failing
            break
        reached = level["score"]
    line = next(lvl["text"] for lvl in section["levels"] if lvl["score"] == reached)
    top = max(lvl["score"] for lvl in section["levels"])
    passed_above = [c.id for c in crits if c.level == reached + 1 and c.status == PASS]
    corrupting = [c for c in crits if any(f.severity == "corruption" for f in c.findings)]
    if reached == 0 and not corruption and not any(c.status == FAIL for c in blocked):
        # Level 0's line says the tool corrupts; nothing here showed that, level 1 was just not shown either.
        failed = [c.id for c in crits if c.status == FAIL]
        line = NOT_SHOWN if not failed else (
            f"Level 1 was not shown ({', '.join(c.id for c in blocked)} not decided), and {', '.join(failed)} "
            "failed: the score is 0 for want of evidence at level 1, not because corruption was seen.")
    return Score(reached, line, blocked, corruption, top, passed_above, corrupting)


NOT_SHOWN = ("Level 1 was not shown, and nothing failed: the score is 0 for want of evidence (see the criteria "
             "not tested or undecided), not because corruption was seen.")
