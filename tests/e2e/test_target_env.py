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
