"""Stage 7, score: the rubric (rubric/*.yaml, data) applied to the checks' verdicts.

A criterion's status comes from the checks it names, ignoring checks that do not apply to the spec: any
fail fails it, any unknown leaves it unknown, any not-tested part leaves it not tested, and it passes only
when every applicable check passed. A level is reached when its criteria and all lower levels' pass; any
corruption finding holds the score at 0. Another rubric section is another YAML file beside s15.yaml.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .catalogue import load_section, lock_held_schema, rubric_dir, rule, rules  # noqa: F401 - re-exported
from .findings import FAIL, NOT_APPLICABLE, NOT_TESTED, PASS, UNKNOWN, Finding, Status, Verdict


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
            hint = c.get("to_test", "")
            specific = list(dict.fromkeys(v.hint for v in shown if v.status in (NOT_TESTED, UNKNOWN) and v.hint))
            if status in (NOT_TESTED, UNKNOWN):
                hint = " ".join(specific) or hint
            # A failed criterion's hint would tell the user to add what the spec already has.
            out.append(Criterion(c["id"], level["score"], c["text"], status, evidence, list(c["checks"]),
                                 hint if status not in (PASS, FAIL) else "",
                                 [f for v in mine for f in v.findings]))
    return out


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
    if reached == 0 and not corruption and not any(c.status == FAIL for c in blocked):
        # Level 0's line says the tool corrupts; nothing here showed that, level 1 was just not shown either.
        failed = [c.id for c in crits if c.status == FAIL]
        line = NOT_SHOWN if not failed else (
            f"Level 1 was not shown ({', '.join(c.id for c in blocked)} not decided), and {', '.join(failed)} "
            "failed: the score is 0 for want of evidence at level 1, not because corruption was seen.")
    return Score(reached, line, blocked, corruption)


NOT_SHOWN = ("Level 1 was not shown, and nothing failed: the score is 0 for want of evidence (see the criteria "
             "not tested or undecided), not because corruption was seen.")
