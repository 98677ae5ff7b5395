"""Stage 7, score: the rubric (rubric/*.yaml, data) applied to the checks' verdicts.

A criterion's status comes from the checks it names, ignoring checks that do not apply to the spec: any
fail fails it, any unknown leaves it unknown, any not-tested part leaves it not tested, and it passes only
when every applicable check passed. A level is reached when its criteria and all lower levels' pass; any
corruption finding holds the score at 0. Another rubric section is another YAML file beside s15.yaml.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path

import yaml

PASS, FAIL, NOT_TESTED, UNKNOWN, NOT_APPLICABLE = "pass", "fail", "not_tested", "unknown", "not_applicable"


def rubric_dir() -> Path:
    shipped = resources.files("clirace").joinpath("_rubric")
    if shipped.is_dir():
        return Path(str(shipped))
    return Path(__file__).resolve().parents[2] / "rubric"  # a source checkout or editable install


@lru_cache(maxsize=None)
def load_section(name: str = "s15") -> dict:
    return yaml.safe_load((rubric_dir() / f"{name}.yaml").read_text())


@lru_cache(maxsize=1)
def rules() -> dict:
    return yaml.safe_load((rubric_dir() / "rules.yaml").read_text())


def rule(code: str) -> dict:
    return rules()[code]


def lock_held_schema() -> dict:
    import json
    return json.loads((rubric_dir() / "lock_held.schema.json").read_text())


@dataclass
class Criterion:
    id: str
    level: int
    text: str
    status: str
    evidence: str
    checks: list[str]
    to_test: str = ""
    findings: list = field(default_factory=list)

    @property
    def indeterminate(self) -> bool:
        return self.status == UNKNOWN


@dataclass
class Score:
    score: int
    line: str  # the rubric line of the level reached
    blocked_by: list[Criterion]  # criteria of the next level that did not pass
    corruption: bool


def combine(statuses: list[str]) -> str:
    relevant = [s for s in statuses if s != NOT_APPLICABLE]
    if not relevant:
        return NOT_TESTED
    for status in (FAIL, UNKNOWN, NOT_TESTED):
        if status in relevant:
            return status
    return PASS


def criteria(section: dict, verdicts: dict) -> list[Criterion]:
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
            specific = [v.hint for v in shown if v.status in (NOT_TESTED, UNKNOWN) and v.hint]
            if status in (NOT_TESTED, UNKNOWN):
                hint = " ".join(specific) or hint
            out.append(Criterion(c["id"], level["score"], c["text"], status, evidence, list(c["checks"]),
                                 hint if status != PASS else "",
                                 [f for v in mine for f in v.findings]))
    return out


def score(section: dict, crits: list[Criterion]) -> Score:
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
        line = NOT_SHOWN
    return Score(reached, line, blocked, corruption)


NOT_SHOWN = ("Level 1 was not shown, and nothing failed: the score is 0 for want of evidence (see the criteria "
             "not tested or undecided), not because corruption was seen.")
