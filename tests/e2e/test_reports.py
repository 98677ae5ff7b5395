"""The issue's done-when, on the level-3 fixture: one run writes four reports, each valid for its consumer.

The run judges the history of test_levels' level-3 check (shared_check: that live check is made once for both);
judging launches nothing and writes its reports through the same renderers and the same `--report` handling as
`clirace check` (test_cli's level-1 check writes its own reports live)."""
import json
import xml.etree.ElementTree as ET

import jsonschema
import pytest

from clirace.verdict.rubric import load_section

from ..conftest import FIXTURES, ROOT, run_clirace
from .conftest import shared_group
from .test_levels import OPTIONS as LEVEL_OPTIONS

SARIF_SCHEMA = ROOT / "tests" / "data" / "sarif-schema-2.1.0.json"  # vendored: tests/data/README.md
IDS = [c["id"] for level in load_section("s15")["levels"] for c in level.get("criteria", [])]


@pytest.mark.e2e
@pytest.mark.timeout(240)
@shared_group("level3")
def test_one_run_writes_markdown_json_junit_and_sarif(tmp_path, shared_check):
    history = shared_check(FIXTURES / "level3" / "clirace.yaml", *LEVEL_OPTIONS, timeout=170).history
    paths = {fmt: tmp_path / f"r.{ext}" for fmt, ext in
             (("markdown", "md"), ("json", "json"), ("junit", "xml"), ("sarif", "sarif"))}
    args = [a for fmt, path in paths.items() for a in ("--report", f"{fmt}={path}")]
    proc = run_clirace("judge", history, *args, "--format", "github")
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
