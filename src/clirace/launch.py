"""Stage 3, launch: start target invocations, release them together, enforce deadlines, record each one.

Parallel invocations are created first and parked in a tiny `sh` shim that reports "ready" and then blocks
reading a shared pipe; closing that pipe releases every one at once, and only then does each exec the target.
Each invocation runs in its own session and process group, so a deadline ends it and everything it started;
what leaves the group (setsid) is still found by the marker in its environment (see sandbox.end_marked).
An invocation has finished when it has exited and its stdout and stderr are closed: a descendant that keeps
them open past the deadline is killed, and the invocation counts as killed at its deadline.
A program that cannot be executed is recorded as a shell would report it (exit 127 or 126), not raised.
"""
from __future__ import annotations

import itertools
import os
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field

from .history import OUTPUT_CAP, Invocation
from .sandbox import end_marked

GRACE = 1.0  # between SIGTERM and SIGKILL when a deadline passes
DRAIN_AFTER_KILL = 5.0  # how long to wait for the output pipes once everything that held them is killed
DRAIN_MOMENT = 0.2  # at least this long for the pipes to close after the process exits
INVOCATION_MARKER = "CLIRACE_INVOCATION"  # in every invocation's environment: finds what it started
_ids = itertools.count(1)


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
    marker: str = ""  # the value of INVOCATION_MARKER in its environment
    batch: list | None = None  # the invocations released together with this one (itself included)
    parked: bool = False  # it is waiting at a start barrier (False when it could not be started at all)
    wrapper: str = ""
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
        """End it and its process group: SIGTERM, then SIGKILL after a grace period.

        Invocations released together are stopped together, so the grace period is spent once, not once each.
        """
        stop_all(self.batch or [self])

    def enforce_deadline(self) -> None:
        remaining = None if self.deadline is None else max(0.0, self.deadline - time.monotonic())
        if not self.wait(remaining):
            overdue = [r for r in (self.batch or [self]) if r.proc.poll() is None]  # a batch shares its deadline
            for running in overdue:
                running.timed_out = True
            stop_all(overdue)

    def _drained(self, until: float) -> bool:
        """Wait until stdout and stderr are closed (every writer gone) or `until`; True if they are."""
        for thread in self._threads:
            thread.join(max(0.0, until - time.monotonic()))
        return not any(thread.is_alive() for thread in self._threads)

    def finish(self) -> Invocation:
        self.enforce_deadline()
        self.signal_group(signal.SIGKILL)
        # Until the deadline, and a moment more for a pipe whose writer has just exited to read as closed.
        until = max(self.deadline or 0.0, time.monotonic() + DRAIN_MOMENT)
        if not self._drained(until):
            # It exited, but something it started left its process group (setsid) and still holds its output
            # open: the invocation is not over by its deadline. End what it started, as at any deadline.
            self.timed_out = True
            end_marked(self.marker, name=INVOCATION_MARKER)
            self._drained(time.monotonic() + DRAIN_AFTER_KILL)
        ended = time.monotonic()
        code = self.proc.returncode
        return Invocation(
            label=self.label, argv=self.argv, env=self.env_changes, cwd=self.cwd,
            started=round(self.started - self.clock0, 6), ended=round(ended - self.clock0, 6),
            exit_code=code if code is not None and code >= 0 else None,
            signal=-code if code is not None and code < 0 else None,
            stdout=_text(self._out[0]), stderr=_text(self._err[0]),
            stdout_bytes=self._out[1][0], stderr_bytes=self._err[1][0], timed_out=self.timed_out,
            wrapper=self.wrapper,
        )


def describe_wrapper(wrap) -> str:
    """A short name for what runs the target (the full strace command line is noise in a report)."""
    if not wrap:
        return ""
    text = " ".join(wrap)
    for option in wrap:
        if option.startswith("inject="):
            return f"strace {option.split(':', 1)[1]}"
    return "strace (trace only)" if wrap[0] == "strace" else text


