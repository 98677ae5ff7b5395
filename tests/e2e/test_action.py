"""action.yml's check step, run as GitHub would run it for tests/data/workflows/clirace.yml: its inputs in the
environment, clirace on PATH, a step summary that earlier steps wrote to. The summary is appended to, the SARIF
file and the history are written, the exit code is set as the step's output."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from ..conftest import ROOT

ACTION = yaml.safe_load((ROOT / "action.yml").read_text())
WORKFLOW = yaml.safe_load((ROOT / "tests" / "data" / "workflows" / "clirace.yml").read_text())


@pytest.mark.timeout(180)
def test_the_check_step_of_the_action_as_the_workflow_runs_it(tmp_path):
    step = next(s for s in ACTION["runs"]["steps"] if s.get("id") == "check")
    given = next(s for job in WORKFLOW["jobs"].values() for s in job["steps"] if s.get("uses") == "./")["with"]
    inputs = {name: str(given.get(name, spec.get("default", ""))) for name, spec in ACTION["inputs"].items()}
    env = {key: value.replace("${{ inputs.", "").replace(" }}", "") for key, value in step["env"].items()}
    env = {key: inputs[name] for key, name in env.items()}
    summary, output = tmp_path / "summary.md", tmp_path / "output"
    summary.write_text("# an earlier step's summary\n")
    output.write_text("")
    workspace = tmp_path / "workspace"  # a checkout: the specs where the workflow names them
    (workspace / "fixtures").mkdir(parents=True)
    (workspace / "fixtures" / "loop").symlink_to(ROOT / "fixtures" / "loop")
    proc = subprocess.run(["bash", "-e", "-c", step["run"]], cwd=workspace, capture_output=True, text=True,
                          timeout=150, env={**os.environ, **env, "GITHUB_STEP_SUMMARY": str(summary),
                                            "GITHUB_OUTPUT": str(output),
                                            "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"})
    assert proc.returncode == 0, proc.stderr
    assert output.read_text() == "exit-code=0\n"
    lines = proc.stdout.splitlines()
    assert any(line.startswith("::notice ") and "title=clirace gate" in line for line in lines), lines
    text = summary.read_text()
    assert text.startswith("# an earlier step's summary\n\n## clirace: ") and "gate ✅ passed" in text
    sarif = json.loads((workspace / inputs["sarif-file"]).read_text())
    assert sarif["runs"][0]["properties"]["score"] == 1
    assert json.loads((workspace / "clirace-history.json").read_text())["options"]["rounds"] == 2
