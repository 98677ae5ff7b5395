"""Stage 3, launch: start target invocations, release them together, enforce deadlines, record each one.

Parallel invocations are created first and parked in a tiny `sh` shim that prints one "ready" byte on its
stdout (dropped from the record) and then blocks reading its stdin, a pipe shared by the batch; closing that
pipe releases every one at once, and only then does each exec the target, with stdin from /dev/null.
Why stdin and stdout rather than extra descriptors: a POSIX shell only redirects descriptors 0-9, and a
clirace run under another tool (time, a test runner) may have every one of 3-9 in use.
Each invocation runs in its own session and process group, so a deadline ends it and everything it started;
what leaves the group (setsid) is still found by the marker in its environment (see _ending.end_marked), and,
where the trial has a cgroup (run/_cgroup.py), by that: every process joins it before the target runs (the barrier
shim writes to `cgroup.procs` before it says ready; a single start does it in the child before exec).
An invocation has finished when it has exited and its stdout and stderr are closed: a descendant that keeps
them open past the deadline is killed, and the invocation counts as killed at its deadline.
A program that cannot be executed is recorded as a shell would report it (exit 127 or 126), not raised.
"""
from __future__ import annotations

import contextlib
import errno
import itertools
import os
import re
import selectors
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import IO, Any, Literal

from clirace.history import OUTPUT_CAP, Invocation
from clirace.run import procfs
from clirace.run._ending import end_marked, in_groups, kill_until_gone
from clirace.run._waits import exit_within

GRACE = 1.0  # between SIGTERM and SIGKILL when a deadline passes
# A deadline counts the command's own time, not the time it spent runnable but queued for a CPU: on a loaded
# machine (a CI runner beside other jobs) a command that needs 0.4 s of CPU was seen queued 9.6 s of its 10 s.
# At its deadline it gets that queued time again, and again, while the queued time grows by more than STRETCH_MIN
# of its timeout, up to STRETCH times its timeout in all: a starved command answers, a hung one (asleep, or
# spinning on a free CPU) is still killed at its deadline.
STRETCH, STRETCH_MIN = 3.0, 0.05
DRAIN_AFTER_KILL = 5.0  # how long to wait for the output pipes once everything that held them is killed
DRAIN_MOMENT = 0.2  # at least this long for the pipes to close after the process exits
INVOCATION_MARKER = "CLIRACE_INVOCATION"  # in every invocation's environment: finds what it started
# clirace's own shell, by absolute path: the target's environment may set a PATH without it (tool.env.PATH).
SH = shutil.which("sh") or "/bin/sh"
# The start barrier (see the module docstring): say ready, wait for EOF on stdin, then exec the target.
BARRIER = (SH, "-c", 'printf .; read _; exec </dev/null "$@"', "clirace-barrier")
# The same, first joining the cgroup whose cgroup.procs is $0 (an error there must not stop the start).
_BARRIER_INTO = '{ echo 0 >"$0"; } 2>/dev/null; printf .; read _; exec </dev/null "$@"'
# strace's own messages (a warning, "Can't stat ...") must never read as the target's output: a shell gives strace
# a log of its own as its stderr and keeps the real one on fd 3, and the shell that strace starts (traced, but it
# makes no call that matters: dup2, close, exec) hands it back to the target before exec'ing it.
STRACE_APART = (SH, "-c", 'exec 3>&2 2>>"$0"; exec "$@"')
TARGET_STDERR = (SH, "-c", 'exec 2>&3 3>&-; exec "$@"', "clirace-target")
WRAPPER_SAID_CAP = 4096  # bytes of strace's own messages kept in the invocation's record
_ids = itertools.count(1)
# One job of a batch started together: (label, argv, extra env) or (label, argv, extra env, wrap).
Job = tuple[str, Sequence[str], dict[str, str] | None] | tuple[str, Sequence[str], dict[str, str] | None, Sequence[str]]
Preexec = Callable[[], None]


FDS_PER_INVOCATION = 8  # a generous bound: stdout and stderr pipes, the barrier pipe, a memfd for strace's messages
FDS_BESIDE_ROUNDS = 256  # clirace's own: imports, the run folder, servers, the watchdog's pipe


