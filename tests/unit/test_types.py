"""mypy --strict passes on all of src/clirace (configured in pyproject.toml; .ci/run also runs it before the suite)."""
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


# Out of the fast subset (it launches no target, but a whole strict mypy run without its cache was the subset's
# slowest test: 107 s of a 16 min run at load 20-25); the whole suite still runs it. Incremental: after CI's own
# mypy (.ci/run) its cache is warm, and this run takes about a second instead of 40-66 s of a worker (mypy's cache
# is keyed on each file's content, so a changed file is checked again).
@pytest.mark.e2e
@pytest.mark.timeout(300)
def test_the_contract_and_the_checks_type_check_strictly():
    proc = subprocess.run([sys.executable, "-m", "mypy"], cwd=ROOT, capture_output=True, text=True,
                          timeout=280)
    assert proc.returncode == 0, proc.stdout + proc.stderr
