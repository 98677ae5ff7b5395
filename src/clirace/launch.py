"""Stage 3, launch: start target invocations, release them together, enforce deadlines, record each one.

Parallel invocations are created first and parked in a tiny `sh` shim that reports "ready" and then blocks
reading a shared pipe; closing that pipe releases every one at once, and only then does each exec the target.
Each invocation runs in its own session and process group, so a deadline ends it and everything it started.
"""
from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field

from .history import Invocation

OUTPUT_CAP = 64 * 1024
GRACE = 1.0  # between SIGTERM and SIGKILL when a deadline passes


@dataclass
class Running:
    """A started invocation; `finish()` turns it into a history `Invocation`."""
    label: str
    argv: list[str]
    env_changes: dict[str, str]
    cwd: str
    proc: subprocess.Popen
    clock0: float
    started: float = 0.0
    deadline: float | None = None
    timed_out: bool = False
    _out: list = field(default_factory=lambda: [bytearray(), [0]])
    _err: list = field(default_factory=lambda: [bytearray(), [0]])
    _threads: list = field(default_factory=list)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def poll(self):
        return self.proc.poll()

    def signal_group(self, sig: int) -> None:
        try:
            os.killpg(self.proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until it exits or `timeout` passes; True if it exited."""
        try:
            self.proc.wait(timeout)
            return True
        except subprocess.TimeoutExpired:
            return False

    def stop(self) -> None:
        """End it and its process group: SIGTERM, then SIGKILL after a grace period."""
        if self.proc.poll() is None:
            self.signal_group(signal.SIGTERM)
            if not self.wait(GRACE):
                self.signal_group(signal.SIGKILL)
                self.wait(5)
        self.signal_group(signal.SIGKILL)  # children left in the group

    def enforce_deadline(self) -> None:
        remaining = None if self.deadline is None else max(0.0, self.deadline - time.monotonic())
        if not self.wait(remaining):
            self.timed_out = True
            self.stop()

    def finish(self) -> Invocation:
        self.enforce_deadline()
        self.signal_group(signal.SIGKILL)
        for thread in self._threads:
            thread.join(5)
        ended = time.monotonic()
        code = self.proc.returncode
        return Invocation(
            label=self.label, argv=self.argv, env=self.env_changes, cwd=self.cwd,
            started=round(self.started - self.clock0, 6), ended=round(ended - self.clock0, 6),
            exit_code=code if code is not None and code >= 0 else None,
            signal=-code if code is not None and code < 0 else None,
            stdout=_text(self._out[0]), stderr=_text(self._err[0]),
            stdout_bytes=self._out[1][0], stderr_bytes=self._err[1][0], timed_out=self.timed_out,
        )


def _text(data: bytearray) -> str:
    return bytes(data).decode("utf-8", errors="replace")


def _pump(stream, sink: list) -> None:
    buffer, total = sink
    while True:
        chunk = stream.read1(65536) if hasattr(stream, "read1") else stream.read(65536)
        if not chunk:
            break
        total[0] += len(chunk)
        room = OUTPUT_CAP - len(buffer)
        if room > 0:
            buffer.extend(chunk[:room])
    stream.close()


class Launcher:
    """Starts invocations of one trial. `clock0` is the trial's time origin for the history."""

    def __init__(self, env: dict[str, str], cwd: str, env_changes: dict[str, str], timeout: float):
        self.env = env
        self.cwd = cwd
        self.env_changes = env_changes
        self.timeout = timeout
        self.clock0 = time.monotonic()

    def _popen(self, label, argv, extra_env, prefix=(), pass_fds=(), stdin=subprocess.DEVNULL) -> Running:
        env = {**self.env, **(extra_env or {})}
        proc = subprocess.Popen([*prefix, *argv], env=env, cwd=self.cwd, stdin=stdin, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, start_new_session=True, pass_fds=pass_fds)
        running = Running(label, list(argv), {**self.env_changes, **(extra_env or {})}, self.cwd, proc, self.clock0)
        for stream, sink in ((proc.stdout, running._out), (proc.stderr, running._err)):
            thread = threading.Thread(target=_pump, args=(stream, sink), daemon=True)
            thread.start()
            running._threads.append(thread)
        return running

    def start(self, label: str, argv: list[str], extra_env: dict | None = None, timeout: float | None = None,
              stdin=subprocess.DEVNULL) -> Running:
        running = self._popen(label, argv, extra_env, stdin=stdin)
        running.started = time.monotonic()
        running.deadline = running.started + (timeout or self.timeout)
        return running

    def run(self, label: str, argv: list[str], extra_env: dict | None = None, timeout: float | None = None) -> Invocation:
        return self.start(label, argv, extra_env, timeout).finish()

    def start_together(self, jobs: list[tuple[str, list[str], dict | None]]) -> list[Running]:
        """Create every process first, wait until all are parked at the barrier, then release them at once."""
        gate_r, gate_w = os.pipe()
        ready_r, ready_w = os.pipe()
        shim = f'printf . >&{ready_w}; exec {ready_w}>&-; read _ <&{gate_r}; exec {gate_r}<&- "$@"'
        runnings = []
        try:
            for label, argv, extra_env in jobs:
                runnings.append(self._popen(label, argv, extra_env, prefix=("sh", "-c", shim, "clirace-barrier"),
                                            pass_fds=(gate_r, ready_w)))
            os.close(ready_w)
            ready_w = -1
            _read_exactly(ready_r, len(jobs), deadline=time.monotonic() + 30)
        except BaseException:
            for running in runnings:
                running.stop()
            raise
        finally:
            os.close(gate_r)
            os.close(ready_r)
            if ready_w >= 0:
                os.close(ready_w)
        released = time.monotonic()
        os.close(gate_w)  # every parked shim reads EOF at once and execs its target
        for running in runnings:
            running.started = released
            running.deadline = released + self.timeout
        return runnings

    def run_together(self, jobs) -> list[Invocation]:
        runnings = self.start_together(jobs)
        return [r.finish() for r in runnings]


def _read_exactly(fd: int, count: int, deadline: float) -> None:
    import select
    got = 0
    while got < count:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError(f"only {got} of {count} invocations reached the start barrier")
        readable, _, _ = select.select([fd], [], [], left)
        if readable:
            chunk = os.read(fd, count - got)
            if not chunk:
                raise RuntimeError(f"only {got} of {count} invocations reached the start barrier")
            got += len(chunk)
