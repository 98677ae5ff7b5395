"""Keeping the tool's lock busy, three ways (spec `lock.hold`), one small strategy class each:

- CommandHold: a test hook of the tool that takes the lock and waits for {release_file} (or {hold_seconds});
- ParkHold: a real invocation, parked while it reads a state file that clirace has replaced by a named pipe
  (the tool reads that file after taking its lock, so while it waits on the pipe it holds the lock);
- TakeHold: clirace takes the lock itself, the way the tool does (no tool process holds it): a lock file
  (exclusive-create, or link: the same file, which the tool's link(2) onto its name then finds), flock, fcntl;
- SqliteWriteHold: clirace holds SQLite's write lock on the tool's database (BEGIN IMMEDIATE, kept open), which
  lets readers in, as a writing tool does, where an fcntl lock on the whole file stops them at start-up;
- StopHold: for the release experiment of a `take` spec, a real invocation stopped by strace just after its
  lock call (no hook, no FIFO).

The first two make the tool itself the holder, so they can also end it normally, with an error, or by a
signal (SIGINT arrives as a real Ctrl-C typed on the holder's own pseudo-terminal). Every holder records a
`held` event once it holds the lock and a `released` or `signal-sent` event when clirace lets it go.
"""
from __future__ import annotations

import errno
import fcntl
import os
import signal
import sqlite3
import stat
import time
from pathlib import Path
from typing import Any

from clirace.checks import timing
from clirace.errors import NotAvailable, PatternTimeout, TrialFailed
from clirace.history import Invocation
from clirace.history.vocab import EventKind, HoldMode, LockKind, ReadyKind
from clirace.run import procfs, safefs, stopper
from clirace.run.launch import Running
from clirace.run.services import ServerError
from clirace.scenarios import effects
from clirace.scenarios._box import Box
from clirace.spec import Hold as HoldSpec
from clirace.spec import OwnCommand, patterns

POLL = 0.005
STATE_CAP = 16 << 20  # the largest state file clirace parks a holder on (it feeds it back through the pipe)


class Holder:
    """The interface every strategy keeps; see the module docstring."""
    tool_holds = True  # the tool itself is the holder (so its release can be tested)

    def __init__(self, box: Box, pty: bool = False, longest: float = 0.0):
        self.box = box
        self.spec: HoldSpec = box.spec.lock.hold  # type: ignore[union-attr]
        self.pty = pty
        self.longest = longest  # the longest the trial may keep it holding before it lets go (0: the defaults)
        self.running: Running | None = None
        self.invocation: Invocation | None = None
        io = box.sandbox.root / "io"
        self.ready_file, self.release_file = io / "hold.ready", io / "hold.release"

    def start(self) -> float:
        """Take the lock; returns the seconds until it was held."""
        self.box.settle()  # a lock an earlier command's leftover process holds would refuse the holder
        t0 = time.monotonic()
        self._take()
        self.box.event(EventKind.HELD, "holder")
        return time.monotonic() - t0

    def _take(self) -> None:
        raise NotImplementedError

    def reached_by(self, pid: int) -> bool:
        """Whether the process group `pid` got at the state the holder is reading (only a park can tell)."""
        return False

    def waiting_at_state(self, pid: int) -> str:
        """How the process group `pid` waits for a lock on the parked state file it holds open ("" when it does
        not: only a park can tell)."""
        return ""

    def alive(self) -> bool:
        return self.running is not None and self.running.poll() is None

    def release(self, invalid: bool = False) -> Invocation | None:
        """Let the holder finish normally (with `invalid`, make it fail); its invocation once it exited."""
        self.box.event(EventKind.RELEASED, "holder", "with content that makes it fail" if invalid else "")
        self._let_go(invalid)
        return self.wait(self.release_wait()) if self.running is not None else None

    def _let_go(self, invalid: bool) -> None:
        raise NotImplementedError

    def release_wait(self) -> float:
        return self.box.spec.timeout

    # --- ending a holder that is a tool process ---------------------------------------------------------
    def _spawn(self, sub: Any) -> None:
        self.running = self.box.start("holder", sub, pty=self.pty, **effects.values(self.box, "holder", sub))

    def interrupt(self, sig: int, wait: float) -> Invocation:
        """Stop the holder with `sig` (SIGINT as Ctrl-C on its terminal when pty); wait for it to exit."""
        assert self.running is not None
        typed = self.pty and sig == signal.SIGINT
        self.box.event(EventKind.SIGNAL_SENT, "holder", signal.Signals(sig).name + (" (Ctrl-C typed)" if typed else ""))
        if typed:
            self.running.type_interrupt()
        else:
            self.running.signal_group(sig)
        inv = self.wait(wait)
        self._restore()
        return inv

    def wait(self, timeout: float) -> Invocation:
        """Wait for the holder to exit; if it does not within `timeout`, the invocation says timed_out."""
        if self.invocation is None:
            assert self.running is not None
            self.running.set_deadline(timeout)
            self.invocation = self.box.finish(self.running)
        return self.invocation

    def end(self, why: str = "sent by clirace once the trial was over") -> Invocation | None:
        if self.running is None:
            return None
        if self.alive():
            self.running.ended_by = why  # so that the evidence does not read as if the tool had crashed
            self.box.event(EventKind.SIGNAL_SENT, "holder", f"SIGKILL ({why})")
            self.running.signal_group(signal.SIGKILL)
        inv = self.wait(2.0)
        self._restore()
        return inv

    def _not_ready(self, why: str) -> None:
        inv = self.end("sent by clirace because it never showed that it held the lock")
        said = f" ({inv.ending()}; {inv.printed()})" if inv else ""
        raise TrialFailed(f"the lock holder never held the lock: {why}{said}")

    def _restore(self) -> None:
        pass

    def close(self) -> None:
        """Leave nothing behind: the holder ended, clirace's own lock dropped, the pipe replaced."""
        if self.running is not None and self.invocation is None:
            self.end()
        self._restore()

    def __enter__(self) -> Holder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _HookValues(effects.Effect):
    """The placeholders a test hook's command and environment may name."""
    ready_file: str
    release_file: str
    hold_seconds: str
    hold_ms: str


