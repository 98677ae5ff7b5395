"""The JSON result: a stable, documented shape (README, "JSON output"; `clirace schema --result` prints its
JSON Schema, result_schema.json, which a test holds real results to)."""
from __future__ import annotations

import json
from dataclasses import asdict

from .. import __version__
from ..rubric import UNKNOWN, load_section
from ._safe import status_value

PUBLIC_STATUS = {"pass": "pass", "fail": "fail", "not_tested": "not_tested", "unknown": "not_tested"}


def as_dict(result) -> dict:
    section = load_section("s15")
    return {
        "clirace_version": __version__,
        "rubric": f"§{section['section']} {section['title']}",
        "score": result.score.score,
        "max_score": max(level["score"] for level in section["levels"]),
        "decided_by": result.score.line,
        "blocked_by": [c.id for c in result.score.blocked_by],
        "corruption": result.score.corruption,
        "missing_evidence": result.missing_evidence(),
        "seed": result.seed,
        "replay": result.replay(),
        "spec": result.spec_path,
        "seconds": round(result.seconds, 2),
        "interrupted": result.interrupted,
        "criteria": [{"id": c.id, "level": c.level, "status": PUBLIC_STATUS[status_value(c.status)],
                      "indeterminate": c.status == UNKNOWN, "evidence": c.evidence, "to_test": c.to_test}
                     for c in result.criteria],
        "findings": [f.to_dict() for f in result.findings()],
        "observed": result.observed(),
        "checks": {k: v.to_dict() for k, v in result.verdicts.items()},
        "environment": asdict(result.history.environment),
        "options": asdict(result.history.options),
        "notes": result.notes,
    }


def to_json(result) -> str:
    return json.dumps(as_dict(result), indent=2)
