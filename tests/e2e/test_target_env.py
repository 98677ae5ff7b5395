"""A spec's environment is the target's, not clirace's: what clirace runs for itself does not depend on it."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from ..conftest import FIXTURES, ROOT


@pytest.mark.e2e
@pytest.mark.timeout(60)
def test_a_target_path_without_a_shell(no_leftovers):
    """tool.env.PATH is the target's; clirace's start barrier and exec-failure stand-in must not depend on it
    (they were looked up there: 'internal error ... No such file or directory: sh', exit 3)."""
    proc = subprocess.run([sys.executable, "-m", "clirace", "check", str(FIXTURES / "hostile" / "nopath.yaml"),
                           "--no-strace", "--format", "json"], capture_output=True, text=True, env=no_leftovers.env(),
                          cwd=ROOT, timeout=50)
    assert proc.returncode in (0, 1), proc.stderr
    criterion = next(c for c in json.loads(proc.stdout)["criteria"] if c["id"] == "no-silent-corruption")
    assert criterion["status"] == "pass" and "4 successful increments" in criterion["evidence"], criterion


@pytest.mark.e2e
@pytest.mark.timeout(90)
def test_data_home_is_the_sandboxs_and_the_tool_sees_it_as_xdg_data_home(tmp_path):
    """A tool that keeps its state under XDG_DATA_HOME (~/.local/share) is named with {data_home}; before, the name
    was unknown (exit 2) and XDG_DATA_HOME was unset."""
    tool = ('f="$XDG_DATA_HOME/t/n"; case "$1" in incr) flock "$f.lock" sh -c "echo \\$((\\$(cat $f) + 1)) > $f";; '
            'get) cat "$f";; esac')
    spec = tmp_path / "clirace.yaml"
    spec.write_text(json.dumps({
        "version": 1, "tool": {"command": ["sh", "-c", tool, "tool"], "timeout": "10s"},
        "setup": [{"sh": 'test "$XDG_DATA_HOME" = "{data_home}" && mkdir -p "{data_home}/t" && echo 0 > "{data_home}/t/n"'}],
        "workloads": [{"kind": "counter", "run": ["incr"], "read": ["get"]}]}))
    proc = subprocess.run([sys.executable, "-m", "clirace", "check", str(spec), "--no-strace", "--rounds", "1",
                           "--only", "counter", "--format", "json"], capture_output=True, text=True, cwd=ROOT, timeout=80)
    assert proc.returncode in (0, 1), proc.stdout + proc.stderr
    counter = json.loads(proc.stdout)["checks"]["counter"]
    assert counter["status"] == "pass", counter