class CommandHold(Holder):
    """A test hook: `lock.hold.command`, ready when `lock.hold.ready` says so, released by {release_file}; or
    `lock.hold.run`, a helper program that is not the tool (so the tool is not the holder)."""

    @property
    def tool_holds(self) -> bool:  # type: ignore[override]
        return not self.spec.own

    def hold_seconds(self) -> float:
        lock = self.box.spec.lock
        assert lock is not None
        return max(lock.prompt + lock.wait, self.longest) + 5

    def release_wait(self) -> float:
        # A hook that only knows {hold_seconds} ends by itself then: its release may take that long.
        uses_release_file = any("{release_file}" in arg for arg in (*(self.spec.command or ()),
                                                                     *(value for _, value in self.spec.env)))
        return self.box.spec.timeout + (0 if uses_release_file else self.hold_seconds())

    def _take(self) -> None:
        assert self.spec.command is not None  # a command hold has one (spec validation)
        values = _HookValues(ready_file=str(self.ready_file), release_file=str(self.release_file),
                             hold_seconds=f"{self.hold_seconds():g}", hold_ms=f"{int(self.hold_seconds() * 1000)}",
                             **effects.values(self.box, "holder", self.spec.command,
                                              [value for _, value in self.spec.env]))
        env = {name: self.box.path(value, **values) for name, value in self.spec.env}
        command = OwnCommand(self.spec.command) if self.spec.own else self.spec.command
        self.running = self.box.start("holder", command, pty=self.pty, extra_env=env or None, **values)
        assert self.spec.ready is not None and self.running is not None
        kind, value = self.spec.ready
        if kind is ReadyKind.DELAY:
            # The spec's delay was measured on its author's machine: on a loaded one the hook may still be starting.
            # So after it, wait (as long again at most) until the hook is asleep with its CPU still: waiting,
            # holding its lock, not working its way towards it.
            time.sleep(float(value))  # type: ignore[arg-type]
            timing.settle(lambda: procfs.group(self.running.pid) if self.alive() else [],  # type: ignore[union-attr]
                          time.monotonic() + float(value))  # type: ignore[arg-type]
            if not self.alive():
                self._not_ready("it exited during the ready delay")
            return
        deadline = time.monotonic() + self.box.spec.timeout
        pattern = str(value) if kind in (ReadyKind.STDOUT, ReadyKind.STDERR) else None
        path = Path(self.box.path(str(value), ready_file=self.ready_file)) if kind is ReadyKind.FILE else None
        while time.monotonic() < deadline:
            if path is not None and path.exists():
                return
            if pattern is not None:
                try:
                    if patterns.search(pattern, self.running.printed_on(kind.value), multiline=False):
                        return
                except PatternTimeout as exc:
                    self._not_ready(f"its readiness regex: {exc}")
            if not self.alive():
                self._not_ready("it exited before signalling readiness")
            time.sleep(POLL)
        self._not_ready(f"no readiness signal ({kind}: {value}) within {self.box.spec.timeout:g}s")

    def _let_go(self, invalid: bool) -> None:
        root = self.box.sandbox.root  # a link the target planted at the release file is refused, not followed
        try:
            safefs.write_new(root, safefs.within(root, self.release_file), b"", parents=True)
        except (FileExistsError, safefs.Refused):
            pass  # the hook made it, or a link stands there: the holder then ends by {hold_seconds}