def allow_width(parallel: int) -> None:
    """Make room for `parallel` invocations at once: raise the soft limit on open files up to the hard one, or
    refuse the width in words the user can act on (a UsageError, exit 2) before anything runs."""
    import resource

    from clirace.errors import UsageError

    need = parallel * FDS_PER_INVOCATION + FDS_BESIDE_ROUNDS
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < need:
        if hard != resource.RLIM_INFINITY and hard < need:
            raise UsageError(
                f"{parallel} invocations at once need about {need} open files, and this machine allows this "
                f"process {hard} (the hard limit of `ulimit -n`).", where="--parallel",
                hint=f"Lower --parallel to {max(2, (hard - FDS_BESIDE_ROUNDS) // FDS_PER_INVOCATION)} or less, or "
                     "raise the hard limit (limits.conf, systemd's LimitNOFILE, `ulimit -Hn` as root).")
        resource.setrlimit(resource.RLIMIT_NOFILE, (need, hard))


def strace_apart(wrap: Sequence[str]) -> tuple[list[str], int | None]:
    """`wrap`, an strace prefix ending in "--", with strace's stderr sent to a log of its own, and an fd on that
    log (the caller closes it); any other wrap unchanged, with None.

    The log has no name anywhere (a memfd): the shell opens it as /proc/<clirace>/fd/N, so no link or FIFO a
    target plants can stand where it is written or read back (a `*-strace.log` beside the trace once could)."""
    wrap = list(wrap)
    if not wrap or os.path.basename(wrap[0]) != "strace" or "--" not in wrap or "-o" not in wrap:
        return wrap, None
    if wrap[wrap.index("-o") + 1] == os.devnull:
        return [*STRACE_APART, os.devnull, *wrap, *TARGET_STDERR], None
    fd = os.memfd_create("clirace-strace-said", os.MFD_CLOEXEC)
    return [*STRACE_APART, f"/proc/{os.getpid()}/fd/{fd}", *wrap, *TARGET_STDERR], fd


