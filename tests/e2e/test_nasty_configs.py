"""What a target writes is judged within bounds (issue 10): a config replaced by a named pipe, by a link to
/dev/zero, or by a YAML alias bomb, and a spec whose regex backtracks catastrophically, each end within 30 s
with a clear verdict or spec error (exit 0, 1 or 2, never 3), and clirace's peak memory stays under 200 MB."""
import resource
import subprocess
import sys
import time

import pytest

from ..conftest import FIXTURES, ROOT

SPEC = """\
version: 1
tool:
  command: ["{python}", "%s"]
  env: {NASTY: "%s"}
  timeout: 5s
rounds: 1
parallel: 4
workloads:
  - kind: keys
    run: ["set", "{key}", "{value}"]
    config: {path: "{home}/config.yaml", format: yaml}
"""

REDOS = """\
version: 1
tool:
  command: ["{python}", "%s"]
workloads:
  - kind: counter
    run: ["set", "k", "v"]
    read: ["get"]
    value: '(?:a+)+ count: (\\d+)'
"""


def run(spec_text, tmp_path):
    spec = tmp_path / "nasty.clirace.yaml"
    spec.write_text(spec_text)
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "clirace", "check", str(spec), "--format", "json"],
                          capture_output=True, text=True, cwd=ROOT, timeout=60)
    return proc, time.monotonic() - started


@pytest.mark.timeout(90)
@pytest.mark.parametrize("nasty", ["fifo", "zero", "bomb"])
def test_a_config_the_target_made_unreadable_ends_in_time_and_in_bounds(nasty, tmp_path):
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    proc, took = run(SPEC % (FIXTURES / "hostile" / "nasty_config.py", nasty), tmp_path)
    peak_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    assert proc.returncode in (0, 1, 2), proc.stderr
    assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr, proc.stderr
    assert took < 30, took
    assert peak_mb < 200 or before / 1024 >= 200, peak_mb  # (the largest child of this test process so far)
    said = proc.stderr + proc.stdout
    assert any(word in said for word in ("not a regular file", "too large", "more than", "cannot be judged",
                                         "aliases", "nodes")), said[-600:]


@pytest.mark.timeout(60)
def test_a_catastrophic_regex_is_a_spec_error(tmp_path):
    proc, took = run(REDOS % (FIXTURES / "hostile" / "nasty_config.py"), tmp_path)
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert "(?:a+)+" in proc.stderr and took < 30, (took, proc.stderr)
