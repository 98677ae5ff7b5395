"""Spec words for tools nobody wrote for clirace (issue 12): a hold hook driven by an environment variable
({hold_ms}), a tool that never waits for a lock, a tool without a session id. One real run of a small tool."""
import json

import pytest

from ..conftest import run_clirace

TOOL = '''\
import fcntl, json, os, sys, time
home = os.environ["HOME"]
lock = os.open(os.path.join(home, "tool.lock"), os.O_CREAT | os.O_RDWR, 0o644)
try:
    fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
except BlockingIOError:
    print(json.dumps({"error": {"code": "LOCK_HELD", "message": "busy", "retry_after_ms": 100}}))
    sys.exit(4)
hold_ms = int(os.environ.get("TOOL_HOLD_MS", "0"))  # the test hook: hold the lock this long, no flag needed
if hold_ms:
    print("holding the lock", file=sys.stderr, flush=True)
    time.sleep(hold_ms / 1000)
path = os.path.join(home, "config.json")
data = json.load(open(path)) if os.path.exists(path) else {}
data[sys.argv[2]] = sys.argv[3]
json.dump(data, open(path + ".tmp", "w"))
os.replace(path + ".tmp", path)
'''

SPEC = '''\
version: 1
tool:
  command: ["{python}", "{spec_dir}/tool.py"]
  timeout: 10s
lock:
  contender: ["set", "contender", "1"]
  hold:
    command: ["set", "holder", "1"]
    env: {TOOL_HOLD_MS: "{hold_ms}"}
    ready: {stderr: "holding the lock"}
  never_waits: true
  prompt: 1s
session:
  none: true
'''


@pytest.mark.timeout(120)
def test_a_hook_driven_by_an_environment_variable_a_tool_that_never_waits_and_one_without_session_ids(tmp_path):
    (tmp_path / "tool.py").write_text(TOOL)
    spec = tmp_path / "tool.clirace.yaml"
    spec.write_text(SPEC)
    proc = run_clirace("check", spec, "--format", "json", "--seed", "1", "--only", "lock-excludes",
                       "--only", "lock-wait-timeout", "--only", "session-isolation", "--allow-undecided")
    assert proc.returncode == 0, proc.stderr  # no-silent-corruption was not run: allowed undecided
    result = json.loads(proc.stdout)
    statuses = {c["id"]: c["status"] for c in result["criteria"]}
    assert statuses["lock-excludes"] == "pass", result["checks"]["lock-excludes"]
    assert statuses["lock-wait-timeout"] == "pass", result["checks"]["lock-wait-timeout"]
    assert "never waits" in result["checks"]["lock-wait-timeout"]["summary"]
    assert statuses["session-isolation"] == "fail"
    assert [f["code"] for f in result["checks"]["session-isolation"]["findings"]] == ["CR504"]


@pytest.mark.timeout(200)
def test_read_contender_and_error_command_may_be_commands_of_their_own(tmp_path):
    """A tool reached through another program (a dispatcher, a read through jq): `read`, `lock.contender` and
    `lock.error_command` take {run: ...} and {sh: ...} as setup does; before, each had to be appended to
    tool.command, and a spec like this one was refused at load."""
    from ..conftest import FIXTURES

    tool = FIXTURES / "level3" / "tool.py"
    spec = tmp_path / "clirace.yaml"
    spec.write_text(json.dumps({
        "version": 1, "tool": {"command": ["{python}", str(tool)], "timeout": "10s"},
        "setup": [["config", "set", "theme", "dark"]],
        "workloads": [
            {"kind": "counter", "run": ["counter", "incr"], "read": {"sh": f'"{{python}}" "{tool}" counter get'}},
            {"kind": "keys", "run": ["config", "set", "{key}", "{value}"],
             "config": {"path": "{config_home}/level3/config.json", "format": "json"}}],
        "lock": {"contender": {"run": ["{python}", str(tool), "config", "set", "{key}", "{value}"]},
                 "hold": {"park": {"command": ["config", "set", "{key}", "{value}"],
                                   "fifo": "{config_home}/level3/config.json"}},
                 "error_command": {"sh": f'exec "{{python}}" "{tool}" queue claim'}}}))
    proc = run_clirace("check", spec, "--no-strace", "--rounds", "1", "--seed", "1", "--only", "counter",
                       "--only", "lock-excludes", "--only", "lock-released-on-exit", "--format", "json", timeout=190)
    assert proc.returncode in (0, 1), proc.stdout + proc.stderr
    result = json.loads(proc.stdout)
    assert result["checks"]["counter"]["status"] == "pass", result["checks"]["counter"]
    statuses = {c["id"]: c["status"] for c in result["criteria"]}
    assert statuses["lock-excludes"] == "pass" and statuses["lock-released-on-exit"] == "pass", statuses
