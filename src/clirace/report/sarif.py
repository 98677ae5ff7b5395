"""SARIF 2.1.0, for code scanning: a rule per finding code (with its explanation as help), a result per
finding, located at the spec line that declared what was exercised."""
from __future__ import annotations

import json

from .. import __version__
from ..explain import as_markdown, explanation
from ..rubric import rules
from ._locate import located_findings
from ._safe import clean, replay, spec_dir_of

SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
LEVEL = {"corruption": "error", "error": "error", "advisory": "note", "info": "note"}


def _rule(code: str, rule: dict) -> dict:
    ex = explanation(code) or {}
    return {
        "id": code,
        "name": rule["name"],
        "shortDescription": {"text": rule["name"].replace("-", " ")},
        "fullDescription": {"text": " ".join((ex.get("means") or rule["message"]).split())},
        "help": {"text": " ".join((ex.get("fix") or rule.get("fix") or rule["name"]).split()),
                 "markdown": as_markdown(code)},
        "defaultConfiguration": {"level": LEVEL.get(rule["severity"], "warning")},
        "properties": {"severity": rule["severity"], "tags": ["concurrency", "race-condition"]},
    }


def as_dict(result) -> dict:
    spec_dir = spec_dir_of(result)
    catalogue = {code: rule for code, rule in rules().items() if not rule.get("retired")}
    index = {code: i for i, code in enumerate(catalogue)}
    results = []
    for finding, check, place in located_findings(result):
        message = clean(finding.message(), spec_dir)
        if finding.evidence.replay:
            message += f" Replay: {replay(result, finding.evidence.replay)}"
        entry = {"ruleId": finding.code, "level": LEVEL.get(finding.severity, "warning"), "message": {"text": message},
                 "locations": [{"physicalLocation": {"artifactLocation": {"uri": place.path or "clirace.yaml"},
                                                     "region": {"startLine": place.line,
                                                                "startColumn": place.column}}}],
                 "properties": {"check": check, "trial": clean(finding.evidence.trial, spec_dir)}}
        if finding.code in index:
            entry["ruleIndex"] = index[finding.code]
        results.append(entry)
    return {
        "$schema": SCHEMA,
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {"name": "clirace", "version": __version__, "semanticVersion": __version__,
                                "rules": [_rule(code, rule) for code, rule in catalogue.items()]}},
            "results": results,
            "invocations": [{"executionSuccessful": not result.interrupted,
                             "commandLine": replay(result, result.replay())}],
            "properties": {"score": result.score.score, "decidedBy": result.score.line, "seed": result.seed},
        }],
    }


def to_sarif(result) -> str:
    return json.dumps(as_dict(result), indent=2)
