"""A target that plants symbolic links (fixtures/hostile/links.py) must not make clirace touch anything outside
its sandbox: a canary directory is snapshotted (type, mode, inode, size, hash of everything in it) before and
after `clirace check`, and must be unchanged. (Issue 10's first "done when", and issue 19's.)

The scenarios open every file in the sandbox through `clirace.run.safefs` (the restore file, the park FIFO and its
directory, io/ inputs and outputs, the take lock, the release file), walked from the fd clirace holds on the
sandbox; clirace's own traces and kill logs live in a private folder outside the run folder, under names nobody
can plant a link at in advance, reached through clirace's fds and read only as regular files, a bounded amount.
"""
from __future__ import annotations

import array
import fcntl
import hashlib
import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from ..conftest import FIXTURES, ROOT

TOOL = FIXTURES / "hostile" / "links.py"
SPEC = """version: 1
tool:
  command: ["{{python}}", "{tool}"]
  env: {{CANARY: "{canary}"}}
  timeout: 5s
setup:
  - {setup}
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
"""
LOCK = """lock:
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
    spec.write_text(SPEC.format(tool=TOOL, canary=canary, setup='["plant"]') + LOCK.format(hold=HOLDS[hold]))
    before = snapshot(canary)
    proc = subprocess.run([sys.executable, "-m", "clirace", "check", str(spec), "--allow-outside-sandbox",
                           "--format", "json"], capture_output=True, text=True, env=no_leftovers.env(), cwd=ROOT,
                          timeout=170)
    after = snapshot(canary)
    changed = {name: (before.get(name), after.get(name)) for name in before.keys() | after.keys()
               if before.get(name) != after.get(name)}
    assert changed == {}, f"outside the sandbox, changed: {sorted(changed)}"
    assert proc.returncode in (0, 1), proc.stderr[-2000:]


# Issue 19: clirace's own folders, the sandbox root and the run folder. What the spec needs: traced rounds (trace
# files), a writer killed mid-write (a kill log) and io/ inputs; not the lock.
ATTACKS = {
    # The probe's attack on the folder where clirace kept its traces and kill log (beside the sandbox, in the run
    # folder), made as hard as listing allows: every folder near the sandbox that is not one gets them.
    "private-folder-links": '["private", "link"]',
    "private-folder-fifos": '["private", "fifo"]',
    "private-folder-dev-zero": '["private", "devzero"]',
    "sandbox-root-swapped": '["swap-root"]',
    "run-folder-swapped": '["swap-run"]',
    "run-folder-removed": '["remove-run"]',
}
RSS_LIMIT_KB = 300 * 1024


@pytest.mark.e2e
@pytest.mark.timeout(120)
@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_attacks_on_clirace_own_folders_leave_the_canary_unchanged(attack, tmp_path, no_leftovers):
    canary = make_canary(tmp_path)
    for name in ("root", "run"):
        (canary / name).mkdir()
    spec = tmp_path / "own.yaml"
    spec.write_text(SPEC.format(tool=TOOL, canary=canary, setup=ATTACKS[attack]))
    before = snapshot(canary)
    proc, peak_kb = run_json_measured(spec, no_leftovers, timeout=110)
    assert snapshot(canary) == before, "something outside the sandbox changed"
    assert proc.returncode in (0, 1), proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    assert peak_kb < RSS_LIMIT_KB, f"peak RSS {peak_kb} KiB"
    assert os.listdir(no_leftovers.tmpdir) == [], "clirace left files or folders behind"
    result = json.loads(proc.stdout)
    evidence = " ".join(c["evidence"] for c in result["criteria"])
    if attack.endswith(("swapped", "removed")):  # reported as the target's doing; nothing after it runs
        assert "the target replaced" in evidence, evidence
    else:  # the plants hit nothing clirace uses: the run goes on as usual
        assert {c["id"]: c["status"] for c in result["criteria"]}["atomic-config-writes"] == "pass", evidence


def run_json_measured(spec, scope, timeout: float):
    argv = [sys.executable, "-c", MEASURE, sys.executable, "-m", "clirace", "check", str(spec),
            "--allow-outside-sandbox", "--format", "json"]
    proc = subprocess.run(argv, capture_output=True, text=True, env=scope.env(), cwd=ROOT, timeout=timeout)
    out, _, peak = proc.stdout.rpartition("\npeak-rss-kb ")
    return subprocess.CompletedProcess(argv, proc.returncode, out, proc.stderr), int(peak)


# Runs its arguments and prints, after their output, the peak RSS of the largest process among them (wait4).
MEASURE = """import os, sys
pid = os.fork()
if pid == 0:
    os.execv(sys.argv[1], sys.argv[1:])
