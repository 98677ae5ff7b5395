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

from clirace.checks._common import detection_bound

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


SHARDS = yaml.safe_load((ROOT / "tests" / "data" / "workflows" / "clirace-shards.yml").read_text())


def _result(path: Path) -> dict:
    data = json.loads(path.read_text())
    rates = {name: verdict["rates"] for name, verdict in data["checks"].items() if verdict.get("rates")}
    return {"score": data["score"], "corruption": data["corruption"], "rates": rates,
            "criteria": [(c["id"], c["status"]) for c in data["criteria"]],
            "findings": sorted(f["code"] for f in data["findings"])}


@pytest.mark.timeout(900)
def test_a_check_sharded_over_the_matrix_and_joined_is_the_check_run_whole(tmp_path):
    """The matrix example, run as GitHub would: each shard's step at once (as a matrix does), then the join
    job's step. Two shards of a 40-round check, joined, give the same findings, criteria and bound as one
    40-round run of the same seed (run beside the shards)."""
    step = next(s for s in ACTION["runs"]["steps"] if s.get("id") == "check")
    given = next(s for s in SHARDS["jobs"]["shard"]["steps"] if s.get("uses") == "./")["with"]
    workspace = tmp_path / "workspace"
    (workspace / "fixtures").mkdir(parents=True)
    (workspace / "fixtures" / "loop").symlink_to(ROOT / "fixtures" / "loop")
    path = f"{Path(sys.executable).parent}:{os.environ['PATH']}"
    # The whole run shares nothing with the shards but the seed: it runs beside them, as a third job of the matrix
    # would, not after them.
    whole = subprocess.Popen(["clirace", "check", "fixtures/loop/waits.clirace.yaml", "--seed", "42", "--rounds", "40",
                              "--parallel", "2", "-q", "--format", "json", "-o", "whole.json"],
                             cwd=workspace, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env={**os.environ, "PATH": path})
    running = [whole]
    try:
        for shard in SHARDS["jobs"]["shard"]["strategy"]["matrix"]["shard"]:
            inputs = {name: str(given.get(name, spec.get("default", ""))).replace("${{ matrix.shard }}", str(shard))
                      for name, spec in ACTION["inputs"].items()}
            env = {key: inputs[value.replace("${{ inputs.", "").replace(" }}", "")]
                   for key, value in step["env"].items()}
            env["CLIRACE_SARIF"] = f"clirace-{shard}.sarif"
            (tmp_path / f"out-{shard}").write_text("")
            running.append(subprocess.Popen(
                ["bash", "-e", "-c", step["run"]], cwd=workspace, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                text=True, env={**os.environ, **env, "PATH": path, "GITHUB_STEP_SUMMARY": str(tmp_path / f"s-{shard}"),
                                "GITHUB_OUTPUT": str(tmp_path / f"out-{shard}")}))
        for proc in running:
            _, err = proc.communicate(timeout=600)
            assert proc.returncode == 0, err
    finally:
        for proc in running:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    judge = next(s for s in SHARDS["jobs"]["verdict"]["steps"] if s.get("id") == "judge")
    joined = subprocess.run(["bash", "-e", "-c", judge["run"]], cwd=workspace, capture_output=True, text=True,
                            timeout=120, env={**os.environ, "PATH": path,
                                              "GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md")})
    assert joined.returncode == 0, joined.stderr
    merged, single = _result(workspace / "clirace.json"), _result(workspace / "whole.json")
    # Which rounds really raced (two successes at once, two at the rendezvous) is the machine's doing, in one run
    # as in two shards; everything else the seed decides, so it is the same.
    racing = merged["rates"]["keys"].pop("racing_rounds"), single["rates"]["keys"].pop("racing_rounds")
    bounds = merged["rates"]["keys"].pop("bound"), single["rates"]["keys"].pop("bound")
    assert merged == single
    assert merged["rates"]["keys"]["rounds"] == 40 and merged["score"] == 1 and not merged["corruption"]
    assert bounds == tuple(detection_bound(n, 0) for n in racing), (racing, bounds)
    raced_alone = 0
    for shard in (1, 2):  # alone, each shard says the other's rounds are missing, never passed
        alone = json.loads(subprocess.run(["clirace", "judge", f"clirace-history-{shard}.json", "--exit-zero",
                                           "--format", "json"], cwd=workspace, capture_output=True, text=True,
                                          timeout=120, env={**os.environ, "PATH": path}).stdout)
        assert dict((c["id"], c["status"]) for c in alone["criteria"])["no-silent-corruption"] == "not_tested"
        raced_alone += alone["checks"]["keys"]["rates"]["racing_rounds"]
    assert racing[0] == raced_alone > 30, racing  # the joined bound counts every shard's racing rounds