class ParkHold(Holder):
    """A real invocation parked on a named pipe put where it reads its state (after taking its lock)."""

    def __init__(self, box: Box, pty: bool = False, longest: float = 0.0):
        super().__init__(box, pty, longest)
        self.path = Path(box.path(self.spec.fifo or ""))
        self.root = box.sandbox.root
        self.rel = safefs.within(self.root, self.path)  # the spec loader keeps the FIFO inside the sandbox
        self.content = b""
        self._fd: int | None = None
        self._fifo_id: tuple[int, int] | None = None

    def _take(self) -> None:
        path = self.path
        if self.spec.content is not None:
            self.content = self.spec.content.encode()
        else:
            found = safefs.read_capped(self.root, self.rel, STATE_CAP)
            if isinstance(found, safefs.Special):
                raise TrialFailed(f"cannot park a holder on {path}: {found}, not a regular file")
            if found is not None and len(found) > STATE_CAP:
                raise TrialFailed(f"cannot park a holder on {path}: it is larger than {STATE_CAP:,} bytes")
            self.content = found or b""
        try:
            safefs.mkdirs(self.root, os.path.dirname(self.rel) or ".")
            self._fifo_id = safefs.mkfifo_at(self.root, self.rel, replace=True)
        except safefs.Refused as exc:
            raise TrialFailed(f"cannot park a holder on {path}: {exc.special}") from None
        self._spawn(self.spec.command)
        deadline = time.monotonic() + self.box.spec.timeout
        while time.monotonic() < deadline:
            try:
                self._fd = safefs.open_fifo_writer(self.root, self.rel, self._fifo_id)
                self._settle(deadline)
                return  # the holder has the pipe open for reading: it is past its lock and parked
            except safefs.Refused as exc:
                self._not_ready(f"{path} was replaced while the holder started ({exc.special})")
            except OSError as exc:
                if exc.errno != errno.ENXIO:
                    raise
            if not self.alive():
                self._not_ready(f"it exited without opening {path} (is it a file the command reads after locking?)")
            time.sleep(POLL)
        self._not_ready(f"it never opened {path} within {self.box.spec.timeout:g}s; {self._open_files()} "
                        "(lock.hold.park.fifo must be a file the command reads after it has taken its lock)")

    def _open_files(self) -> str:
        """What the holder had open instead of the parked path, read before it is ended: the file it is waiting
        on, or the state it reads under another name."""
        assert self.running is not None
        seen = sorted({f for pid in procfs.group(self.running.pid) for f in procfs.open_files(pid)})
        return f"it had open: {', '.join(seen[:8])}{' …' if len(seen) > 8 else ''}" if seen else "it had no file open"

    def _settle(self, deadline: float) -> None:
        """Wait until the parked reader is asleep in its read of the pipe, not merely past open().

        Why: a signal landing between open() and read() is noted by Python but acted on only after the
        read, which never returns while the pipe stays open, so a holder that handles Ctrl-C would look as
        if it ignored it. The kernel names where a process sleeps in /proc/PID/wchan (anon_pipe_read,
        pipe_read or pipe_wait, by kernel version); where that is hidden, the reader asleep with its CPU time
        standing still (timing.settle) stands in: evidence, where a fixed pause was a guess at the load.
        """
        assert self.running is not None and self._fifo_id is not None
        fifo = self._fifo_id

        def readers() -> list[int]:
            return [pid for pid in procfs.group(self.running.pid) if procfs.has_open_fifo(pid, fifo)]  # type: ignore[union-attr]

        while time.monotonic() < deadline:
            states = [procfs.wchan(pid) for pid in readers()]
            if any("pipe" in state for state in states):
                return
            if states and all(state in ("", "0") for state in states):
                # wchan hidden here: asleep with its CPU time standing still is the evidence that it is in its read
                timing.settle(readers, deadline)
                return
            if not self.alive():
                return  # judged by whoever waits for it next
            time.sleep(POLL / 5)

    def reached_by(self, pid: int) -> bool:
        """A process of the group holds the parked pipe open and is reading it. A tool that locks its state file
        itself opens it to lock it: blocked in that lock call, it waits (`waiting_at_state`); still between the
        open and its next call, it is watched on. Where /proc shows neither the call nor wchan, holding the pipe
        open is all the evidence there is."""
        fifo = self._fifo_id
        if fifo is None:
            return False
        for proc in procfs.group(pid):
            if not procfs.has_open_fifo(proc, fifo) or procfs.waits_for_lock(proc):
                continue
            call, fd = procfs.blocked_in(proc)
            if call in procfs.READS and fd is not None and procfs.fd_is(proc, fd, fifo):
                return True
            where = procfs.wchan(proc)
            if "pipe" in where or (call == "" and where in ("", "0")):
                return True
        return False

    def waiting_at_state(self, pid: int) -> str:
        fifo = self._fifo_id
        if fifo is None:
            return ""
        for proc in procfs.group(pid):
            how = procfs.waits_for_lock(proc) if procfs.has_open_fifo(proc, fifo) else ""
            if how:
                return f"it held {self.path} (the parked pipe) open and waited in {how} for its lock"
        return ""

    def _let_go(self, invalid: bool) -> None:
        self._restore()
        assert self._fd is not None
        try:  # a state file over 64 KiB takes several writes through a pipe; a reader that stopped is not waited on
            safefs.write_all(self._fd, (self.spec.invalid_content or "").encode() if invalid else self.content,
                             timeout=self.box.spec.timeout)
        except (TimeoutError, BrokenPipeError):
            pass  # the holder stopped reading (or exited): how it ends is what the trial records
        finally:
            # Taken out before the close, here and in _restore: a Ctrl-C or SIGTERM raised just after the close
            # would otherwise leave it set, and the holder's own close (on the way out) would close it again.
            fd, self._fd = self._fd, None
            os.close(fd)

    def _restore(self) -> None:
        """Put a regular file with the original content back where the pipe was."""
        if self._fifo_id is None:
            return
        seen = safefs.identity(self.root, self.rel)
        if seen is not None and stat.S_ISFIFO(seen[2]) and seen[:2] == self._fifo_id:
            try:  # a fresh temp name in the same directory, renamed over the pipe: never through a planted link
                safefs.replace_atomically(self.root, self.rel, self.content)
            except (safefs.Refused, OSError):
                pass  # the directory itself was replaced by a link meanwhile: leave it as the target made it
        if self._fd is not None and self.invocation is not None:
            fd, self._fd = self._fd, None
            os.close(fd)


