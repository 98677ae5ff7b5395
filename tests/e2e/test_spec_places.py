"""The report places annotations from the positions a check recorded in its history (History.spec_places), never
from the spec file: `clirace judge` of a saved history annotates the spec's lines as they were when it ran, after
the file was edited or deleted (issue 26, item 2)."""
import json
import shutil

import pytest

from ..conftest import FIXTURES, run_clirace

LEVEL0 = FIXTURES / "level0"


def line_of(text: str, prefix: str) -> int:
    return next(n for n, line in enumerate(text.splitlines(), 1) if line.startswith(prefix))


def annotation(github: str, code: str) -> str:
    return next(line for line in github.splitlines() if f"title={code} " in line)


def sarif_region(sarif: str, code: str) -> dict:
    run = json.loads(sarif)["runs"][0]
    return next(r for r in run["results"] if r["ruleId"] == code)["locations"][0]["physicalLocation"]["region"]


@pytest.mark.timeout(120)
def test_judge_annotates_the_lines_recorded_at_check_time_after_the_spec_was_edited_or_deleted(tmp_path):
    for name in ("clirace.yaml", "tool.py"):
        shutil.copy(LEVEL0 / name, tmp_path / name)
    spec = tmp_path / "clirace.yaml"
    original = spec.read_text()
    saved = tmp_path / "h.json"
    # The level-0 counter loses increments at every run (its rendezvous stops them all after their read).
    proc = run_clirace("check", spec.name, "--only", "counter", "--rounds", "1", "--seed", "3", "--history", saved.name,
                       "-f", "github", cwd=tmp_path, timeout=100)
    assert proc.returncode == 1, proc.stderr
    counter, contender = line_of(original, "  - kind: counter"), line_of(original, "  contender:")
    assert f"file=clirace.yaml,line={counter},col=5," in annotation(proc.stdout, "CR101")

    places = json.loads(saved.read_text())["spec_places"]  # every section a finding can point at, recorded
    assert places["workloads[0]"] == {"line": counter, "column": 5, "workload": "counter: counter#0"}
    assert places["lock.contender"] == {"line": contender, "column": 3, "workload": ""}
    assert (places["workloads[1].config"]["line"], places["tool.command"]["line"]) == (
        line_of(original, "    config:"), line_of(original, "  command:"))

    spec.write_text("# three lines\n# inserted at\n# the top\n" + original)
    for fmt in ("github", "sarif"):
        judged = run_clirace("judge", saved.name, "-f", fmt, cwd=tmp_path)
        assert judged.returncode == 1, judged.stderr
        if fmt == "github":
            assert f"file=clirace.yaml,line={counter},col=5," in annotation(judged.stdout, "CR101")
        else:
            assert sarif_region(judged.stdout, "CR101") == {"startLine": counter, "startColumn": 5}

    spec.unlink()
    judged = run_clirace("judge", saved.name, "-f", "github", cwd=tmp_path)
    assert judged.returncode == 1 and "Traceback" not in judged.stderr, judged.stderr
    assert f"file=clirace.yaml,line={counter},col=5," in annotation(judged.stdout, "CR101")
