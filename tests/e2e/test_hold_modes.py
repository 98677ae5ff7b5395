"""clirace taking the tool's lock itself (lock.hold.take), on real fixtures: flock and an O_EXCL lock file. The
other two ways are exercised by the reference specs (park: levels 0, 1, 3; a test hook: level 2)."""
import json

import pytest

from clirace.run import observe

from ..conftest import FIXTURES, run_clirace

SPEC = """
version: 1
tool:
  command: ["{{python}}", "{tool}"]
setup:
  - ["config", "set", "theme", "dark"]
lock:
  contender: ["config", "set", "contender", "1"]
  hold:
{hold}
{extra}
"""
CONFLICT = ("--only", "lock-excludes", "--only", "lock-error-structured")  # one experiment: the contender, held
ONLY = (*CONFLICT, "--only", "lock-release", "--only", "lock-wait-timeout")


def check(tmp_path, level, hold, extra="", only=ONLY):
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC.format(tool=FIXTURES / f"level{level}" / "tool.py", hold=hold, extra=extra))
    # Only the lock checks run: no-silent-corruption is not decided, which the gate says (exit 1) unless allowed.
    proc = run_clirace("check", spec, "--format", "json", "--allow-undecided", *only)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    return {c["id"]: c["status"] for c in result["criteria"]}, result


@pytest.mark.e2e
@pytest.mark.timeout(90)
def test_take_flock_the_way_the_tool_does(tmp_path):
    statuses, result = check(tmp_path, 3, '    take: {path: "{state_home}/level3/lock", kind: flock}',
                             '  wait_option: ["--lock-timeout", "{timeout_ms}"]')
    assert statuses["lock-excludes"] == "pass" and statuses["lock-error-structured"] == "pass"
    assert statuses["lock-wait-timeout"] == "pass"
    # clirace takes the lock for the contender; the release test holds a real invocation at its flock
    # (strace), which releases on every exit; the error exit is not tested (the spec has no error_command).
    release = result["checks"]["lock-released-on-exit"]
    assert statuses["lock-released-on-exit"] == "not_tested"
    if observe.available()[0]:
        assert release["summary"].startswith("released after normal, sigint, sigterm"), release["summary"]
    else:
        assert "held at its lock by strace, which cannot here" in release["summary"], release["summary"]


@pytest.mark.e2e
@pytest.mark.timeout(90)
def test_take_exclusive_create_lock_file(tmp_path):
    hold = r'    take: {path: "{state_home}/level2/lock", kind: exclusive-create, content: "{\"pid\": {pid}, \"started_at\": {now}}"}'
    statuses, _ = check(tmp_path, 2, hold, only=CONFLICT)  # what it asserts is the lock-conflict experiment's
    assert statuses["lock-excludes"] == "pass" and statuses["lock-error-structured"] == "pass"


@pytest.mark.e2e
@pytest.mark.timeout(90)
def test_take_on_a_tool_without_locking_shows_no_exclusion(tmp_path):
    statuses, _ = check(tmp_path, 0, '    take: {path: "{state_home}/level0/lock", kind: flock}', only=CONFLICT)
    assert statuses["lock-excludes"] == "fail"
