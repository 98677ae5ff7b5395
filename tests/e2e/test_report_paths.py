"""A target that swaps the user's history path for a directory or a FIFO during the run (fixtures/hostile/
swap_report.py): clirace exits 2 naming the path, never 3 and never hangs, writes the other reports, and leaves
what the target put there unchanged (issue 19, item 3). A park holder that never opens the parked path is
undecided, saying what it had open, never told to add what the spec has."""
import hashlib
import json
import stat

import pytest

from ..conftest import FIXTURES, run_clirace

SPEC = """version: 1
tool:
  command: ["{{python}}", "{tool}"]
  env: {{SWAP_PATH: "{swap}", SWAP_KIND: "{kind}"}}
  timeout: 5s
setup:
  - ["swap"]
rounds: 1
parallel: 2
workloads:
  - kind: keys
    run: ["set", "{{key}}", "{{value}}"]
    read: ["get", "{{key}}"]
"""


def snapshot(path):
    info = path.lstat()
    inside = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in path.iterdir()} if path.is_dir() else None
    return stat.filemode(info.st_mode), info.st_ino, inside


@pytest.mark.timeout(90)
@pytest.mark.parametrize("kind", ["directory", "fifo"])
def test_a_history_path_swapped_during_the_run_is_exit_2_naming_it(tmp_path, kind, no_leftovers):
    history = tmp_path / "out" / "history.json"
    history.parent.mkdir()
    spec = tmp_path / "swap.yaml"
    spec.write_text(SPEC.format(tool=FIXTURES / "hostile" / "swap_report.py", swap=history, kind=kind))
    proc = run_clirace("check", spec, "--only", "keys", "--history", history, "--report", f"json={tmp_path}/r.json",
                       "-q", "--allow-outside-sandbox", "--allow-undecided",  # (only keys ran: the rest undecided)
                       timeout=60)  # the env names a path outside, on purpose
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert f"--history {history}" in proc.stderr and "Traceback" not in proc.stderr
    assert ("a directory" if kind == "directory" else "a named pipe (FIFO)") in proc.stderr
    canary = snapshot(history)
    assert canary[0][0] == ("d" if kind == "directory" else "p")
    if kind == "directory":
        assert canary[2] == {"inside": hashlib.sha256(b"the target's\n").hexdigest()}
    assert json.loads((tmp_path / "r.json").read_text())["gate"]["passed"]  # the other report was written
    assert sorted(p.name for p in history.parent.iterdir()) == ["history.json"]  # no temp file left


PARKED_ELSEWHERE = """version: 1
tool:
  command: ["{{python}}", "-c", "{code}"]
  timeout: 3s
lock:
  contender: ["set"]
  hold:
    park: {{command: ["hold"], fifo: "{{config_home}}/never-read.json"}}
"""
# `hold` takes a flock and waits there; `set` takes it too (the contender): the holder never reads the parked path.
CODE = ("import fcntl,os,sys,time; fd=os.open(os.path.join(os.environ['HOME'],'tool.lock'),os.O_CREAT|os.O_RDWR); "
        "fcntl.flock(fd,fcntl.LOCK_EX); time.sleep(30 if sys.argv[1]=='hold' else 0)")


@pytest.mark.timeout(90)
def test_a_holder_that_never_opens_the_parked_path_says_what_it_had_open(tmp_path, no_leftovers):
    spec = tmp_path / "parked.yaml"
    spec.write_text(PARKED_ELSEWHERE.format(code=CODE))
    proc = run_clirace("check", spec, "--only", "lock-excludes", "--allow-undecided", "--format", "json", "-q", timeout=60)
    assert proc.returncode == 0, proc.stderr
    crit = next(c for c in json.loads(proc.stdout)["criteria"] if c["id"] == "lock-excludes")
    assert crit["indeterminate"], crit
    assert "never opened" in crit["evidence"] and "/home/tool.lock (lock.hold.park.fifo must be" in crit["evidence"]
    assert "it had open: " in crit["evidence"], crit
    assert "Add lock.contender" not in crit["to_test"] and "Nothing is missing from the spec" in crit["to_test"]
