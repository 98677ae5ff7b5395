"""SIGTERM and SIGINT at each kind of progress step of a level-3 check, the last one included, and while the
result is being written (issue 24): exit 143 or 130, a report of what was decided (the partial result, whole),
nothing left in TMPDIR or /tmp.

The progress lines on stderr are the barriers: the signal is sent the moment the step's line is printed. Each
run is restricted (--only) to the check that reaches its step, so that reaching it is cheap. The result being
written is held by a named pipe given as --history, which the test opened for reading without reading it: the
history (larger than the pipe, shrunk to one page) fills the pipe, and clirace is then provably inside its write."""
from __future__ import annotations

import fcntl
import glob
import json
import os
import select
import signal
import subprocess
import sys
import termios
import time

import pytest

from ..conftest import FIXTURES, ROOT
from ..procs import wait_for

LEVEL3 = FIXTURES / "level3" / "clirace.yaml"
EXIT = {signal.SIGTERM: 143, signal.SIGINT: 130}
F_SETPIPE_SZ, F_GETPIPE_SZ = 1031, 1032
# (words of the progress line, the check that reaches it, the signal): every kind of step of a level-3 check in
# run order, the signals taking turns; the last step (and the writing after it, below) gets both.
STEPS = [
    ("counter#0: reference run", "counter", signal.SIGTERM),
    ("lock: contender and error command alone", "lock-excludes", signal.SIGINT),
    ("counter#0: round 1/1", "counter", signal.SIGTERM),
    ("lock: release after normal", "lock-released-on-exit", signal.SIGINT),
    ("lock: contender while the lock is held", "lock-excludes", signal.SIGTERM),
    ("lock: contender asked to wait", "lock-wait-timeout", signal.SIGINT),
    ("lock: release after sigkill", "lock-released-on-exit", signal.SIGTERM),
    ("session: 2 parallel runs with session ids", "session-isolation", signal.SIGINT),
    ("atomic config: sampling the config", "atomic-config-writes", signal.SIGTERM),
    ("atomic config: tracing one writer", "atomic-config-writes", signal.SIGINT),
    ("atomic config: writer killed at write #1", "atomic-config-writes", signal.SIGTERM),
    ("atomic config: writer killed at rename #1", "atomic-config-writes", signal.SIGINT),
    ("atomic config: writer killed at rename #1", "atomic-config-writes", signal.SIGTERM),
]


def start(scope, only: str, history) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "clirace", "check", str(LEVEL3), "--rounds", "1", "--parallel",
                             "2", "--seed", "7", "--only", only, "--format", "json", "--history", str(history)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=scope.env(), cwd=ROOT)


def until_line(proc: subprocess.Popen, words: str) -> list[str]:
    """The progress lines up to the first one with `words` (the run is then at that step)."""
    lines = []
    for raw in proc.stderr:
        lines.append(raw.decode(errors="replace"))
        if words in lines[-1]:
            return lines
    raise AssertionError(f"the run ended before a step with {words!r}: {''.join(lines)[-2000:]}")


def assert_stopped_cleanly(proc, sig, stdout: bytes, stderr: str, scope) -> dict:
    assert proc.returncode == EXIT[sig], (proc.returncode, stderr[-2000:])
    assert "Traceback" not in stderr and "internal error" not in stderr, stderr[-2000:]
    result = json.loads(stdout)  # the report: what was decided, whole
    assert result["criteria"], result
    assert os.listdir(scope.tmpdir) == [], "left in TMPDIR"
    assert not glob.glob(f"/tmp/clirace-{proc.pid}-*") and not glob.glob(f"/tmp/.clirace-{proc.pid}-*"), "left in /tmp"
    return result


@pytest.mark.e2e
@pytest.mark.timeout(120)
@pytest.mark.parametrize("words, only, sig", STEPS, ids=[f"{w[:28]}-{s.name}" for w, _, s in STEPS])
def test_a_signal_at_a_progress_step_exits_with_its_status_and_the_partial_result(words, only, sig, no_leftovers,
                                                                                  tmp_path):
    history = tmp_path / "history.json"
    proc = start(no_leftovers, only, history)
    until_line(proc, words)
    proc.send_signal(sig)
    stdout, stderr = proc.communicate(timeout=60)
    result = assert_stopped_cleanly(proc, sig, stdout, stderr.decode(errors="replace"), no_leftovers)
    assert result["interrupted"], result
    assert json.loads(history.read_text())["stopped"], "the history does not say the run was stopped"


@pytest.mark.e2e
@pytest.mark.timeout(120)
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=lambda s: s.name)
def test_a_signal_while_the_result_is_written_still_writes_it_whole(sig, no_leftovers, tmp_path):
    fifo = tmp_path / "history.fifo"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # a reader, so clirace may open it; read only later
    try:
        fcntl.fcntl(reader, F_SETPIPE_SZ, 4096)  # one page: any history is larger
        size = fcntl.fcntl(reader, F_GETPIPE_SZ)
        proc = start(no_leftovers, "counter", fifo)
        queued = bytearray(4)

        def full() -> bool:
            fcntl.ioctl(reader, termios.FIONREAD, queued)
            return int.from_bytes(queued, sys.byteorder) >= size or proc.poll() is not None

        wait_for(full, 100, "clirace to fill the history's pipe (it is then inside its write)")
        assert proc.poll() is None, proc.communicate()[1].decode()[-2000:]
        proc.send_signal(sig)
        written = bytearray()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            select.select([reader], [], [], 1.0)
            try:
                chunk = os.read(reader, 1 << 16)
            except BlockingIOError:
                continue
            if not chunk:
                break
            written += chunk
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        os.close(reader)
    result = assert_stopped_cleanly(proc, sig, stdout, stderr.decode(errors="replace"), no_leftovers)
    assert json.loads(written)["trials"], "the history was not written whole"
    assert not result["interrupted"]  # the check itself was over: its result is the whole one
