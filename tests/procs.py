"""Processes that clirace started, found the way clirace itself finds them: by CLIRACE_TRIAL in their environment.

Every process of a trial (the target, whatever it forks, even after setsid()) carries
CLIRACE_TRIAL=<clirace pid>:<sandbox path>, and the sandboxes live in the clirace process's TMPDIR. So a test
that gives each clirace it runs a TMPDIR of its own (`no_leftovers.env()`) can tell its own leftovers from those
of anything else running clirace on the machine at the same time.

    def test_something(no_leftovers):
        subprocess.run([...clirace...], env=no_leftovers.env())
        # after the test: fails, naming each one's command line, if a process of those runs is still alive

The check is an oracle independent of clirace's own cleanup code: it reads /proc, and does not import clirace.
"""
from __future__ import annotations

import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

MARKER = b"CLIRACE_TRIAL="
POLL = 0.02
# `python -c WRITERS FOLDER READY`: 16 threads creating files in FOLDER as fast as they can, SIGTERM ignored; its pid
# is written to READY ("-": stdout) once they run. Killed, its threads finish the call they are in one by one, and
# the first to go takes the process out of a scan of environments (/proc/PID/environ reads empty) before the last.
WRITERS = """
import os, signal, sys, threading
signal.signal(signal.SIGTERM, signal.SIG_IGN)
def write(n):
    i = 0
    while True:
        i += 1
        with open(os.path.join(sys.argv[1], f"{n}-{i}"), "w"):
            pass
for n in range(16):
    threading.Thread(target=write, args=(n,), daemon=True).start()
with (sys.stdout if sys.argv[2] == "-" else open(sys.argv[2] + ".tmp", "w")) as out:
    print(os.getpid(), file=out, flush=True)
if sys.argv[2] != "-":
    os.rename(sys.argv[2] + ".tmp", sys.argv[2])
threading.Event().wait()
"""


def threads_alive(pid: int) -> list[str]:
    """The threads of `pid` that have not finished exiting (neither a zombie nor gone), each "TID STATE"."""
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return []
    alive = []
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/stat", "rb") as handle:
                state = handle.read().rsplit(b")", 1)[1].split()[0].decode()
        except (OSError, IndexError):
            continue
        if state not in ("Z", "X"):
            alive.append(f"{tid} {state}")
    return alive


@dataclass(frozen=True)
class Proc:
    pid: int
    marker: str  # the value of CLIRACE_TRIAL: "<clirace pid>:<sandbox>"
    cmdline: str
    state: str

    def __str__(self) -> str:
        return f"pid {self.pid} [{self.state}] {self.cmdline}  (CLIRACE_TRIAL={self.marker})"


def clirace_processes(under: str | Path | None = None) -> list[Proc]:
    """Live processes started by clirace; with `under`, only those whose sandbox is inside that directory.

    Zombies are left out: they have ended (their environment is gone) and only wait to be reaped.
    """
    prefix = os.path.join(str(under), "") if under is not None else None
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        marker = _marker(int(entry))
        if marker is None:
            continue
        sandbox = marker.split(":", 1)[1] if ":" in marker else ""
        if prefix is not None and not sandbox.startswith(prefix):
            continue
        state = _state(int(entry))
        if state in ("Z", "X", ""):
            continue
        found.append(Proc(int(entry), marker, _cmdline(int(entry)), state))
    return found


def wait_until_gone(under: str | Path | None = None, timeout: float = 2.0) -> list[Proc]:
    """Poll until no such process is left or `timeout` passes; returns those still alive then."""
    deadline = time.monotonic() + timeout
    while True:
        left = clirace_processes(under)
        if not left or time.monotonic() >= deadline:
            return left
        time.sleep(POLL)


def wait_for(condition, timeout: float, what: str, poll: float = POLL):
    """Poll `condition()` until it returns something truthy (returned) or fail the test after `timeout`."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() >= deadline:
            pytest.fail(f"timed out after {timeout:g}s waiting for {what}")
        time.sleep(poll)


def kill(procs: list[Proc]) -> None:
    for proc in procs:
        try:
            os.kill(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


class Scope:
    """What one test runs clirace in: `tmpdir` becomes clirace's TMPDIR (its sandboxes go there) and `home` its
    HOME, both empty at the start, so a test can also tell that nothing was left or written outside."""

    def __init__(self, root: Path):
        self.tmpdir = root / "tmp"
        self.home = root / "home"
        self.tmpdir.mkdir(parents=True)
        self.home.mkdir()

    def env(self, **extra: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in ("CLIRACE_TRIAL", "CLIRACE_INVOCATION")}
        env.update(TMPDIR=str(self.tmpdir), HOME=str(self.home), NO_COLOR="1", PYTHONUNBUFFERED="1")
        env.pop("TMP", None)
        env.pop("TEMP", None)
        env.update(extra)
        return env

    def processes(self) -> list[Proc]:
        return clirace_processes(self.tmpdir)

    def leftovers(self, timeout: float = 2.0) -> list[Proc]:
        return wait_until_gone(self.tmpdir, timeout)


@pytest.fixture
def no_leftovers(tmp_path):
    """A Scope for the test's clirace runs; afterwards, asserts that no process they started is still alive
    (waiting up to 2 s for processes that are on their way out), and kills any it reports."""
    scope = Scope(tmp_path / "clirace-scope")
    yield scope
    left = scope.leftovers(timeout=2.0)
    if left:
        kill(left)
        pytest.fail("processes started by clirace outlived the run:\n  " + "\n  ".join(map(str, left)))


def _marker(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/environ", "rb") as handle:
            environ = handle.read()
    except OSError:
        return None
    for entry in environ.split(b"\0"):
        if entry.startswith(MARKER):
            return entry[len(MARKER):].decode(errors="replace")
    return None


def with_cmdline(fragment: str) -> dict[int, str]:
    """Live processes whose command line contains `fragment` (for those that shed the marker: they have no
    environment to read): pid -> command line."""
    found = {}
    for entry in filter(str.isdigit, os.listdir("/proc")):
        cmdline = _cmdline(int(entry))
        if fragment in cmdline:
            found[int(entry)] = cmdline
    return found


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            return handle.read().replace(b"\0", b" ").decode(errors="replace").strip() or "?"
    except OSError:
        return "?"


def _state(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return ""