_, status, usage = os.wait4(pid, 0)
sys.stdout.flush()
print("\\npeak-rss-kb", usage.ru_maxrss, end="")
sys.exit(os.waitstatus_to_exitcode(status))
"""


FS_IOC_GETFLAGS, FS_IOC_SETFLAGS, FS_IMMUTABLE_FL = 0x80086601, 0x40086602, 0x10


def set_immutable(path: Path, on: bool) -> None:
    """chattr +i / -i, by the ioctl (OSError where the filesystem or the user's capabilities do not allow it)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        flags = array.array("i", [0])
        fcntl.ioctl(fd, FS_IOC_GETFLAGS, flags, True)
        flags[0] = flags[0] | FS_IMMUTABLE_FL if on else flags[0] & ~FS_IMMUTABLE_FL
        fcntl.ioctl(fd, FS_IOC_SETFLAGS, flags)
    finally:
        os.close(fd)


def can_set_immutable(where: Path) -> bool:
    probe = where / "immutable-probe"
    probe.write_text("")
    try:
        set_immutable(probe, True)
        set_immutable(probe, False)
        return True
    except OSError:
        return False


@pytest.mark.e2e
@pytest.mark.timeout(60)
def test_a_sandbox_clirace_cannot_remove_is_named_and_the_exit_status_says_so(tmp_path, no_leftovers):
    if not can_set_immutable(tmp_path):
        pytest.skip("cannot make a file immutable here (needs CAP_LINUX_IMMUTABLE and a filesystem that has it)")
    spec = tmp_path / "stuck.yaml"
    spec.write_text(SPEC.format(tool=TOOL, canary=make_canary(tmp_path), setup='["immutable"]'))
    try:
        proc = subprocess.run([sys.executable, "-m", "clirace", "check", str(spec), "--only", "counter",
                               "--allow-outside-sandbox", "--format", "json"], capture_output=True, text=True,
                              env=no_leftovers.env(), cwd=ROOT, timeout=50)
        stuck = sorted(no_leftovers.tmpdir.rglob("stuck"))
        assert stuck, "the immutable file is gone: nothing was left to report"
        assert proc.returncode == 4, proc.stderr[-2000:]  # errors.EXIT_NOT_REMOVED
        assert "sandboxes removed" not in proc.stderr
        assert f"could not remove {len(stuck)} of the files and folders it made" in proc.stderr
        notes = " ".join(json.loads(proc.stdout)["notes"])
        for path in stuck:
            assert f"{path}: Operation not permitted" in proc.stderr and str(path) in notes
    finally:
        for path in no_leftovers.tmpdir.rglob("stuck"):
            set_immutable(path, False)
        for path in no_leftovers.tmpdir.iterdir():
            shutil.rmtree(path)


@pytest.mark.e2e
@pytest.mark.timeout(150)
@pytest.mark.parametrize("kind", ["link", "fifo"])
def test_a_daemon_racing_to_plant_at_the_kill_logs_name_redirects_and_blocks_nothing(kind, tmp_path, no_leftovers):
    """Issue 24: a daemon the setup left reads the names clirace hands to strace (`-o` of a kill run, the log of
    strace's own messages) from their command lines and, with that process stopped, plants a link into the
    canary or a FIFO there before strace opens it. Each is a file clirace made and holds (/proc/PID/fd/N)."""
    canary = make_canary(tmp_path)
    spec = tmp_path / "race.yaml"
    spec.write_text(SPEC.format(tool=TOOL, canary=canary, setup=f'["race", "{kind}"]'))
    before = snapshot(canary)
    proc = subprocess.run([sys.executable, "-m", "clirace", "check", str(spec), "--allow-outside-sandbox",
                           "--only", "atomic-config-writes", "--format", "json"], capture_output=True, text=True,
                          env=no_leftovers.env(), cwd=ROOT, timeout=140)
    assert snapshot(canary) == before, "something outside the sandbox changed"
    assert proc.returncode in (0, 1), proc.stderr[-2000:]
    result = json.loads(proc.stdout)
    statuses = {c["id"]: c["status"] for c in result["criteria"]}
    assert statuses["atomic-config-writes"] == "pass", result["criteria"]
