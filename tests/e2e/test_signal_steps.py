"""SIGTERM and SIGINT at every progress step of a level-3 check, the last one included, and while the result is
being written (issue 24): exit 143 or 130, a report of what was decided (the partial result, whole), nothing left
in TMPDIR or /tmp.

The progress lines on stderr are the barriers: the signal is sent the moment the step's line is printed. Each
run is restricted (--only) to the checks that reach its step, so that reaching it is cheap; the three lock checks
are asked for together, so that their experiments run side by side as in a whole check. The last step is reached
by a whole, unrestricted check stopped by SIGTERM (the result then holds every criterion decided before it), whose
progress lines must be exactly STEPS: a step added to the check and missing here fails the test. SIGINT meets that
step as it meets the others, in the one check that reaches it: what the whole run shows is the check's, not the
signal's (one handler raises KeyboardInterrupt or Terminated, caught together; only the exit status differs), and a
second whole run cost ~10 s of CPU. The result being written is held by a named pipe given as --history, which the
test opened for reading without reading it: the history (larger than the pipe, shrunk to one page) fills the pipe,
and clirace is then provably inside its write."""
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
LOCKS = ("lock-excludes", "lock-released-on-exit", "lock-wait-timeout")  # side by side, as in a whole check
ALL = ()  # no --only: the whole check
# (words of the progress line, the checks whose run reaches it, the criterion the step is part of deciding): every
# progress step of a level-3 check. A run stopped at a step must not claim that criterion.
# (`None`: the step is only advice, and stopping there may leave every criterion decided.)
STEPS = [
    ("counter#0: reference run", ("counter",), "no-silent-corruption"),
    ("keys#1: reference run", ("keys",), "no-silent-corruption"),
    ("claim#2: reference run", ("claim",), "no-silent-corruption"),
    ("output#3: reference run", ("output",), "no-silent-corruption"),
    ("lock: contender and error command alone", LOCKS, "lock-excludes"),
    ("counter#0: round 1/1", ("counter",), "no-silent-corruption"),
    ("keys#1: round 1/1", ("keys",), "no-silent-corruption"),
    ("claim#2: round 1/1", ("claim",), "no-silent-corruption"),
    ("output#3: round 1/1", ("output",), "no-silent-corruption"),
    ("lock: contender while the lock is held", LOCKS, "lock-excludes"),
    ("lock: release after normal", LOCKS, "lock-released-on-exit"),
    ("lock: contender asked to wait", LOCKS, "lock-wait-timeout"),
    ("lock: release after error", LOCKS, "lock-released-on-exit"),
    ("lock: release after sigint", LOCKS, "lock-released-on-exit"),
    ("lock: release after sigterm", LOCKS, "lock-released-on-exit"),
    ("lock: release after sigkill", LOCKS, None),  # advice only: the four required ways may all be decided
    ("session: 2 parallel runs with session ids", ("session-isolation",), "session-isolation"),
    ("session: 2 parallel runs without session ids", ("session-isolation",), "session-isolation"),
    ("atomic config: sampling the config", ("atomic-config-writes",), "atomic-config-writes"),
    ("atomic config: tracing one writer", ("atomic-config-writes",), "atomic-config-writes"),
    ("atomic config: writer killed at write #1", ("atomic-config-writes",), "atomic-config-writes"),
    ("atomic config: writer killed at fsync #1", ("atomic-config-writes",), "atomic-config-writes"),
    ("atomic config: writer killed at rename #1", ALL, "atomic-config-writes"),  # the last step of the whole check
]
WHOLE_BY = signal.SIGTERM  # the signal that stops the whole check at its last step (the module's docstring)
CASES = [(words, ("atomic-config-writes",) if only == ALL and sig != WHOLE_BY else only, criterion, sig)
         for words, only, criterion in STEPS for sig in (signal.SIGTERM, signal.SIGINT)]


def start(scope, only: tuple[str, ...], history) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "clirace", "check", str(LEVEL3), "--rounds", "1", "--parallel",
                             "2", "--seed", "7", *(f"--only={check}" for check in only), "--format", "json",
                             "--history", str(history)],
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
    left = sorted(str(path.relative_to(scope.tmpdir)) for path in scope.tmpdir.rglob("*"))
    assert left == [], f"left in TMPDIR: {left[:20]}"
    assert not glob.glob(f"/tmp/clirace-{proc.pid}-*") and not glob.glob(f"/tmp/.clirace-{proc.pid}-*"), "left in /tmp"
    return result


@pytest.mark.e2e
@pytest.mark.timeout(120)
@pytest.mark.parametrize("words, only, criterion, sig", CASES, ids=[f"{w}-{s.name}" for w, _, _, s in CASES])
def test_a_signal_at_a_progress_step_exits_with_its_status_and_the_partial_result(words, only, criterion, sig,
                                                                                  no_leftovers, tmp_path):
    history = tmp_path / "history.json"
    proc = start(no_leftovers, only, history)
    lines = until_line(proc, words)
    proc.send_signal(sig)
    stdout, stderr = proc.communicate(timeout=60)
    result = assert_stopped_cleanly(proc, sig, stdout, stderr.decode(errors="replace"), no_leftovers)
    if not result["interrupted"]:
        # A loaded machine read the last step's line late, once the check itself was over (the signal then lands
        # while the result is judged or written): the result is the whole one, as in the test below. Nothing
        # may then say that the run stopped or that a planned experiment never finished.
        assert not json.loads(history.read_text())["stopped"], "a stopped run's result says it was not interrupted"
        unfinished = [line for line in json.dumps(result).split('"') if "never finished" in line]
        assert not unfinished, unfinished  # the gap's own words (and its why), not the whole result cut short
        return
    status = {c["id"]: c["status"] for c in result["criteria"]}
    # The signal comes once the step's line is read; a loaded machine may read it late, when the step is over and
    # the next one's line printed: only then may the step's criterion be decided.
    later = [line for line in stderr.decode(errors="replace").splitlines() if any(k in line for k, _, _ in STEPS)]
    if criterion is not None and not later:
        assert status[criterion] != "pass", f"{criterion} claimed by a run stopped before it was decided: {status}"
    if only == ALL:  # the whole check went through every step before this one: STEPS must name each of them,
        steps = [line.removeprefix("clirace: ") for line in lines if not line.startswith("clirace: start-up sweep:")]
        named = [[known for known, _, _ in STEPS if known in step] for step in steps]
        assert all(len(found) == 1 for found in named), list(zip(steps, named, strict=True))
        assert sorted(found[0] for found in named) == sorted(known for known, _, _ in STEPS), steps
        # and every criterion but the one under way was decided before it
        assert all(state == "pass" for check, state in status.items() if check != criterion), status
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
        proc = start(no_leftovers, ("counter",), fifo)
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
