"""Report destinations through the real CLI: several reports from one run, atomic writes, and bad paths
refused before anything runs. `judge` on a literal history launches no target; `check` stops before it."""
import json
import os
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from clirace._outputs import Outputs, check_all, parse_report
from clirace.errors import UsageError

from ..conftest import FIXTURES, run_clirace
from .hostile import hostile_history


@pytest.fixture
def saved(tmp_path):
    path = tmp_path / "h.json"
    hostile_history().save(path)
    return path


def test_judge_writes_several_reports_in_one_run(saved, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    proc = run_clirace("judge", saved, "--format", "json", "-o", out / "r.json", "--report", f"markdown={out}/r.md",
                       "--report", f"junit={out}/r.xml", "--report", f"sarif={out}/r.sarif",
                       "--report", f"github={out}/r.txt", "--report", f"text={out}/r.text")
    assert proc.returncode in (0, 1), proc.stderr
    assert proc.stdout == ""
    assert sorted(p.name for p in out.iterdir()) == ["r.json", "r.md", "r.sarif", "r.text", "r.txt", "r.xml"]
    assert json.loads((out / "r.json").read_text())["score"] == json.loads((out / "r.sarif").read_text())[
        "runs"][0]["properties"]["score"]
    assert ET.parse(out / "r.xml").getroot().tag == "testsuites"


@pytest.mark.parametrize("option", ["-o", "--report", "--history"])
@pytest.mark.parametrize("bad", ["/proc/version", "DIR", "/nonexistent/x"])
def test_an_unwritable_destination_is_refused(tmp_path, option, bad):
    bad = Path(str(tmp_path) if bad == "DIR" else bad)
    outputs = {"-o": Outputs(output=bad), "--report": Outputs(reports=(("json", bad),)),
               "--history": Outputs(history=bad)}[option]
    with pytest.raises(UsageError, match=re.escape(f"{option} {bad}")):
        check_all(outputs)


@pytest.mark.parametrize("command,args", [("check", ["-o", "/proc/version"]),
                                          ("judge", ["--report", "json=/nonexistent/x"])])
def test_the_cli_refuses_it_before_the_run(saved, command, args):
    target = saved if command == "judge" else FIXTURES / "level3" / "clirace.yaml"
    proc = run_clirace(command, target, *args, timeout=30)
    assert proc.returncode == 2, proc.stderr
    assert args[1].split("=")[-1] in proc.stderr and "Traceback" not in proc.stderr
    assert "clirace: counter" not in proc.stderr  # nothing ran


def test_a_bad_report_option_says_what_is_expected(saved):
    with pytest.raises(UsageError, match="FORMAT=PATH"):
        parse_report("markdown")
    proc = run_clirace("judge", saved, "--report", "pdf=x.pdf")
    assert proc.returncode == 2 and "pdf" in proc.stderr and "sarif" in proc.stderr


def test_a_report_replaces_the_old_file_whole_and_leaves_no_temp_file(saved, tmp_path):
    target = tmp_path / "r.md"
    target.write_text("old")
    os.chmod(target, 0o640)
    assert run_clirace("judge", saved, "--report", f"markdown={target}").returncode in (0, 1)
    assert target.read_text().startswith("## clirace") and (target.stat().st_mode & 0o777) == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == ["h.json", "r.md"]
