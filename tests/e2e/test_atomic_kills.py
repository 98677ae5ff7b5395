"""Crash injection when the writer is a shell script (a temp file per process, then `mv`): the process that
strace kills at the rename is the `mv`, a child of the invocation."""
import pytest

from clirace.run import observe

from ..conftest import check_json

SCRIPT_WRITER = r"""version: 1
tool:
  command: ["sh", "-c", 'printf "{\"%s\": \"%s\"}" "$1" "$2" > ~/c.json.$$ && mv ~/c.json.$$ ~/c.json', "set"]
workloads:
  - kind: keys
    run: ["{key}", "{value}"]
    config: {path: "{home}/c.json", format: json}
"""


@pytest.mark.e2e
@pytest.mark.timeout(60)
@pytest.mark.skipif(not observe.available()[0], reason="needs strace (crash injection)")
def test_a_kill_that_lands_in_a_child_of_the_invocation_counts_as_reached(tmp_path):
    spec = tmp_path / "tool.clirace.yaml"
    spec.write_text(SCRIPT_WRITER)
    result = check_json(spec, "--only", "atomic-config", "--seed", "2")
    (atomic,) = [c for c in result["criteria"] if c["id"] == "atomic-config-writes"]
    # The shell exits 137 when its mv is killed: that kill was reached all the same (it used to read as
    # "kill points never reached: the rename onto c.json, the rename onto c.json").
    assert "never reached" not in atomic["evidence"], atomic
    assert "renameat2 #1 onto c.json" in atomic["evidence"], atomic
    assert atomic["status"] == "pass", atomic
