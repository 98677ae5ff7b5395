"""Spec words of issue 18, on a task store whose state is SQLite (fixtures/tasks-sqlite): a key template for a
tool with key names of its own, a lock timeout given by an environment variable (wait_env), setup commands
that are not appended to tool.command (run: and sh:), session.flag and session.env together, and a keys
config in SQLite, for which validate's advice on atomic-config-writes can be followed (what validate says of it:
tests/unit/test_validate_init.py). The spec runs; the history shows each word used as the spec says."""
import json

import pytest

from clirace.run import observe

from ..conftest import FIXTURES, run_clirace

SPEC = FIXTURES / "tasks-sqlite" / "clirace.yaml"
TRACED = observe.available()[0]  # session temp paths and kills mid-write need strace


@pytest.mark.timeout(180)
def test_the_spec_runs_with_every_word_used_as_it_says(tmp_path):
    history = tmp_path / "history.json"
    proc = run_clirace("check", SPEC, "--seed", "1", "--format", "json", "--history", history, "--allow-undecided",
                       *(arg for check in ("keys", "atomic-config-writes", "lock-wait-timeout", "session-isolation")
                         for arg in ("--only", check)), timeout=170)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    verdicts = result["checks"]
    for check in ("keys", "lock-wait-timeout", *(("atomic-config-writes", "session-isolation") if TRACED else ())):
        assert verdicts[check]["status"] == "pass", verdicts[check]
    trials = json.loads(history.read_text())["trials"]

    keys_round = next(t for t in trials if t["kind"] == "keys" and not t["serial"])
    installer, schema = keys_round["invocations"][:2]
    assert installer["label"] == "setup-0" and installer["argv"][:2] == ["/bin/sh", "-c"]
    assert schema["label"] == "setup-1" and schema["argv"][1] == "-c" and "tool.py" not in " ".join(schema["argv"])
    assert sorted(key for key, _ in keys_round["keys"].values()) == ["TASK_0", "TASK_1", "TASK_2", "TASK_3"]

    waited = next(t for t in trials if t["kind"] == "lock-wait")
    assert waited["option"] == "TASKS_LOCK_TIMEOUT_MS=1000"
    contender = next(i for i in waited["invocations"] if i["label"] == "contender")
    assert contender["env"]["TASKS_LOCK_TIMEOUT_MS"] == "1000"

    with_ids = next(t for t in trials if t["kind"] == "session" and t["with_ids"])
    for run in (i for i in with_ids["invocations"] if i["label"].startswith(("run-", "again-"))):
        flag = run["argv"][run["argv"].index("--session-id") + 1]
        assert run["env"]["TASKS_SESSION"] == flag == with_ids["runs"][run["label"]]["session_id"]
