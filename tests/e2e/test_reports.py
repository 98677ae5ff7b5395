"""The issue's done-when, on the level-3 fixture: one run writes four reports, each valid for its consumer."""
import json
import xml.etree.ElementTree as ET

import jsonschema
import pytest

from clirace.verdict.rubric import load_section

from ..conftest import FIXTURES, ROOT, run_clirace

SARIF_SCHEMA = ROOT / "tests" / "data" / "sarif-schema-2.1.0.json"  # vendored: tests/data/README.md
IDS = [c["id"] for level in load_section("s15")["levels"] for c in level.get("criteria", [])]


@pytest.mark.e2e
@pytest.mark.timeout(240)
def test_one_run_writes_markdown_json_junit_and_sarif(tmp_path):
    paths = {fmt: tmp_path / f"r.{ext}" for fmt, ext in
             (("markdown", "md"), ("json", "json"), ("junit", "xml"), ("sarif", "sarif"))}
    args = [a for fmt, path in paths.items() for a in ("--report", f"{fmt}={path}")]
    proc = run_clirace("check", FIXTURES / "level3" / "clirace.yaml", "--rounds", "1", "--seed", "5", *args,
                       "--format", "github", timeout=220)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[-1].startswith("::notice title=clirace score::clirace score 3/3")
    result_schema = json.loads(run_clirace("schema", "--result").stdout)
    data = json.loads(paths["json"].read_text())
    jsonschema.Draft202012Validator(result_schema).validate(data)
    assert data["score"] == 3
    jsonschema.Draft4Validator(json.loads(SARIF_SCHEMA.read_text())).validate(json.loads(paths["sarif"].read_text()))
    cases = ET.parse(paths["junit"]).getroot().iter("testcase")
    assert [c.get("name") for c in cases] == ["gate", *IDS]
    assert paths["markdown"].read_text().startswith("## clirace: §15")
