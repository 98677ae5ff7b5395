"""Keeping the tool's lock busy, three ways (spec `lock.hold`):

- command: a test hook of the tool that takes the lock and waits for {release_file};
- park: a real invocation, parked while it reads a state file that clirace has replaced by a named pipe
  (the tool reads that file after taking its lock, so while it waits on the pipe it holds the lock);
- take: clirace takes the lock itself, the way the tool does (no tool process holds it).

The first two make the tool itself the holder, so they can also end it normally, with an error, or by a
signal (SIGINT arrives as a real Ctrl-C through a pseudo-terminal).
"""
from __future__ import annotations

import errno
import fcntl
import os
import re
import signal
import stat
import time
from pathlib import Path

import pexpect

from ..history import Invocation
from ..sandbox import pids, stat_fields
from ._box import Box, TrialFailed

POLL = 0.005


class Holder:
    def __init__(self, box: Box, pty: bool = False):
        self.box = box
        self.hold = box.spec.lock.hold
        self.pty = pty
        self.running = None  # launch.Running, or a pexpect child when pty
        self.invocation: Invocation | None = None
        self._fd = None  # the FIFO's write end (park) or clirace's own lock (take)
        self._fifo_id = None
        self._pty_log: list[str] = []
        io = box.sandbox.root / "io"
        self.ready_file, self.release_file = io / "hold.ready", io / "hold.release"

    # ------------------------------------------------------------------------------------------- start
    def start(self) -> float:
        """Take the lock (through the tool, or directly); returns seconds until it was held."""
        t0 = time.monotonic()
        if self.hold.how == "take":
            self._take()
        elif self.hold.how == "park":
            self._park()
        else:
            self._start_command()
        return time.monotonic() - t0

    def _spawn(self, sub, **extra):
        argv = self.box.argv(sub, **extra)
        if not self.pty:
            self.running = self.box.start("holder", sub, **extra)
            return
        env = self.box.env
        child = pexpect.spawn(argv[0], argv[1:], env=env, cwd=self.box.launcher.cwd, timeout=None,
                              encoding="utf-8", codec_errors="replace", echo=False)
        child.started_at, child.argv = time.monotonic(), argv
        self.running = child

    def _alive(self) -> bool:
        if self.pty:
            return self.running.isalive()
        return self.running.poll() is None

    def _start_command(self):
        hold_seconds = self.box.spec.lock.prompt + self.box.spec.lock.wait + 5
        self._spawn(self.hold.command, ready_file=self.ready_file, release_file=self.release_file,
                    hold_seconds=f"{hold_seconds:g}")
        kind, value = self.hold.ready
        deadline = time.monotonic() + self.box.spec.timeout
        if kind == "delay":
            time.sleep(value)
            if not self._alive():
                self._not_ready("it exited during the ready delay")
            return
        pattern = re.compile(value) if kind in ("stdout", "stderr") else None
        if pattern is not None and self.pty:  # a terminal merges both streams
            try:
                self.running.expect(pattern, timeout=self.box.spec.timeout)
                self._pty_log.append(self.running.before + self.running.after)
                return
            except pexpect.EOF:
                self._not_ready("it exited before signalling readiness")
            except pexpect.TIMEOUT:
                self._not_ready(f"no readiness signal ({kind}: {value}) within {self.box.spec.timeout:g}s")
        path = Path(self.box.path(value, ready_file=self.ready_file)) if kind == "file" else None
        while time.monotonic() < deadline:
            if path is not None and path.exists():
                return
            if pattern is not None and pattern.search(self._output(kind)):
                return
            if not self._alive():
                self._not_ready("it exited before signalling readiness")
            time.sleep(POLL)
        self._not_ready(f"no readiness signal ({kind}: {value}) within {self.box.spec.timeout:g}s")

    def _output(self, stream: str) -> str:
        sink = self.running._out if stream == "stdout" else self.running._err
        return bytes(sink[0]).decode("utf-8", errors="replace")

    def _park(self):
        path = Path(self.box.path(self.hold.fifo))
        if self.hold.content is not None:
            self.content = self.hold.content
        else:
            self.content = path.read_text() if path.is_file() else ""
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.exists() or path.is_symlink():
            path.unlink()
        os.mkfifo(path, 0o600)
        st = path.stat()
        self._fifo_path, self._fifo_id = path, (st.st_dev, st.st_ino)
        self._spawn(self.hold.command)
        deadline = time.monotonic() + self.box.spec.timeout
        while time.monotonic() < deadline:
            try:
                self._fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
                self._settle(deadline)
                return  # the holder has the pipe open for reading: it is past its lock and parked
            except OSError as exc:
                if exc.errno != errno.ENXIO:
                    raise
            if not self._alive():
                self._not_ready(f"it exited without opening {path} (is it a file the command reads after locking?)")
            time.sleep(POLL)
        self._not_ready(f"it never opened {path} within {self.box.spec.timeout:g}s")

    def _settle(self, deadline: float) -> None:
        """Wait until the parked reader is asleep in its read of the pipe, not merely past open().

        Why: a signal landing between open() and read() is noted by Python but acted on only after the
        read, which never returns while the pipe stays open, so a holder that handles Ctrl-C would look as
        if it ignored it. The kernel names where a process sleeps in /proc/PID/wchan (anon_pipe_read,
        pipe_read or pipe_wait, by kernel version); where that is not readable, a short pause stands in.
        """
        pid = self.running.pid
        while time.monotonic() < deadline:
            readers = [proc for proc in _group(pid) if _has_open(proc, self._fifo_id)]
            states = [_wchan(proc) for proc in readers]
            if any("pipe" in state for state in states):
                return
            if readers and all(state in ("", "0") for state in states):
                time.sleep(0.1)  # wchan hidden here: give the reader time to reach its read()
                return
            if not self._alive():
                return  # judged by whoever waits for it next
            time.sleep(POLL / 5)

    def _take(self):
        path = Path(self.box.path(self.hold.path))
        path.parent.mkdir(parents=True, exist_ok=True)
        if self.hold.kind == "exclusive-create":
            content = self.box.path(self.hold.content, pid=os.getpid(), now=int(time.time()))
            try:
                fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                raise TrialFailed(f"clirace could not take the lock: {path} already exists after setup") from None
            os.write(fd, content.encode())
            os.close(fd)
            self._lock_path = path
            return
        self._fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o644)
        try:
            if self.hold.kind == "flock":
                fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            else:
                fcntl.lockf(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            raise TrialFailed(f"clirace could not take the {self.hold.kind} lock on {path}: it is held") from None

    def _not_ready(self, why: str):
        inv = self.end(signal.SIGKILL, "sent by clirace because it never showed that it held the lock")
        raise TrialFailed(f"the lock holder never held the lock: {why} ({inv.outcome()}; {inv.printed()})")

    # ---------------------------------------------------------------------------------------- observe
    def reached_by(self, pid: int) -> bool:
        """Whether a process in `pid`'s process group has the parked pipe open (it reads unlocked state)."""
        if self._fifo_id is None:
            return False
        return any(_has_open(proc, self._fifo_id) for proc in _group(pid))

    # -------------------------------------------------------------------------------------------- end
    def release(self, invalid: bool = False) -> Invocation | None:
        """Let the holder finish normally (or, with `invalid`, feed it content that makes it fail)."""
        if self.hold.how == "take":
            self._untake()
            return None
        if self.hold.how == "park":
            self._restore()
            os.write(self._fd, (self.hold.invalid_content if invalid else self.content).encode())
            os.close(self._fd)
            self._fd = None
        else:
            self.release_file.touch()
        return self.wait(self.box.spec.timeout)

    def interrupt(self, sig: int, wait: float) -> Invocation:
        """Stop the holder with `sig` (SIGINT as Ctrl-C on its terminal when pty); wait for it to exit."""
        if self.pty and sig == signal.SIGINT:
            self.running.sendintr()
        elif self.pty:
            self.running.kill(sig)
        else:
            try:
                os.killpg(self.running.pid, sig)
            except ProcessLookupError:
                pass
        inv = self.wait(wait)
        if inv.signal == sig:
            inv.ended_by = f"sent by clirace{' as Ctrl-C on its terminal' if self.pty and sig == signal.SIGINT else ''}"
        self._restore()
        return inv

    def wait(self, timeout: float) -> Invocation:
        """Wait for the holder to exit; if it does not within `timeout`, the invocation says timed_out."""
        if self.invocation:
            return self.invocation
        if self.pty:
            child = self.running
            try:
                child.expect(pexpect.EOF, timeout=timeout)
                child.close()
                timed_out = False
            except pexpect.TIMEOUT:
                timed_out = True
                child.kill(signal.SIGKILL)
                child.close(force=True)
            out = "".join(self._pty_log) + (child.before if isinstance(child.before, str) else "")
            self.invocation = Invocation(
                label="holder", argv=child.argv, env=self.box.launcher.env_changes, cwd=self.box.launcher.cwd,
                started=round(child.started_at - self.box.launcher.clock0, 6),
                ended=round(time.monotonic() - self.box.launcher.clock0, 6),
                exit_code=child.exitstatus, signal=child.signalstatus, stdout=out, stderr="(merged into stdout: pty)",
                timed_out=timed_out)
        else:
            self.running.deadline = time.monotonic() + timeout
            self.invocation = self.running.finish()
        return self.box.record(self.invocation)

    def end(self, sig=signal.SIGKILL, why="sent by clirace once the trial was over") -> Invocation:
        if self.running is None:
            return Invocation(label="holder", argv=[], exit_code=None)
        signalled = self._alive()
        if signalled:
            if self.pty:
                self.running.kill(sig)
            else:
                self.running.signal_group(sig)
        inv = self.wait(2.0)
        if signalled and inv.signal == sig:
            inv.ended_by = why  # so that the evidence does not read as if the tool had crashed
        self._restore()
        return inv

    def close(self) -> None:
        """Leave nothing behind: the holder ended, clirace's own lock dropped, the pipe replaced."""
        if self.running is not None and self.invocation is None:
            self.end()
        if self.hold.how == "take":
            self._untake()
        self._restore()

    def _untake(self):
        if getattr(self, "_lock_path", None):
            self._lock_path.unlink(missing_ok=True)
            self._lock_path = None
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def _restore(self):
        """Put a regular file with the original content back where the pipe was."""
        if self._fifo_id is None:
            return
        path = self._fifo_path
        try:
            st = path.lstat()
            is_our_fifo = stat.S_ISFIFO(st.st_mode) and (st.st_dev, st.st_ino) == self._fifo_id
        except FileNotFoundError:
            is_our_fifo = False
        if is_our_fifo:
            tmp = path.with_name(path.name + ".clirace-restore")
            tmp.write_text(self.content)
            os.replace(tmp, path)
        if self._fd is not None and self.hold.how == "park" and self.invocation is not None:
            os.close(self._fd)
            self._fd = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _has_open(pid: int, fifo_id) -> bool:
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return False
    for fd in fds:
        try:
            st = os.stat(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if (st.st_dev, st.st_ino) == fifo_id and stat.S_ISFIFO(st.st_mode):
            return True
    return False


def _wchan(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/wchan") as handle:
            return handle.read().strip()
    except OSError:
        return ""


def _group(pid: int) -> list[int]:
    """Processes whose process group is `pid` (each invocation leads its own group)."""
    return [proc for proc in pids() if stat_fields(proc)[2:3] == [str(pid)]]
