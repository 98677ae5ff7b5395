"""The JSON result: a stable, documented shape (README, "JSON output"; `clirace schema --result` prints its
JSON Schema, result_schema.json, which a test holds real results to). One spec gives one object; several give
a list of them; a spec that could not be checked gives an object with `error` instead of a score."""
from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

from clirace.checks.findings import UNKNOWN
from clirace.history.version import __version__
from clirace.report._failed import Failed, Item, Items
from clirace.report._locate import display_path
from clirace.report._safe import replay, status_value
from clirace.verdict import gate
from clirace.verdict.result import Result
from clirace.verdict.rubric import load_section

PUBLIC_STATUS = {"pass": "pass", "fail": "fail", "not_tested": "not_tested", "unknown": "not_tested"}


def as_dict(result: Item) -> dict[str, Any]:
    if isinstance(result, Failed):
        return failed_dict(result)
    section = load_section("s15")
    return {
        "clirace_version": __version__,
        "rubric": f"§{section['section']} {section['title']}",
        "score": result.score.score,
        "max_score": max(level["score"] for level in section["levels"]),
        "headline": result.score.headline(),
        "decided_by": result.score.line,
        "blocked_by": [c.id for c in result.score.blocked_by],
        "corruption": result.score.corruption,
        "gate": gate.of(result).to_dict(),
        "missing_evidence": result.missing_evidence(),
        "seed": result.seed,
        "replay": replay(result, result.replay()),
        "spec": display_path(result.spec_path),
        "seconds": round(result.seconds, 2),
        "interrupted": result.interrupted,
        "criteria": [{"id": c.id, "level": c.level, "status": PUBLIC_STATUS[status_value(c.status)],
                      "indeterminate": c.status == UNKNOWN, "evidence": c.evidence, "to_test": c.to_test}
                     for c in result.criteria],
        "findings": [_finding(result, f.to_dict()) for f in result.findings()],
        "observed": result.observed(),
        "checks": {k: {**v.to_dict(), "findings": [_finding(result, f.to_dict()) for f in v.findings]}
                   for k, v in result.verdicts.items()},
        "environment": asdict(result.history.environment),
        "options": asdict(result.history.options),
        "notes": result.notes,
        **({"baseline": result.comparison.to_dict()} if result.comparison is not None else {}),
    }


def _finding(result: Result, data: dict[str, Any]) -> dict[str, Any]:
    """A finding's dict with its replay command naming the spec as the user would type it."""
    data["evidence"]["replay"] = replay(result, data["evidence"]["replay"]) if data["evidence"]["replay"] else ""
    return data


def failed_dict(failed: Failed) -> dict[str, Any]:
    place = failed.place()
    return {
        "clirace_version": __version__,
        "spec": display_path(failed.spec_path),
        "error": {"kind": failed.kind, "message": failed.message(), "file": place.path, "line": place.line,
                  "column": place.column, "exit_code": failed.exit_code},
        "gate": {"threshold": 0, "passed": False, "enforced": True, "why": f"the {failed.kind} stopped the check"},
    }


def to_json(items: Items) -> str:
    """One result (or Failed) as an object; a list of several as a list."""
    if isinstance(items, list):
        data = as_dict(items[0]) if len(items) == 1 else [as_dict(item) for item in items]
    else:
        data = as_dict(items)
    return json.dumps(data, indent=2)
