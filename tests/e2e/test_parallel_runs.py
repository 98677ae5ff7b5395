"""Several `clirace check` runs at once on one machine (a CI runner with parallel jobs): each must get its own
workdir, sweep only its own processes and give the same complete result as it would alone."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from ..conftest import FIXTURES, ROOT

LEVEL1 = FIXTURES / "level1" / "clirace.yaml"
RUNS = 4
# Every experiment runs in each; the workloads' rounds only repeat, so one round each is enough for what is asked of
# four runs at once (a full result each, kept apart), at a fraction of four whole checks (57 s of the CI's wall); and
# two invocations a round (and in the output workload's reference) decide every criterion as eight do.
ONE_ROUND = ("--rounds", "1", "--parallel", "2")


@pytest.mark.e2e
@pytest.mark.timeout(240)
def test_four_runs_at_once_each_get_the_full_result(no_leftovers):
    out_dir = no_leftovers.tmpdir.parent
    procs = []
    for n in range(RUNS):  # one shared TMPDIR, as on a real machine: only mkdtemp keeps them apart
        with open(out_dir / f"out-{n}.json", "w") as out, open(out_dir / f"err-{n}.txt", "w") as err:
            procs.append(subprocess.Popen(
                [sys.executable, "-m", "clirace", "check", str(LEVEL1), "--format", "json", *ONE_ROUND,
                 "--history", str(out_dir / f"history-{n}.json")],
                stdout=out, stderr=err, env=no_leftovers.env(), cwd=ROOT))
    started = time.monotonic()
    try:
        for proc in procs:
            proc.wait(timeout=max(1.0, 200 - (time.monotonic() - started)))
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    print(f"{RUNS} runs at once: {time.monotonic() - started:.1f}s")

    results, workdirs = [], []
    for n, proc in enumerate(procs):
        stderr = (out_dir / f"err-{n}.txt").read_text()
        assert proc.returncode == 0, (n, proc.returncode, stderr)
        assert "Traceback" not in stderr
        result = json.loads((out_dir / f"out-{n}.json").read_text())
        assert result["interrupted"] is False
        assert len(result["criteria"]) == 7 and all(c["evidence"] for c in result["criteria"]), result["criteria"]
        results.append(result)
        trials = json.loads((out_dir / f"history-{n}.json").read_text())["trials"]
        sandboxes = {t["sandbox"] for t in trials if t["sandbox"]}
        assert sandboxes, n
        run_dirs = {os.path.dirname(s) for s in sandboxes}
        assert len(run_dirs) == 1 and os.path.dirname(run_dirs.pop()) == str(no_leftovers.tmpdir), sandboxes
        workdirs.append(os.path.dirname(next(iter(sandboxes))))

    assert [r["score"] for r in results] == [1] * RUNS
    statuses = [[(c["id"], c["status"]) for c in r["criteria"]] for r in results]
    assert all(s == statuses[0] for s in statuses), statuses
    assert len(set(workdirs)) == RUNS, workdirs  # each run had a workdir of its own
    assert os.listdir(no_leftovers.tmpdir) == [], "sandboxes left behind"
    assert os.listdir(no_leftovers.home) == [], "a run wrote into the real HOME"
