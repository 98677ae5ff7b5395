"""JUnit XML, as CI systems display test results: one testcase per criterion.

A failed criterion is a <failure> whose message is its first finding and whose text holds every finding with
its evidence; a criterion not tested (or undecided) is <skipped> with the reason and what to add to the spec.
Target text is cleaned first: XML 1.0 cannot carry most control characters at all.
"""
from __future__ import annotations

import os
import xml.etree.ElementTree as ET

from clirace.checks.findings import Finding
from clirace.report._failed import Failed, Items
from clirace.report._locate import display_path
from clirace.report._safe import clean, replay, spec_dir_of, status_value
from clirace.verdict import gate
from clirace.verdict.result import Result


def _finding_text(result: Result, finding: Finding, spec_dir: str) -> str:
    ev = finding.evidence
    lines = [f"{finding.code} {finding.rule['name']} [{finding.severity}] {clean(finding.message(), spec_dir)}"]
    if ev.trial:
        lines.append(f"  trial: {clean(ev.trial, spec_dir)}")
    for inv in ev.invocations[:4]:
        lines.append(f"  {clean(inv['label'])}: {clean(inv['command'], spec_dir)} -> {clean(inv['outcome'])}; "
                     f"{clean(inv['printed'], spec_dir)}")
    if ev.expected or ev.found:
        lines.append(f"  expected: {clean(ev.expected, spec_dir)}; found: {clean(ev.found, spec_dir)}")
    if ev.observed:
        lines.append(f"  observed: {clean(ev.observed, spec_dir)}")
    if finding.rule.get("fix"):
        lines.append(f"  fix: {finding.rule['fix']}")
    if ev.replay:
        lines.append(f"  replay: {replay(result, ev.replay)}")
    return "\n".join(lines)


def to_junit(items: Items) -> str:
    """One result, a Failed spec, or a list of them: a testsuite each."""
    if not isinstance(items, list):
        items = [items]
    suites = ET.Element("testsuites", name="clirace")
    for item in items:
        suites.append(_failed(item) if isinstance(item, Failed) else _suite(item))
    for total in ("tests", "failures", "errors", "skipped"):
        suites.set(total, str(sum(int(suite.get(total, "0")) for suite in suites)))
    ET.indent(suites)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suites, encoding="unicode")


def _failed(failed: Failed) -> ET.Element:
    place = failed.place()
    name = os.path.basename(place.path) or "spec"
    suite = ET.Element("testsuite", name=f"clirace {clean(name)}", tests="1", failures="0", errors="1", skipped="0",
                       time="0.000")
    case = ET.SubElement(suite, "testcase", classname=f"clirace.{clean(name)}", name=failed.kind.replace(" ", "-"),
                         time="0")
    error = ET.SubElement(case, "error", message=clean(failed.message()), type=failed.kind)
    error.text = clean(f"{place.path}:{place.line}:{place.column}: {failed.message()}")
    return suite


def _suite(result: Result) -> ET.Element:
    spec_dir = spec_dir_of(result)
    spec = display_path(result.spec_path) or "spec"
    name = os.path.basename(spec)
    statuses = [status_value(c.status) for c in result.criteria]
    verdict = gate.of(result)
    suite = ET.Element("testsuite", name=f"clirace {clean(name)}", tests=str(len(result.criteria) + 1),
                       failures=str(statuses.count("fail") + verdict.fails), errors="0",
                       skipped=str(sum(s not in ("pass", "fail") for s in statuses) + (not verdict.passed and
                                                                                      not verdict.enforced)),
                       time=f"{result.seconds:.3f}")
    props = ET.SubElement(suite, "properties")
    for key, value in (("score", result.score.score), ("headline", clean(result.score.headline(), spec_dir)),
                       ("decided_by", result.score.line), ("gate", verdict.word()), ("seed", result.seed),
                       ("spec", clean(spec)), ("replay", replay(result, result.replay()))):
        ET.SubElement(props, "property", name=key, value=str(value))
    case = ET.SubElement(suite, "testcase", classname=f"clirace.{clean(name)}", name="gate", time="0")
    if verdict.fails:
        failure = ET.SubElement(case, "failure", message=clean(verdict.line()), type="gate")
        failure.text = "\n".join([clean(verdict.why), clean(result.score.headline(), spec_dir)])
    elif not verdict.passed:
        ET.SubElement(case, "skipped", message=clean(verdict.line()))
    else:
        ET.SubElement(case, "system-out").text = clean(verdict.why)
    for c, status in zip(result.criteria, statuses, strict=False):
        case = ET.SubElement(suite, "testcase", classname=f"clirace.{clean(name)}", name=c.id, time="0")
        if status == "fail":
            first = c.findings[0] if c.findings else None
            message = (f"{first.code}: {clean(first.message(), spec_dir)}" if first else clean(c.evidence, spec_dir))
            failure = ET.SubElement(case, "failure", message=message, type=first.code if first else "fail")
            failure.text = "\n\n".join([clean(c.evidence, spec_dir)] +
                                       [_finding_text(result, f, spec_dir) for f in c.findings])
        elif status != "pass":
            why = ("indeterminate: " if status == "unknown" else "not tested: ") + clean(c.evidence, spec_dir)
            if c.to_test:
                why += f"; to test: {clean(c.to_test, spec_dir)}"
            ET.SubElement(case, "skipped", message=why)
        else:
            ET.SubElement(case, "system-out").text = clean(c.evidence, spec_dir)
    return suite