class TakeHold(Holder):
    """clirace takes the lock itself: an exclusive-create lock file, a flock or an fcntl lock."""
    tool_holds = False

    def __init__(self, box: Box, pty: bool = False, longest: float = 0.0):
        super().__init__(box, pty, longest)
        self.path = Path(box.path(self.spec.path or ""))
        self.root = box.sandbox.root
        self.rel = safefs.within(self.root, self.path)  # the spec loader keeps the lock inside the sandbox
        self._fd: int | None = None
        self._lock_file: str | None = None

    def _take(self) -> None:
        path = self.path
        if self.spec.kind in (LockKind.EXCLUSIVE_CREATE, LockKind.LINK):
            content = self.box.path(self.spec.content or "", pid=os.getpid(), now=int(time.time()))
            try:
                safefs.write_new(self.root, self.rel, content.encode(), parents=True)
            except FileExistsError:
                raise TrialFailed(f"clirace could not take the lock: {path} already exists after setup") from None
            except safefs.Refused as exc:
                raise TrialFailed(f"clirace could not take the lock at {path}: {exc.special}") from None
            self._lock_file = self.rel
            return
        try:
            self._fd = safefs.open_at(self.root, self.rel, os.O_CREAT | os.O_RDWR, 0o644, parents=True)
        except safefs.Refused as exc:
            raise TrialFailed(f"clirace could not take the lock at {path}: {exc.special}") from None
        try:
            if self.spec.kind is LockKind.FLOCK:
                fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            else:
                fcntl.lockf(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            raise TrialFailed(f"clirace could not take the {self.spec.kind} lock on {path}: it is held") from None

    def alive(self) -> bool:
        return self._fd is not None or self._lock_file is not None

    def _let_go(self, invalid: bool) -> None:
        self._restore()

    def _restore(self) -> None:
        if self._lock_file is not None:
            safefs.unlink_at(self.root, self._lock_file)
            self._lock_file = None
        if self._fd is not None:
            fd, self._fd = self._fd, None  # before the close (see ParkHold._let_go)
            os.close(fd)


class SqliteWriteHold(Holder):
    """clirace holds SQLite's write lock on the database at `take.path`: a connection of its own in BEGIN IMMEDIATE
    (the RESERVED lock a writer takes), kept open until the release. Readers still get in; a writer waits its busy
    timeout, then is told "database is locked"."""
    tool_holds = False

    def __init__(self, box: Box, pty: bool = False, longest: float = 0.0):
        super().__init__(box, pty, longest)
        self.path = Path(box.path(self.spec.path or ""))
        self.rel = safefs.within(box.sandbox.root, self.path)  # the spec loader keeps it inside the sandbox
        self._conn: sqlite3.Connection | None = None

    def _take(self) -> None:
        found = safefs.kind(self.box.sandbox.root, self.rel)
        if found != "a regular file":  # missing, or a link or pipe the target planted: never opened
            raise TrialFailed(f"clirace could not take SQLite's write lock on {self.path}: it is {found} "
                              "after setup (the setup must create the database)")
        try:  # mode=rw: never creates a database where the tool has none
            conn = sqlite3.connect(f"file:{self.path}?mode=rw", uri=True, timeout=0, isolation_level=None,
                                   check_same_thread=False)
        except sqlite3.Error as exc:
            raise TrialFailed(f"clirace could not open {self.path} with SQLite: {exc}") from None
        try:
            conn.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            conn.close()
            raise TrialFailed(f"clirace could not take SQLite's write lock on {self.path}: {exc}") from None
        self._conn = conn

    def alive(self) -> bool:
        return self._conn is not None

    def _let_go(self, invalid: bool) -> None:
        self._restore()

    def _restore(self) -> None:
        if self._conn is not None:
            try:
                self._conn.execute("ROLLBACK")  # nothing was written: the tool finds its database as it was
            except sqlite3.Error:
                pass
            self._conn.close()
            self._conn = None


class StopHold(Holder):
    """No hook and no FIFO: a real invocation of the contender, stopped by strace just after it took the lock
    that `lock.hold.take` names, held there, then let go or signalled where it stands (stopper.Hold).

    Used where `take` cannot serve (the release experiment needs the tool itself to be the holder): git,
    kubectl and any tool whose lock call strace can see. A signal reaches the held process directly; SIGINT
    is sent, not typed on a terminal."""

    def __init__(self, box: Box, pty: bool = False, longest: float = 0.0):
        super().__init__(box, pty, longest)
        self.path = box.path(self.spec.path or "")
        self.stopped: stopper.Hold | None = None

    def _take(self) -> None:
        assert self.spec.kind is not None and self.box.spec.lock is not None
        prefix = self.box.trace_dir / "holder"
        wrap = stopper.hold_prefix(prefix, self.path, self.spec.kind.value, cwd=self.box.launcher.cwd)
        contender = self.box.spec.lock.contender
        self.running = self.box.start("holder", contender, wrap=wrap, **effects.values(self.box, "holder", contender))
        # A link lock is the link call itself: nothing is done on the lock's name after it until its removal, so
        # the tool is held on the link's return.
        self.stopped = stopper.Hold(self.running, prefix, self.path, self.spec.kind.value,
                                    at="lock" if self.spec.kind is LockKind.LINK else "inside")
        if self.stopped.wait_held(self.box.spec.timeout) is None:
            self._not_ready(f"it was never seen to take its lock on {self.path} (and go on from it)")

    def _let_go(self, invalid: bool) -> None:
        assert self.stopped is not None
        self.stopped.release()

    def interrupt(self, sig: int, wait: float) -> Invocation:
        assert self.stopped is not None
        self.box.event(EventKind.SIGNAL_SENT, "holder", f"{signal.Signals(sig).name} (to the process held in its lock)")
        self.stopped.signal(sig)
        return self.wait(wait)

    def close(self) -> None:
        super().close()
        if self.stopped is not None:
            self.stopped.close()


class ServerTakeHold(Holder):
    """clirace takes a lock of the trial's server itself (spec `services`): a Redis key set with NX and a time to
    live, as the tool's own lock is; a PostgreSQL advisory lock, or a row locked with SELECT ... FOR UPDATE, each
    in a session of clirace's own kept open until the release."""
    tool_holds = False

    def __init__(self, box: Box, pty: bool = False, longest: float = 0.0):
        super().__init__(box, pty, longest)
        self.served = box.served
        self.key = box.path(self.spec.key or "")
        self.held = False

    def _take(self) -> None:
        kind = self.spec.kind
        try:
            if kind is LockKind.REDIS_NX:
                if not self.served.redis.take_nx(self.key, f"clirace-{os.getpid()}", int(self.spec.ttl * 1000)):
                    raise TrialFailed(f"clirace could not take the lock: the key {self.key!r} is already set after setup")
            elif kind is LockKind.PG_ADVISORY:
                self.served.postgres.hold(f"SELECT pg_advisory_lock({int(self.key)})")
            else:
                rows = self.served.postgres.hold(f"BEGIN; SELECT 1 FROM {self.spec.row} FOR UPDATE")
                if not rows:
                    self.served.postgres.release()
                    raise TrialFailed(f"clirace could not lock the row: no row of {self.spec.row} exists after setup")
        except (OSError, *ServerError) as exc:
            raise TrialFailed(f"clirace could not take the {kind} lock: {exc}") from None
        self.held = True

    def alive(self) -> bool:
        return self.held

    def _let_go(self, invalid: bool) -> None:
        self._restore()

    def _restore(self) -> None:
        if not self.held:
            return
        self.held = False
        if self.spec.kind is LockKind.REDIS_NX:
            self.served.redis.delete(self.key)
        else:
            self.served.postgres.release()


STRATEGIES: dict[HoldMode, type[Holder]] = {HoldMode.COMMAND: CommandHold, HoldMode.PARK: ParkHold,
                                             HoldMode.TAKE: TakeHold}


def holder(box: Box, pty: bool = False, tool: bool = False, longest: float = 0.0) -> Holder:
    """The strategy the spec's `lock.hold` names; with `tool`, one whose holder is the tool itself (a `take`
    spec is then held by a stopped invocation of the contender). `longest`: how long the trial may hold."""
    assert box.spec.lock is not None
    hold = box.spec.lock.hold
    if hold.how is HoldMode.TAKE and hold.kind is not None and hold.kind.on_server:
        return ServerTakeHold(box, pty, longest)
    if tool and hold.how is HoldMode.TAKE:
        return StopHold(box, pty, longest)
    if hold.how is HoldMode.TAKE and hold.kind is LockKind.SQLITE_WRITE:
        return SqliteWriteHold(box, pty, longest)
    return STRATEGIES[hold.how](box, pty, longest)


def stop_hold_usable() -> str:
    """"" when strace can stop a real invocation at its lock here, else why not."""
    try:
        stopper.require()
    except NotAvailable as exc:
        return str(exc)
    return ""
