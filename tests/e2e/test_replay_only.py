"""Every replay reproduces: the command printed with a finding, run as printed, gives the same finding in the
same trial. hazards is judged from the workloads' traced rounds, so `--only hazards` must run them."""
import json
import shlex

import pytest

from clirace import observe

from ..conftest import FIXTURES, check_json, run_clirace

COUNTER_ONLY = """version: 1
tool:
  command: ["{{python}}", "{tool}"]
workloads:
  - kind: counter
    run: ["counter", "incr"]
    read: ["counter", "get"]
"""


@pytest.mark.e2e
@pytest.mark.timeout(90)
@pytest.mark.skipif(not observe.available()[0], reason="hazards are read from strace's traces")
def test_the_printed_replay_of_a_hazard_reproduces_it(tmp_path):
    spec = tmp_path / "level0-counter.clirace.yaml"
    spec.write_text(COUNTER_ONLY.format(tool=FIXTURES / "level0" / "tool.py"))  # level0: no lock at all
    first = check_json(spec, "--rounds", "2", "--parallel", "3", "--seed", "3")
    (hazard,) = [f for f in first["findings"] if f["code"] == "CR702"]
    replay = shlex.split(hazard["evidence"]["replay"])
    assert replay[:2] == ["clirace", "check"] and replay[-2:] == ["--only", "hazards"], replay
    proc = run_clirace(*replay[1:], "--format", "json")  # as printed, after the program name
    assert proc.returncode in (0, 1), proc.stderr
    again = [f for f in json.loads(proc.stdout)["findings"] if f["code"] == "CR702"]
    assert [f["evidence"]["trial"] for f in again] == [hazard["evidence"]["trial"]], again