def stop_all(runnings: list[Running]) -> None:
    """End each invocation and its process group: SIGTERM to all, one grace period, then SIGKILL what is left."""
    alive = [r for r in runnings if r.proc.poll() is None]
    for running in alive:
        running.signal_group(signal.SIGTERM)
    grace_ends = time.monotonic() + GRACE
    for running in alive:
        running.wait(max(0.0, grace_ends - time.monotonic()))
    for running in alive:
        if running.proc.poll() is None:
            running.signal_group(signal.SIGKILL)
            running.wait(5)
    for running in runnings:
        running.signal_group(signal.SIGKILL)  # children left in the group


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
        _no_core_dumps()

    def _popen(self, label, argv, extra_env, prefix=(), pass_fds=(), stdin=subprocess.DEVNULL, wrap=()) -> Running:
        marker = f"{os.getpid()}:{next(_ids)}"
        env = {**self.env, **(extra_env or {}), INVOCATION_MARKER: marker}
        parked = bool(prefix)
        try:
            proc = subprocess.Popen([*prefix, *wrap, *argv], env=env, cwd=self.cwd, stdin=stdin,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
                                    pass_fds=pass_fds)
        except OSError as exc:
            if exc.filename is None:  # not about the program or its directory: clirace's own trouble
                raise
            proc, parked = _cannot_start([*wrap, *argv], exc, env), False
        running = Running(label, list(argv), {**self.env_changes, **(extra_env or {})}, self.cwd, proc, self.clock0,
                          marker=marker, parked=parked)
        running.wrapper = describe_wrapper(wrap)
        for stream, sink in ((proc.stdout, running._out), (proc.stderr, running._err)):
            thread = threading.Thread(target=_pump, args=(stream, sink), daemon=True)
            thread.start()
            running._threads.append(thread)
        return running

    def start(self, label: str, argv: list[str], extra_env: dict | None = None, timeout: float | None = None,
              stdin=subprocess.DEVNULL, wrap=()) -> Running:
        running = self._popen(label, argv, extra_env, stdin=stdin, wrap=wrap)
        running.started = time.monotonic()
        running.deadline = running.started + (timeout or self.timeout)
        return running

    def run(self, label: str, argv: list[str], extra_env: dict | None = None, timeout: float | None = None,
            wrap=()) -> Invocation:
        return self.start(label, argv, extra_env, timeout, wrap=wrap).finish()

    def start_together(self, jobs) -> list[Running]:
        """Create every process first, wait until all are parked at the barrier, then release them at once.

        jobs: (label, argv, extra env) or (label, argv, extra env, wrap), wrap being e.g. an strace prefix.
        """
        gate_r, gate_w = os.pipe()
        ready_r, ready_w = os.pipe()
        shim = f'printf . >&{ready_w}; exec {ready_w}>&-; read _ <&{gate_r}; exec {gate_r}<&- "$@"'
        runnings = []
        try:
            for label, argv, extra_env, *wrap in jobs:
                runnings.append(self._popen(label, argv, extra_env, prefix=("sh", "-c", shim, "clirace-barrier"),
                                            pass_fds=(gate_r, ready_w), wrap=wrap[0] if wrap else ()))
            os.close(ready_w)
            ready_w = -1
            _read_exactly(ready_r, sum(r.parked for r in runnings), deadline=time.monotonic() + 30)
        except BaseException:
            stop_all(runnings)
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
            running.batch = runnings
        return runnings

    def run_together(self, jobs) -> list[Invocation]:
        runnings = self.start_together(jobs)
        return [r.finish() for r in runnings]


def _cannot_start(argv: list[str], exc: OSError, env: dict[str, str]) -> subprocess.Popen:
    """A stand-in for a program that cannot be executed: it says why on stderr and exits as a shell would
    (127 not found, 126 found but not executable), so the history records it like any failed invocation."""
    code = 127 if isinstance(exc, FileNotFoundError) else 126
    reason = f"clirace: cannot execute {argv[0]}: {exc.strerror or exc}"
    if exc.filename and str(exc.filename) != argv[0]:
        reason += f" ({exc.filename})"
    return subprocess.Popen(["sh", "-c", 'printf "%s\\n" "$1" >&2; exit "$2"', "clirace-exec", reason, str(code)],
                            env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)


def _no_core_dumps() -> None:
    """Crashing targets must leave no core dump, in the sandbox or (through a core_pattern pipe) outside it:
    a soft RLIMIT_CORE of 0 in clirace, inherited by every process it starts."""
    try:
        import resource
        soft, hard = resource.getrlimit(resource.RLIMIT_CORE)
        if soft != 0:
            resource.setrlimit(resource.RLIMIT_CORE, (0, hard))
    except (ImportError, ValueError, OSError):
        pass


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
