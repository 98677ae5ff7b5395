"""CI formats rendered from one literal Result: GitHub annotations, JUnit XML, SARIF; and where they point."""
import json
import xml.etree.ElementTree as ET

import jsonschema

from clirace.checks.registry import EXPERIMENTS
from clirace.cli.pipeline import judge
from clirace.history import History, SpecPlace
from clirace.report import to_github, to_junit, to_markdown, to_sarif
from clirace.report._locate import Locator, display_path
from clirace.report.github import escape_data, escape_property
from clirace.spec import load_spec
from clirace.verdict.rubric import rules

from ..conftest import FIXTURES, ROOT
from .histories import saveable
from .hostile import hostile_history

LEVEL3 = FIXTURES / "level3" / "clirace.yaml"
SARIF_SCHEMA = ROOT / "tests" / "data" / "sarif-schema-2.1.0.json"  # vendored: tests/data/README.md


def line_of(path, prefix: str) -> int:
    return next(n for n, line in enumerate(path.read_text().splitlines(), 1) if line.startswith(prefix))


def recorded(spec=LEVEL3):
    """The positions a check of `spec` records in its history."""
    return load_spec(spec, check_programs=False).places


def result(spec=LEVEL3):
    h = hostile_history()
    h.spec_path = str(spec)
    h.spec_places = recorded(spec)
    return judge(h)


def test_each_check_points_at_the_spec_line_that_declared_what_it_exercised():
    locator = Locator(str(LEVEL3), recorded())
    assert locator.place("lock-error-structured").line == line_of(LEVEL3, "  contender:")
    assert locator.place("lock-released-on-exit").line == line_of(LEVEL3, "  hold:")
    assert locator.place("lock-wait-timeout").line == line_of(LEVEL3, "  wait_option:")
    assert locator.place("counter").line == line_of(LEVEL3, "  - kind: counter")
    assert locator.place("claim").line == line_of(LEVEL3, "  - kind: claim")
    assert locator.place("atomic-config-writes").line == line_of(LEVEL3, "    config:")
    assert locator.place("session-isolation").line == line_of(LEVEL3, "session:")
    assert locator.place("hazards").line == line_of(LEVEL3, "workloads:")
    assert Locator("/nonexistent/spec.yaml", {}).place("counter").line == 1  # a history with none recorded


def test_every_registered_check_points_at_a_line_of_a_spec_that_exercises_it():
    """Walks the registry, not a hand list: a check added without a place in spec/places.SECTIONS fails here."""
    locator = Locator(str(LEVEL3), recorded())
    lines = LEVEL3.read_text().splitlines()
    for check in EXPERIMENTS:
        place = locator.place(check)
        assert place.line > 1, check
        assert not lines[place.line - 1].lstrip().startswith("#"), (check, place)


def test_github_annotations_are_escaped_and_located():
    assert escape_property("a:b,c%d\r\n") == "a%3Ab%2Cc%25d%0D%0A"
    assert escape_data("a:b,c%\n") == "a:b,c%25%0A"
    lines = to_github(result()).splitlines()
    assert all(line.startswith(("::error ", "::warning ", "::notice ")) for line in lines)
    cr202 = next(line for line in lines if "title=CR202" in line)
    assert cr202.startswith(f"::error file={display_path(str(LEVEL3))},line={line_of(LEVEL3, '  contender:')},col=3,")
    assert "\x1b" not in cr202 and "\\x1b]52" in cr202


def test_junit_has_a_gate_testcase_then_one_per_criterion_and_skips_the_untested():
    res = result()
    suite = ET.fromstring(to_junit(res)).find("testsuite")
    cases = suite.findall("testcase")
    assert [c.get("name") for c in cases] == ["gate"] + [c.id for c in res.criteria]
    gate = cases[0].find("failure")  # the hostile history loses an increment: silent corruption fails the gate
    assert gate.get("type") == "gate" and "CR101" in gate.get("message") and int(suite.get("failures")) >= 1
    skipped = [c.get("name") for c in cases if c.find("skipped") is not None]
    assert skipped == [c.id for c in res.criteria if c.status not in ("pass", "fail")]
    failed = {c.get("name"): c.find("failure") for c in cases if c.find("failure") is not None}
    assert failed["lock-error-structured"].get("type") == "CR202"
    assert "CR202" in failed["lock-error-structured"].get("message")
    assert int(suite.get("tests")) == len(cases) and int(suite.get("skipped")) == len(skipped)


def test_sarif_is_valid_2_1_0_with_a_rule_per_code():
    data = json.loads(to_sarif(result()))
    jsonschema.Draft4Validator(json.loads(SARIF_SCHEMA.read_text())).validate(data)
    run = data["runs"][0]
    assert {r["id"] for r in run["tool"]["driver"]["rules"]} == {c for c, r in rules().items() if not r.get("retired")}
    assert all(r["help"]["text"] for r in run["tool"]["driver"]["rules"])
    cr202 = next(r for r in run["results"] if r["ruleId"] == "CR202")
    region = cr202["locations"][0]["physicalLocation"]["region"]
    assert region["startLine"] == line_of(LEVEL3, "  contender:")
    assert run["tool"]["driver"]["rules"][cr202["ruleIndex"]]["id"] == "CR202"


def test_recorded_positions_survive_the_history_file_and_one_without_them_annotates_line_1(tmp_path):
    """A history keeps where the spec declared each section; one written before they were recorded (no
    $.spec_places) still loads, and every report renders with its findings at the spec file's line 1."""
    h = saveable(hostile_history())
    h.spec_path, h.spec_places = str(LEVEL3), recorded()
    saved = tmp_path / "h.json"
    h.save(saved)
    assert History.load(saved).spec_places == recorded() and recorded()["lock.contender"].line > 1
    data = json.loads(saved.read_text())
    del data["spec_places"]
    saved.write_text(json.dumps(data))
    old = judge(History.load(saved))
    assert old.history.spec_places == {}
    cr202 = next(line for line in to_github(old).splitlines() if "title=CR202" in line)
    assert cr202.startswith(f"::error file={display_path(str(LEVEL3))},line=1,col=1,")
    sarif = json.loads(to_sarif(old))["runs"][0]["results"]
    assert {r["locations"][0]["physicalLocation"]["region"]["startLine"] for r in sarif} == {1}
    assert "CR202" in to_markdown(old)
    edited = History.load(saved)
    edited.spec_places = {"lock.contender": SpecPlace(0, -3)}  # by hand: no line 0 reaches a report
    data = json.loads(to_sarif(judge(edited)))
    jsonschema.Draft4Validator(json.loads(SARIF_SCHEMA.read_text())).validate(data)
    assert {r["locations"][0]["physicalLocation"]["region"]["startLine"] for r in data["runs"][0]["results"]} == {1}
