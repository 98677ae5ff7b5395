"""SARIF 2.1.0, for code scanning: a rule per finding code (with its explanation as help), a result per
finding, located at the spec line that declared what was exercised."""
from __future__ import annotations

import json
from typing import Any

from clirace.history.version import __version__
from clirace.report._failed import Failed, Items
from clirace.report._locate import located_findings
from clirace.report._safe import clean, replay, spec_dir_of
from clirace.report.explain import as_markdown, explanation
from clirace.verdict import gate
from clirace.verdict.result import Result
from clirace.verdict.rubric import rules

SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
LEVEL = {"corruption": "error", "error": "error", "advisory": "note", "info": "note"}


def _rule(code: str, rule: dict[str, Any]) -> dict[str, Any]:
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


def _catalogue() -> dict[str, dict[str, Any]]:
    return {code: rule for code, rule in rules().items() if not rule.get("retired")}


def _driver() -> dict[str, Any]:
    return {"name": "clirace", "version": __version__, "semanticVersion": __version__,
            "rules": [_rule(code, rule) for code, rule in _catalogue().items()]}


def _failed_run(failed: Failed) -> dict[str, Any]:
    """A spec that could not be checked: the error as a result of its own rule (so that a code-scanning upload
    shows an open alert, never "every clirace alert is fixed"), a tool execution notification saying the same
    (SARIF's place for a tool's configuration error), and the invocation marked unsuccessful."""
    place = failed.place()
    rule_id = f"clirace-{failed.kind.replace(' ', '-')}"
    location = {"physicalLocation": {"artifactLocation": {"uri": place.path or "clirace.yaml"},
                                     "region": {"startLine": place.line, "startColumn": place.column}}}
    message = {"text": clean(failed.message())}
    notification = {"level": "error", "message": message, "descriptor": {"id": failed.kind.replace(" ", "-")},
                    "locations": [location]}
    driver = _driver()
    driver["rules"].append({"id": rule_id, "name": rule_id.removeprefix("clirace-"),
                            "shortDescription": {"text": f"the {failed.kind} stopped the check"},
                            "defaultConfiguration": {"level": "error"}})
    result = {"ruleId": rule_id, "ruleIndex": len(driver["rules"]) - 1, "level": "error", "message": message,
              "locations": [location]}
    return {"tool": {"driver": driver}, "results": [result],
            "invocations": [{"executionSuccessful": False, "exitCode": failed.exit_code,
                             "toolConfigurationNotifications": [notification]}],
            "properties": {"error": clean(failed.message()), "gate": "failed"}}


def _run(result: Result) -> dict[str, Any]:
    spec_dir = spec_dir_of(result)
    index = {code: i for i, code in enumerate(_catalogue())}
    results: list[dict[str, Any]] = []
    for finding, check, place in located_findings(result):
        message = clean(finding.message(), spec_dir)
        if finding.evidence.replay:
            message += f" Replay: {replay(result, finding.evidence.replay)}"
        entry: dict[str, Any] = {"ruleId": finding.code, "level": LEVEL.get(finding.severity, "warning"), "message": {"text": message},
                 "locations": [{"physicalLocation": {"artifactLocation": {"uri": place.path or "clirace.yaml"},
                                                     "region": {"startLine": place.line,
                                                                "startColumn": place.column}}}],
                 "properties": {"check": check, "trial": clean(finding.evidence.trial, spec_dir)}}
        if finding.code in index:
            entry["ruleIndex"] = index[finding.code]
        results.append(entry)
    verdict = gate.of(result)
    return {
        "tool": {"driver": _driver()},
        "results": results,
        "invocations": [{"executionSuccessful": not result.interrupted,
                         "commandLine": replay(result, result.replay())}],
        "properties": {"score": result.score.score, "headline": clean(result.score.headline(), spec_dir),
                       "decidedBy": result.score.line, "seed": result.seed, "gate": verdict.to_dict()},
    }


def as_dict(items: Items) -> dict[str, Any]:
    """One result, a Failed spec, or a list of them: a run each."""
    if not isinstance(items, list):
        items = [items]
    return {"$schema": SCHEMA, "version": "2.1.0",
            "runs": [_failed_run(item) if isinstance(item, Failed) else _run(item) for item in items]}


def to_sarif(items: Items) -> str:
    return json.dumps(as_dict(items), indent=2)