@dataclass
class Running:
    """A started invocation; `finish()` turns it into a history `Invocation`."""
    label: str
    argv: list[str]
    env_changes: dict[str, str]
    cwd: str
    proc: subprocess.Popen[bytes]
    clock0: float
    started: float = 0.0
    deadline: float | None = None
    timeout: float = 0.0  # the deadline's own length, before any stretch for time queued for a CPU ...
    counted_from: float = 0.0  # ... and when it began (set_deadline)
    queued: float = 0.0  # the time queued for a CPU that its deadline already gave back (STRETCH)
    timed_out: bool = False
    cpu: tuple[float, float] | None = None  # at its deadline: its processes' seconds on a CPU and queued for one
    asleep_in: str = ""  # at its deadline: the kernel functions its sleeping processes were in
    marker: str = ""  # the value of INVOCATION_MARKER in its environment
    batch: list[Running] | None = None  # the invocations released together with this one (itself included)
    parked: bool = False  # it is waiting at a start barrier (False when it could not be started at all)
    wrapper: str = ""
    wrapper_log: int | None = None  # an fd on the wrapper's own messages (strace_apart), None when it has no log
    ended_by: str = ""  # why clirace stopped it, when it did so on purpose (not at a deadline)
    # What it printed (up to OUTPUT_CAP) and, in the one-item list the pump thread updates, how many bytes in all.
    _out: tuple[bytearray, list[int]] = field(default_factory=lambda: (bytearray(), [0]))
    _err: tuple[bytearray, list[int]] = field(default_factory=lambda: (bytearray(), [0]))
    _open_streams: int = 2
    unread: str = ""  # why a stream of its output could not be read to its end, "" when all could (the pump)
    terminal: int | None = None  # the pty's master side, when it runs on a pseudo-terminal
    output: tuple[IO[bytes] | None, IO[bytes] | None] = (None, None)  # the read ends of its stdout and stderr pipes
    _closed: threading.Event = field(default_factory=threading.Event)
    _ready: threading.Event = field(default_factory=threading.Event)  # its barrier shim printed its ready byte

    def _stream_closed(self) -> None:
        self._open_streams -= 1  # only the pump thread calls this
        self._ready.set()  # a shim that died before saying ready must not hold up the batch
        if self._open_streams == 0:
            self._closed.set()

    @property
    def pid(self) -> int:
        return self.proc.pid

    def poll(self) -> int | None:
        return self.proc.poll()

    def signal_group(self, sig: int) -> None:
        try:
            os.killpg(self.proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until it exits or `timeout` passes; True if it exited.

        Popen.wait(timeout) polls with sleeps of up to 50 ms; a pidfd wakes the moment the process exits,
        which matters when a round's invocations are collected one after another.
        """
        if timeout is not None and self.proc.returncode is None and exit_within(self.proc.pid, timeout) is not None:
            return self.proc.poll() is not None
        try:
            self.proc.wait(timeout)
            return True
        except subprocess.TimeoutExpired:
            return False

    def stop(self, why: str = "") -> None:
        """End it and its process group: SIGTERM, then SIGKILL after a grace period.

        Invocations released together are stopped together, so the grace period is spent once, not once each.
        """
        self.ended_by = self.ended_by or why
        stop_all(self.batch or [self])

    def enforce_deadline(self) -> None:
        while not self.wait(None if self.deadline is None else max(0.0, self.deadline - time.monotonic())):
            overdue = [r for r in (self.batch or [self]) if r.proc.poll() is None]  # a batch shares its deadline
            groups = procfs.groups(r.pid for r in overdue)
            spent = {pid: procfs.cpu_times(group) for pid, group in groups.items()}
            if self._stretched(max((s[1] for s in spent.values() if s), default=0.0)):
                continue
            for running in overdue:  # hung (and on what), or starved beyond what a stretch gives back
                running.timed_out = True
                running.cpu, running.asleep_in = spent[running.pid], procfs.asleep_in(groups[running.pid])
            stop_all(overdue)
            return

    def set_deadline(self, seconds: float, start: float | None = None) -> None:
        """Its deadline: `seconds` from `start` (now), stretched by the time it then spends queued for a CPU."""
        self.counted_from = time.monotonic() if start is None else start
        self.timeout, self.deadline = seconds, self.counted_from + seconds

    def _stretched(self, queued: float) -> bool:
        """Whether the deadline (the batch's: shared) moved on by the time queued for a CPU since it was last set."""
        more = queued - self.queued
        if self.deadline is None or not self.timeout or more < STRETCH_MIN * self.timeout:
            return False
        later = min(self.deadline + more, self.counted_from + STRETCH * self.timeout)
        if later <= self.deadline:
            return False
        for running in self.batch or [self]:
            running.deadline, running.queued = later, queued
        return True

    def _drained(self, until: float) -> bool:
        """Wait until stdout and stderr are closed (every writer gone) or `until`; True if they are."""
        return self._closed.wait(max(0.0, until - time.monotonic()))

    def printed(self) -> str:
        """What it has printed so far on stdout (on a terminal: everything it printed)."""
        return _text(self._out[0])

    def printed_on(self, stream: str) -> str:
        return _text((self._err if stream == "stderr" and self.terminal is None else self._out)[0])

    def type_interrupt(self) -> None:
        """Ctrl-C on its terminal: the line discipline sends SIGINT to its foreground process group."""
        if self.terminal is not None:
            os.write(self.terminal, b"\x03")

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
        if self.terminal is not None and self._closed.is_set():
            terminal, self.terminal = self.terminal, None  # before the close: a finish called again closes nothing
            os.close(terminal)
        code = self.proc.returncode
        return Invocation(
            label=self.label, argv=tuple(self.argv), env=dict(self.env_changes), cwd=self.cwd,
            started=round(self.started - self.clock0, 6), ended=round(ended - self.clock0, 6),
            exit_code=code if code is not None and code >= 0 else None,
            signal=-code if code is not None and code < 0 else None,
            stdout=_text(self._out[0]), stderr=_text(self._err[0]),
            stdout_bytes=self._out[1][0], stderr_bytes=self._err[1][0], timed_out=self.timed_out,
            wrapper=self.wrapper, ended_by=self.ended_by if code is not None and code < 0 else "",
            wrapper_said=self._take_said(), unread=self.unread,
            cpu_used=round(self.cpu[0], 3) if self.cpu else None, cpu_wait=round(self.cpu[1], 3) if self.cpu else None,
            asleep_in=self.asleep_in,
        )

    def _take_said(self) -> str:
        log, self.wrapper_log = self.wrapper_log, None
        return _said(log)


def _said(log: int | None) -> str:
    """The end of what a wrapper wrote to its own log (strace's warnings), "" without one; the fd is closed."""
    if log is None:
        return ""
    try:
        return _text(bytearray(os.pread(log, WRAPPER_SAID_CAP, max(0, os.fstat(log).st_size - WRAPPER_SAID_CAP))))
    except OSError:
        return ""
    finally:
        os.close(log)


def describe_wrapper(wrap: Sequence[str]) -> str:
    """A short name for what runs the target (the full strace command line is noise in a report)."""
    if not wrap:
        return ""
    text = " ".join(wrap)
    for option in wrap:
        if option.startswith("inject="):
            return f"strace {option.split(':', 1)[1]}"
    return "strace (trace only)" if os.path.basename(wrap[0]) == "strace" else text


def stop_all(runnings: list[Running]) -> None:
    """End each invocation and its process group: SIGTERM to all, one grace period, then SIGKILL what is left;
    returns once every process of the groups has exited."""
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
    # ... and gone before anything reads or removes what they wrote: a killed child first finishes its call
    kill_until_gone(lambda: in_groups([running.pid for running in runnings]))


def _text(data: bytearray) -> str:
    return bytes(data).decode("utf-8", errors="replace")


class _Pump:
    """One thread reads the stdout and stderr of every invocation, through a selector.

    Why not two threads per invocation: starting 16 threads for a batch of 8 costs more than starting the
    8 processes on a busy 2-core machine. Output beyond OUTPUT_CAP is read and counted, never kept, so a
    target printing without end neither blocks nor fills memory.
    """

    _shared: _Pump | None = None
    _guard = threading.Lock()

    @classmethod
    def shared(cls) -> _Pump:
        with cls._guard:
            if cls._shared is None:
                cls._shared = cls()
            return cls._shared

    def __init__(self) -> None:
        self.selector = selectors.DefaultSelector()
        self.wake_r, self.wake_w = os.pipe()
        os.set_blocking(self.wake_r, False)
        self.selector.register(self.wake_r, selectors.EVENT_READ, None)
        # (stream, its sink, whose, whether its first byte is the barrier shim's ready byte), not yet selected
        self.pending: list[tuple[IO[bytes], tuple[bytearray, list[int]], Running, bool]] = []
        self.lock = threading.Lock()
        threading.Thread(target=self._loop, daemon=True, name="clirace-output-pump").start()

    def add(self, running: Running) -> None:
        with self.lock:
            if running.terminal is not None:  # a pty: one stream, stdout and stderr merged
                self.pending += [(os.fdopen(running.terminal, "rb", buffering=0, closefd=False), running._out,
                                  running, False)]
                running._open_streams = 1
            else:
                stdout, stderr = running.output
                assert stdout is not None and stderr is not None  # (a pipe each, clirace's or the stand-in's)
                self.pending += [(stdout, running._out, running, running.parked),
                                 (stderr, running._err, running, False)]
        os.write(self.wake_w, b"\0")

    def _loop(self) -> None:
        while True:
            for key, _ in self.selector.select():
                if key.data is None:
                    self._register_pending()
                    continue
                try:
                    self._read(key)
                except Exception as exc:  # noqa: BLE001 - one stream's trouble must not end the thread all need
                    self._end(key.data[0], key.data[2], f"could not be read to its end ({type(exc).__name__}: {exc})",
                              key.fd)

    def _register_pending(self) -> None:
        try:
            os.read(self.wake_r, 4096)
        except BlockingIOError:
            pass
        with self.lock:
            pending, self.pending = self.pending, []
        for stream, sink, running, ready_byte in pending:
            try:
                self.selector.register(stream.fileno(), selectors.EVENT_READ, [stream, sink, running, ready_byte])
            except Exception as exc:  # noqa: BLE001 - (a closed stream, an fd epoll refuses): that stream alone
                # (A KeyError: its fd was closed and its number is now a watched stream's: not this one's to close.)
                self._end(stream, running, f"could not be read: clirace could not watch it ({type(exc).__name__}: "
                          f"{exc})", close=not isinstance(exc, KeyError))

    def _end(self, stream: IO[bytes], running: Running, why: str = "", fd: int | None = None,
             close: bool = True) -> None:
        """Stop reading one stream: unregistered (`fd`, when it was registered), closed, and counted closed, so
        that its invocation completes; `why`, when it could not be read to its end, goes in its record."""
        if fd is not None:
            with contextlib.suppress(KeyError, ValueError):  # (already unregistered: a read that failed late)
                self.selector.unregister(fd)
        if close:
            with contextlib.suppress(OSError):
                stream.close()
        if why:
            name = "output" if running.terminal is not None else "stdout" if stream is running.output[0] else "stderr"
            running.unread += ("; " if running.unread else "") + f"its {name} {why}"
        running._stream_closed()

    def _read(self, key: selectors.SelectorKey) -> None:
        stream, (buffer, total), running, ready_byte = key.data
        try:
            chunk = os.read(key.fd, 65536)
        except OSError as exc:
            if exc.errno != errno.EIO or running.terminal is None:
                raise
            chunk = b""  # a terminal whose other side is closed (every process on it gone): its end
        if chunk:
            if ready_byte:  # the barrier shim's "ready", not the target's output
                key.data[3] = False
                chunk = chunk[1:]
                running._ready.set()
            total[0] += len(chunk)
            room = OUTPUT_CAP - len(buffer)
            if room > 0:
                buffer.extend(chunk[:room])
            return
        self._end(stream, running, fd=key.fd)


class Launcher:
    """Starts invocations of one trial. `clock0` is the trial's time origin for the history."""

    def __init__(self, env: dict[str, str], cwd: str, env_changes: dict[str, str], timeout: float,
                 cgroup: str | None = None) -> None:
        self.env = env
        self.cwd = cwd
        self.env_changes = env_changes
        self.timeout = timeout
        self.cgroup = cgroup  # the cgroup.procs file of the trial's cgroup, which every process joins
        self.clock0 = time.monotonic()
        _no_core_dumps()

    def _popen(self, label: str, argv: Sequence[str], extra_env: dict[str, str] | None,
               prefix: Sequence[str] = (), stdin: int | IO[Any] = subprocess.DEVNULL, wrap: Sequence[str] = (),
               pty: bool = False) -> Running:
        marker = f"{os.getpid()}:{next(_ids)}"
        env = {**self.env, **(extra_env or {}), INVOCATION_MARKER: marker}
        parked = bool(prefix)
        terminal = out = err = None
        take_terminal: Preexec | None = None
        join: Preexec | None = None
        # The child's stdin, stdout and stderr are clirace's own descriptors, never subprocess's PIPE or DEVNULL:
        # Popen closes what it made for the child through an ExitStack and notes that it did only afterwards, so a
        # Ctrl-C or SIGTERM acted on in between had its clean-up close them again, whatever another thread had been
        # given those numbers meanwhile. What it is given, it never closes.
        ends: tuple[int, ...]  # the child's ends, closed here once it has them
        if pty:
            terminal, slave, take_terminal = _open_terminal()
            stdin, ends = slave, (slave,)
        else:
            (out, out_end), (err, err_end) = os.pipe(), os.pipe()
            ends = (out_end, err_end)
        if stdin == subprocess.DEVNULL:
            stdin = _devnull()
        apart, log = strace_apart(wrap)
        dies: Preexec | None = None
        if parked:
            # A parallel batch goes without the parent-death signal: its processes are ended by the run's
            # watchdog. Its barrier shim joins the cgroup.
            prefix = (SH, "-c", _BARRIER_INTO, self.cgroup) if self.cgroup else prefix
        elif not pty and _startable([*apart, *argv][0], env, self.cwd):
            prefix = _dying_with(self.cgroup)  # the signal and the cgroup without preexec_fn (see _dying_with)
        else:  # (a terminal's preexec_fn forks anyway; a program that may not start fails as subprocess says)
            dies, join = die_with_parent(), _joiner(self.cgroup) if self.cgroup else None
        try:
            try:
                proc = subprocess.Popen([*prefix, *apart, *argv], env=env, cwd=self.cwd, start_new_session=True,
                                        preexec_fn=_chain(join, dies, take_terminal), stdin=stdin,
                                        stdout=ends[0], stderr=ends[-1])
            finally:
                for end in ends:
                    os.close(end)  # the child has them now (the terminal's other side, or the pipes' write ends)
        except OSError as exc:
            if exc.filename is None:  # not about the program or its directory: clirace's own trouble
                for fd in (log, out, err):
                    if fd is not None:
                        os.close(fd)
                raise
            proc, parked = _cannot_start([*wrap, *argv], exc, env), False  # with pipes of its own
            for fd in (terminal, out, err):
                if fd is not None:
                    os.close(fd)
            terminal = out = err = None
        output = (os.fdopen(out, "rb", buffering=0), os.fdopen(err, "rb", buffering=0)) if out is not None and \
            err is not None else (proc.stdout, proc.stderr)
        running = Running(label, list(argv), {**self.env_changes, **(extra_env or {})}, self.cwd, proc, self.clock0,
                          marker=marker, parked=parked, terminal=terminal, output=output)
        running.wrapper = describe_wrapper(wrap) or ("on a pseudo-terminal (stdout and stderr merged)" if pty else "")
        running.wrapper_log = log
        _Pump.shared().add(running)
        return running

    def start(self, label: str, argv: Sequence[str], extra_env: dict[str, str] | None = None,
              timeout: float | None = None, stdin: int | IO[Any] = subprocess.DEVNULL, wrap: Sequence[str] = (),
              pty: bool = False) -> Running:
        """Start one invocation now; with `pty`, on a pseudo-terminal of its own (for a real Ctrl-C)."""
        running = self._popen(label, argv, extra_env, stdin=stdin, wrap=wrap, pty=pty)
        running.started = time.monotonic()
        running.set_deadline(timeout or self.timeout, running.started)
        return running

    def run(self, label: str, argv: Sequence[str], extra_env: dict[str, str] | None = None,
            timeout: float | None = None, wrap: Sequence[str] = ()) -> Invocation:
        return self.start(label, argv, extra_env, timeout, wrap=wrap).finish()

    def start_together(self, jobs: Iterable[Job], timeout: float | None = None) -> list[Running]:
        """Create every process first, wait until all are parked at the barrier, then release them at once.

        jobs: (label, argv, extra env) or (label, argv, extra env, wrap), wrap being e.g. an strace prefix.
        """
        gate_r, gate_w = os.pipe()
        runnings: list[Running] = []
        try:
            for label, argv, extra_env, *wrap in jobs:
                runnings.append(self._popen(label, argv, extra_env, prefix=BARRIER,
                                            stdin=gate_r, wrap=wrap[0] if wrap else ()))
            deadline = time.monotonic() + 30
            for running in runnings:
                if not running._ready.wait(max(0.0, deadline - time.monotonic())):
                    raise TimeoutError(f"{running.label} did not reach the start barrier within 30 s")
        except BaseException:
            os.close(gate_w)
            stop_all(runnings)
            raise
        finally:
            os.close(gate_r)
        released = time.monotonic()
        os.close(gate_w)  # every parked shim reads EOF at once and execs its target
        for running in runnings:
            running.started = released
            running.set_deadline(timeout or self.timeout, released)
            running.batch = runnings
        return runnings

    def run_together(self, jobs: Iterable[Job]) -> list[Invocation]:
        runnings = self.start_together(jobs)
        return [r.finish() for r in runnings]


_null: int | None = None
_null_guard = threading.Lock()


def _devnull() -> int:
    """An fd on /dev/null, opened once and kept: every child given "no stdin" gets it (see _popen)."""
    global _null
    with _null_guard:
        if _null is None:
            _null = os.open(os.devnull, os.O_RDWR | os.O_CLOEXEC)  # as subprocess.DEVNULL opens it
        return _null


def _cannot_start(argv: list[str], exc: OSError, env: dict[str, str]) -> subprocess.Popen[bytes]:
    """A stand-in for a program that cannot be executed: it says why on stderr and exits as a shell would
    (127 not found, 126 found but not executable), so the history records it like any failed invocation."""
    code = 127 if isinstance(exc, FileNotFoundError) else 126
    reason = f"clirace: cannot execute {argv[0]}: {exc.strerror or exc}"
    if exc.filename and str(exc.filename) != argv[0]:
        reason += f" ({exc.filename})"
    return subprocess.Popen([SH, "-c", 'printf "%s\\n" "$1" >&2; exit "$2"', "clirace-exec", reason, str(code)],
                            env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)


def _chain(*given: Preexec | None) -> Preexec | None:
    """One preexec function that runs those given (None where none is)."""
    steps = [step for step in given if step is not None]
    if not steps:
        return None

    def run() -> None:
        for step in steps:
            step()
    return run


def _joiner(procs: str) -> Preexec:
    """A preexec function that moves the child into the cgroup whose cgroup.procs is `procs` ("0": the writer
    itself). Failing to join must not stop the start."""
    def join() -> None:
        try:
            fd = os.open(procs, os.O_WRONLY | os.O_CLOEXEC)
        except OSError:
            return
        try:
            os.write(fd, b"0")
        except OSError:
            pass
        finally:
            os.close(fd)
    return join


def _open_terminal() -> tuple[int, int, Preexec]:
    """A new pseudo-terminal for one invocation: (master fd, slave fd, preexec function).

    The child is a session leader (start_new_session) and makes the terminal its controlling one, so Ctrl-C
    typed on it reaches its foreground process group as a real terminal would send it. Echo is off, so
    what clirace types does not show up as the target's output."""
    import fcntl
    import pty
    import termios

    master, slave = pty.openpty()
    attrs = termios.tcgetattr(slave)
    attrs[3] &= ~termios.ECHO
    termios.tcsetattr(slave, termios.TCSANOW, attrs)

    def take_terminal() -> None:
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    return master, slave, take_terminal


SETPRIV = shutil.which("setpriv")  # util-linux: sets the parent-death signal, then execs what follows
# Run by setpriv (the signal already set): join the trial's cgroup ($0, "" without one), then make sure the parent
# is still clirace ($1), as die_with_parent's preexec does (a clirace that died before the signal was set would
# never send it), then exec the command.
_DYING_WITH = ('[ -z "$0" ] || { echo 0 >"$0"; } 2>/dev/null; [ "$PPID" = "$1" ] || kill -9 $$; shift; '
               'exec "$@"')


def _dying_with(cgroup: str | None) -> tuple[str, ...]:
    """A prefix that does what die_with_parent's and _joiner's preexec functions do, in the child after its
    start rather than before: with no preexec_fn, subprocess starts the child by vfork, at about a seventh of
    the CPU of forking this whole interpreter (measured: 1 ms against 7.5 ms a start, parent and child, in a
    54 MB clirace); a check starts about 150 invocations one at a time. Empty where setpriv is missing."""
    if SETPRIV is None:
        return ()
    return (SETPRIV, "--pdeathsig", "KILL", "--", SH, "-c", _DYING_WITH, cgroup or "", str(os.getpid()))


def _startable(program: str, env: dict[str, str], cwd: str) -> bool:
    """Whether `program` would start as subprocess would exec it: a regular executable file found as exec finds
    it (the environment's PATH for a bare name), a binary (ELF) or a script whose `#!` interpreter exists.
    Only then does the start go through _dying_with's prefix: a program that cannot be executed must fail as
    subprocess reports it (recorded by _cannot_start), not as the shell of the prefix would (a shell runs a file
    with no `#!` as a script of its own)."""
    if SETPRIV is None:
        return False
    if "/" in program:
        found: str | None = os.path.join(cwd, program)
    else:
        found = shutil.which(program, path=os.pathsep.join(os.get_exec_path(env)))
        found = found and os.path.join(cwd, found)
    if not found or not os.path.isfile(found) or not os.access(found, os.X_OK):
        return False
    try:
        with open(found, "rb") as handle:
            head = handle.read(256)
    except OSError:
        return False
    if head.startswith(b"\x7fELF"):
        return True
    if not head.startswith(b"#!") or b"\n" not in head:
        return False
    interpreter = re.split(rb"[ \t]", head[2:head.index(b"\n")].lstrip(b" \t"))[0]  # as the kernel reads it
    return bool(interpreter) and os.path.isfile(interpreter) and os.access(interpreter, os.X_OK)


PR_SET_PDEATHSIG = 1  # linux/prctl.h


def die_with_parent() -> Preexec | None:
    """A preexec_fn that has the kernel SIGKILL the child when clirace dies (PR_SET_PDEATHSIG), kept across
    exec; None where prctl is not available. Set up here, in the parent, so that the child only makes the call.

    Why: a SIGKILLed clirace runs no cleanup; its direct children (a parked holder, a read, a setup command)
    would otherwise run on. The signal comes when the thread that started the child ends, which in clirace is
    the thread that runs the trial and outlives its processes.
    """
    global _prctl
    if _prctl is None:
        try:
            import ctypes
            _prctl = ctypes.CDLL(None, use_errno=True).prctl
        except (OSError, AttributeError):
            _prctl = False
    if not _prctl:
        return None
    prctl, parent = _prctl, os.getpid()

    def preexec() -> None:
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent:  # clirace died before the call took effect
            os.kill(os.getpid(), signal.SIGKILL)
    return preexec


_prctl: Callable[..., int] | Literal[False] | None = None  # None: not looked up yet; False: not available


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
