"""A target that plants symbolic links (fixtures/hostile/links.py) must not make clirace touch anything outside
its sandbox: a canary directory is snapshotted (type, mode, inode, size, hash of everything in it) before and
after `clirace check`, and must be unchanged. (Issue 10's first "done when".)

The scenarios open every file in the sandbox through `clirace.safefs` (the restore file, the park FIFO and its
directory, io/ inputs and outputs, the take lock, the release file), and keep trace/ and kill.log in a folder
beside the sandbox that the target cannot name in advance.
"""
from __future__ import annotations

import hashlib
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from ..conftest import FIXTURES, ROOT

TOOL = FIXTURES / "hostile" / "links.py"
BASE = """version: 1
tool:
  command: ["{{python}}", "{tool}"]
  env: {{CANARY: "{canary}"}}
  timeout: 5s
setup:
  - ["plant"]
rounds: 2
parallel: 2
workloads:
  - kind: counter
    run: ["incr"]
    read: ["get"]
  - kind: output
    run: ["process", "--input", "{{input}}", "--output", "{{output}}"]
  - kind: keys
    run: ["set", "{{key}}", "{{value}}"]
    config: {{path: "{{config_home}}/links/config.json", format: json}}
lock:
  contender: ["set", "contender", "1"]
  hold:
{hold}
"""
HOLDS = {
    "park-fifo-in-linked-dir": '    park: {command: ["set", "holder", "1"], fifo: "{state_home}/links/state.json"}',
    "park-restore-file-linked": '    park: {command: ["set", "holder", "1"], fifo: "{config_home}/links/config.json"}',
    "take-lock-in-linked-dir": '    take: {path: "{state_home}/lockdir/tool.lock", kind: exclusive-create}',
}


def make_canary(root: Path) -> Path:
    canary = root / "canary"
    for name in ("io", "trace", "state", "lockdir"):
        (canary / name).mkdir(parents=True)
    (canary / "kill.log").write_text("the user's log\n")
    (canary / "state" / "state.json").write_text('{"user": "state"}')
    (canary / "state" / "state.json").chmod(0o600)
    (canary / "victim.json").write_text('{"user": "victim"}')
    return canary


def snapshot(directory: Path) -> dict:
    out = {}
    for path in sorted([directory, *directory.rglob("*")]):
        info = path.lstat()
        digest = hashlib.sha256(path.read_bytes()).hexdigest() if stat.S_ISREG(info.st_mode) else None
        out[str(path.relative_to(directory))] = (stat.filemode(info.st_mode), info.st_ino, info.st_size,
                                                 info.st_nlink, digest)
    return out


@pytest.mark.e2e
@pytest.mark.timeout(180)
@pytest.mark.parametrize("hold", sorted(HOLDS))
def test_links_planted_by_the_target_leave_the_canary_unchanged(hold, tmp_path, no_leftovers):
    canary = make_canary(tmp_path)
    spec = tmp_path / "links.yaml"
    spec.write_text(BASE.format(tool=TOOL, canary=canary, hold=HOLDS[hold]))
    before = snapshot(canary)
    proc = subprocess.run([sys.executable, "-m", "clirace", "check", str(spec), "--allow-outside-sandbox",
                           "--format", "json"], capture_output=True, text=True, env=no_leftovers.env(), cwd=ROOT,
                          timeout=170)
    after = snapshot(canary)
    changed = {name: (before.get(name), after.get(name)) for name in before.keys() | after.keys()
               if before.get(name) != after.get(name)}
    assert changed == {}, f"outside the sandbox, changed: {sorted(changed)}"
    assert proc.returncode in (0, 1), proc.stderr[-2000:]
