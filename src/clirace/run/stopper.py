"""Stopping a real invocation at a chosen syscall with strace, and continuing it later: no hook, no FIFO.

The mechanism, as measured with strace 6.1 on Linux 6.x (x86_64); `stop_prefix` builds this command line:

    strace -ff -qq -y -e signal=SIGSTOP -e trace=CALLS -P PATH [-P PATH ...]
           -e inject=CALLS:signal=SIGSTOP:when=N -o PREFIX -- TOOL ARGS...

- **The stop lands just after the call.** strace queues the injected signal when the call *enters*; the kernel
  runs the call and acts on a non-fatal signal on the way back to user space. So a `write` stopped this way
  has already written, an O_EXCL `openat` has already created its lock file, a `flock` already holds the lock
  (a blocking `flock` that has to wait is interrupted, stops, and restarts after SIGCONT). Choose a call that
  opens the race window (the first `read` of the state) or one inside it (the lock call of a tool that reads
  its state first), never the write or rename that closes it. (`error=ERESTARTNOINTR` plus the signal would
  stop before the call, but strace skips a call by setting its number to -1, so the kernel never restarts
  it: the tool sees errno 513. Not usable.)
- **`-P PATH` narrows tracing, injection and the `when=N` count** to calls on those paths: fd-based calls
  (read, write, flock, fcntl, mmap) match by the fd's real path, path arguments by their exact string. strace
  warns on stderr (the tool's stderr) when a relative PATH that exists resolves elsewhere, so `path_forms`
  passes the real path of a file that exists, and the relative form only of one that does not exist yet.
- **`when=N` counts per syscall name and per thread**: `inject=read,pread64:...:when=1` stops at the first
  of each, in each thread. To stop at the Nth of them in a process, whatever thread makes it, stop at every
  one (`when=1+`) and count in the trace (rendezvous.Arrival). Later stops after a release are continued at
  once (`Continuer`).
- **A stop is a group-stop: every thread stops, and each writes `--- stopped by SIGSTOP ---`** in its own
  trace file (-ff). Two threads whose injected calls end at once queue two SIGSTOPs; the SIGCONT that ends the
  first group-stop discards the second, so that call goes unstopped. Read a multi-threaded process's trace,
  and continue it, only once every live thread has joined the stop (`StopLog.stopped`).
- **`--seccomp-bpf` must not be used**: the signal is then passed on the restart from a seccomp event stop,
  which the kernel ignores; the tracee never stops (measured). `-e trace=none` disables injection too.
- **In /proc the stopped tracee reads `State: t (tracing stop)`, wchan `ptrace_stop`**, exactly as a tracee
  paused for strace at any syscall, so /proc cannot tell that it arrived. strace's own line does:
  `--- stopped by SIGSTOP ---` (printed when strace sees the group-stop; `-e signal=SIGSTOP` keeps it,
  `-e signal=none` hides it; -o output is written line by line).
- **Continue it with SIGCONT to the tracee's pid (not to strace), and only after that line.** A SIGCONT
  sent between the call and the group-stop is swallowed: it discards *pending* stop signals, but this
  SIGSTOP is then in strace's hands (signal-delivery-stop) and strace re-delivers it afterwards, so the
  process stays stopped (1 hang in 30 measured; 0 in 30 after the line).
- **Other signals wait**: sent to the stopped tracee they stay pending (a stopped tracee is not woken by
  them) and are delivered at the held point once SIGCONT arrives: SIGTERM then SIGCONT ends it there, and
  strace exits by the same signal (-15), so the record reads like the real thing. SIGKILL acts at once.
  Never signal strace itself: on SIGTERM it kills its child and detaches. (`Handover` starts strace with -D,
  which makes the tool the launched process and strace a grandchild that only attaches to it, and -I1, since
  -o blocks SIGTERM: on SIGTERM that strace lets go of the tool, still stopped, for another to take over.)

`Hold` uses this to hold one invocation just after its lock call; run/rendezvous.py stops N of them at once;
`Handover` hands one over, just after an exec, to a strace that kills it at a counted call.
"""
from __future__ import annotations

import os
import re
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Protocol

from clirace.errors import NotAvailable as NotAvailable  # raised here; tests import it from here
from clirace.run import locking, observe
from clirace.run._waits import exit_within, ready
from clirace.run.procfs import alive, proc_locks

STOPPED = "--- stopped by SIGSTOP ---"
READ_CALLS = "read,pread64,readv,preadv,preadv2,mmap"  # the first read of the state opens a read-modify-write
LOCK_CALLS = locking.CALLS
# Calls a tool makes on its lock file once it holds it: writing its pid into it, truncating, closing it.
AFTER_LOCK_CALLS = "write,pwrite64,writev,ftruncate,fsync,fstat,newfstatat,lseek,close"
POLL = 0.002
# The longest a wait on trace files lasts (TraceChanges): how late an exit is seen, since it writes no trace line (-qq).
TICK = 0.01
# The least time between two looks that trace lines wake. A storm of lines would wake one look each: at a level-3
# rendezvous seven contenders polling the held lock every 10 ms write 700 lines a second, and each look reads every
# trace file and /proc entry of the round (0.3 s of clirace's CPU in one claim round of 0.45 s).
MIN_LOOK = 0.005
IN_MODIFY, IN_CREATE = 0x2, 0x100  # <sys/inotify.h>
JOIN_PATIENCE = 1.0  # seconds to wait for every thread of a stopped process to join its stop (one stuck is not waited for)
READ_CHUNK = 1 << 20  # at most this much of a trace file per poll


def require() -> None:
    usable, why = observe.available()
    if usable:
        usable, why = _injects()
    if not usable:
        raise NotAvailable(f"stopping at a syscall is not available: {why}")


@lru_cache(maxsize=1)
def _injects() -> tuple[bool, str]:
    """Whether this strace can inject into a call (strace 4.16+): a `cd /` made to fail with ENOENT fails."""
    try:
        probe = subprocess.run(["strace", "-f", "-qq", "-o", "/dev/null", "-e", "trace=chdir",
                                "-e", "inject=chdir:error=ENOENT", "sh", "-c", "cd /"], capture_output=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, f"strace could not run ({exc})"
    if probe.returncode == 0:
        return False, "this strace cannot inject into system calls (-e inject needs strace 4.16 or later)"
    return True, ""


def path_forms(paths: list[str], cwd: str | None = None) -> list[str]:
    """The strings to give `-P` so that `paths` match however the tool names them (see the module docstring)."""
    forms = []
    for path in paths:
        absolute = os.path.join(cwd or os.getcwd(), path)
        if os.path.exists(absolute):
            forms.append(os.path.realpath(absolute))
        else:
            forms.append(os.path.normpath(absolute))
            parent = os.path.realpath(os.path.dirname(absolute))
            forms.append(os.path.join(parent, os.path.basename(absolute)))
            if cwd and parent.startswith(os.path.realpath(cwd) + "/"):
                forms.append(os.path.relpath(os.path.join(parent, os.path.basename(absolute)), os.path.realpath(cwd)))
    return list(dict.fromkeys(forms))


def stop_prefix(trace_out: Path, paths: list[str], calls: str, when: int | str = 1, cwd: str | None = None,
                also_trace: str = "") -> list[str]:
    """strace arguments that stop the process (SIGSTOP) just after its `when`-th call of each of `calls` on
    `paths` ("1+": after every one), writing one trace file per process to `trace_out`.PID. `also_trace`
    records more calls on the same paths (observation only; they are not stopped)."""
    traced = ",".join(dict.fromkeys(c for c in f"{calls},{also_trace}".split(",") if c))
    argv = [observe.strace_path(), "-ff", "-qq", "-y", "-s", "256", "-e", "signal=SIGSTOP", "-e", f"trace={traced}"]
    for form in path_forms(paths, cwd):
        argv += ["-P", form]
    return argv + ["-e", f"inject={calls}:signal=SIGSTOP:when={when}", "-o", str(trace_out), "--"]


class Process(Protocol):
    """What is watched: a launch.Running, or a process clirace did not start (a daemon); `ended` also reads
    its `proc` (a Popen) where it has one."""

    @property
    def pid(self) -> int: ...


@dataclass
class Stop:
    pid: int
    at: float  # time.monotonic() when it was seen
    call: str  # the trace line of the call it stopped after


@dataclass
class StopLog:
    """Reads the per-process trace files of one invocation as strace writes them: which processes it has,
    where each one stopped, and which stops are still to be continued."""
    prefix: Path
    _offsets: dict[int, int] = field(default_factory=dict)
    _partial: dict[int, str] = field(default_factory=dict)
    _last_call: dict[int, str] = field(default_factory=dict)
    events: dict[int, list[str]] = field(default_factory=dict)  # pid -> its call lines and STOPPED lines, in order
    stopped: dict[int, int] = field(default_factory=dict)  # pid -> how many STOPPED lines it has written
    stops: list[Stop] = field(default_factory=list)  # every Stop seen, in order
    pending: list[Stop] = field(default_factory=list)  # stops not continued yet

    def pids(self, listing: list[os.DirEntry[str]] | None = None) -> list[int]:
        """Every process strace has traced for this invocation (a file exists from the moment it attaches).
        `listing`: the trace directory's entries, read once for every StopLog in it (`trace_listing`, `Listings`)."""
        return sorted(self._files(listing))

    def _files(self, listing: list[os.DirEntry[str]] | None) -> dict[int, os.DirEntry[str]]:
        name = self.prefix.name + "."  # (a listing, not Path.glob: read at every poll of a rendezvous, 2 ms apart)
        entries = trace_listing(self.prefix.parent) if listing is None else listing
        return {int(pid): entry for entry in entries
                if entry.name.startswith(name) and (pid := entry.name.rpartition(".")[2]).isdigit()}

    def poll(self, listing: list[os.DirEntry[str]] | None = None) -> list[Stop]:
        """New stops since the last poll. `listing`: as for `pids`."""
        new = []
        for pid, entry in sorted(self._files(listing).items()):
            try:  # (one lstat: a file with nothing new since the last poll is not opened, the usual case)
                if entry.stat(follow_symlinks=False).st_size <= self._offsets.get(pid, 0):
                    continue
            except OSError:
                continue
            fd = observe.open_own(entry.path)  # a regular file, never a link
            if fd is None:
                continue
            try:
                chunk = os.pread(fd, READ_CHUNK, self._offsets.get(pid, 0))  # the rest at the next poll
            except OSError:
                continue
            finally:
                os.close(fd)
            if not chunk:
                continue
            self._offsets[pid] = self._offsets.get(pid, 0) + len(chunk)
            text = self._partial.pop(pid, "") + chunk.decode(errors="replace")
            lines = text.split("\n")
            if lines[-1]:
                self._partial[pid] = lines[-1]  # strace has not finished this line yet
            for line in lines[:-1]:
                if line.startswith(STOPPED):
                    new.append(Stop(pid, time.monotonic(), self._last_call.get(pid, "")))
                    self.events.setdefault(pid, []).append(STOPPED)
                    self.stopped[pid] = self.stopped.get(pid, 0) + 1
                elif not line.startswith(("---", "+++")):
                    self._last_call[pid] = line
                    self.events.setdefault(pid, []).append(line)
        self.stops += new
        self.pending += new
        return new

    def continue_pending(self) -> list[Stop]:
        """SIGCONT every stopped process not yet continued, once each; returns those stops.

        Once per process, not once per stop line: a group-stop writes one line per thread, and one SIGCONT
        continues them all; a second one, sent a moment later, continues the process's *next* stop as well
        (a Go tool ran through five stops that way, past the rendezvous and into its lock)."""
        done, self.pending = self.pending, []
        for pid in dict.fromkeys(process_of(stop.pid) for stop in done):
            resume(pid)
        return done


def trace_listing(folder: Path) -> list[os.DirEntry[str]]:
    """The entries of a trace directory, for the `pids` and `poll` of every StopLog writing there. Read it anew
    for each round of polls: an entry keeps the size it had when first looked at."""
    try:
        with os.scandir(folder) as entries:
            return list(entries)
    except OSError:
        return []


class Listings:
    """One `trace_listing` per trace directory, shared by the StopLogs polled in one round of polls."""

    def __init__(self) -> None:
        self._read: dict[Path, list[os.DirEntry[str]]] = {}

    def of(self, log: StopLog) -> list[os.DirEntry[str]]:
        folder = log.prefix.parent
        if folder not in self._read:
            self._read[folder] = trace_listing(folder)
        return self._read[folder]


class TraceChanges:
    """Wakes a waiting loop as soon as strace writes to one of the trace directories, instead of every POLL.

    Why: each look of a rendezvous lists the trace directory, reads every invocation's trace files and /proc
    entries, and looking every 2 ms while eight start-ups crawl to their state read under strace was a quarter of
    clirace's own CPU in a level-3 check. strace writes a line for each call it traces on the state and for each
    stop, so the directory changes exactly when there is something new to read; an exit writes nothing (-qq), so
    a wait still ends after its `timeout` (TICK). Where inotify cannot be had (no libc symbol, the watch limit
    reached, a directory gone), `wait` sleeps POLL, as every look did before."""

    def __init__(self, folders: Iterable[Path]) -> None:
        self._fd = _inotify(folders)
        self._returned = 0.0  # when the last wait returned: the caller looked then

    def wait(self, timeout: float) -> None:
        """Until something is written to a watched directory, or `timeout` seconds pass; never sooner than
        MIN_LOOK after the last wait returned."""
        if self._fd is None:
            time.sleep(max(min(timeout, POLL), 0.0))
            return
        if ready(self._fd, timeout):
            too_soon = self._returned + MIN_LOOK - time.monotonic()
            if too_soon > 0:
                time.sleep(too_soon)
            try:  # drained before the look that follows it: a line written after this wakes the next wait
                while os.read(self._fd, 4096):
                    pass
            except OSError:  # BlockingIOError: drained
                pass
        self._returned = time.monotonic()

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def _inotify(folders: Iterable[Path]) -> int | None:
    """An inotify fd watching `folders` for writes and new files, or None where that cannot be had."""
    libc = _libc()
    if libc is None:
        return None
    fd = int(libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC))
    if fd < 0:
        return None
    for folder in dict.fromkeys(folders):
        if libc.inotify_add_watch(fd, os.fsencode(folder), IN_MODIFY | IN_CREATE) < 0:
            os.close(fd)
            return None
    return fd


@lru_cache(maxsize=1)
def _libc() -> Any:
    try:
        import ctypes  # (only once something waits on a trace: a few ms of import that validate and judge never pay)
        libc = ctypes.CDLL(None, use_errno=True)
        libc.inotify_init1, libc.inotify_add_watch  # noqa: B018 (AttributeError where the C library lacks them)
    except (ImportError, OSError, AttributeError):
        return None
    return libc


def wait_ended(running: Process, until: float) -> None:
    """Until the invocation's process has ended (`ended`) or time.monotonic() reaches `until`: woken by its pidfd
    when it exits, not by polling (where no pidfd can be had, every POLL)."""
    if not ended(running) and exit_within(running.pid, until - time.monotonic()) is None:
        while not ended(running) and time.monotonic() < until:
            time.sleep(POLL)


def process_of(tid: int) -> int:
    """The process (thread group) a thread belongs to; the id itself once it is gone."""
    try:
        with open(f"/proc/{tid}/status") as handle:
            return next((int(line.split()[1]) for line in handle if line.startswith("Tgid:")), tid)
    except (OSError, ValueError, IndexError):
        return tid


def resume(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGCONT)
    except ProcessLookupError:
        pass


def cpu_ns(pid: int) -> int:
    """CPU time the process has used (ns; /proc/PID/schedstat, else clock ticks from /proc/PID/stat)."""
    try:
        with open(f"/proc/{pid}/schedstat") as handle:
            return int(handle.read().split()[0])
    except (OSError, ValueError, IndexError):
        pass
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            fields = handle.read().rsplit(b")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) * (1_000_000_000 // os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return 0


def ended(running: Process) -> bool:
    """Whether an invocation's process has exited, without reaping it. Safe from another thread, unlike
    Popen.poll(): while one thread is inside it, a concurrent poll() returns None, and launch reads that as
    "still running" at a deadline."""
    proc = getattr(running, "proc", None)
    if proc is not None and proc.returncode is not None:
        return True
    return not alive(running.pid)


class Continuer:
    """After a release: continue at once every stop that comes later (a second call of the injected set,
    another thread or child), until `done()` says the invocations are over or `close()` is called.
    `done` runs in the continuer's thread: it must not call Popen.poll() (see `ended`)."""

    def __init__(self, logs: list[StopLog], done: Callable[[], bool], poll: float = TICK) -> None:
        self.logs, self.done, self.poll = logs, done, poll
        self.late: list[Stop] = []
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True, name="clirace-continuer")
        self._thread.start()

    def _loop(self) -> None:
        changes = TraceChanges(log.prefix.parent for log in self.logs)
        try:
            while not self._closed.is_set():
                listings = Listings()
                for log in self.logs:
                    log.poll(listings.of(log))
                    self.late += log.continue_pending()
                if self.done():
                    return
                changes.wait(self.poll)
        finally:
            changes.close()

    def close(self) -> None:
        self._closed.set()
        self._thread.join(timeout=1.0)
        for log in self.logs:  # whatever stopped in the meantime must not stay stopped
            log.poll()
            self.late += log.continue_pending()


def hold_prefix(trace_out: Path, lock_path: str, kind: str, cwd: str | None = None) -> list[str]:
    """strace arguments for a `Hold` on a lock of `kind` (exclusive-create, flock, fcntl) on `lock_path`: stop at
    the lock call, and at the first call of each of AFTER_LOCK_CALLS on that file."""
    return stop_prefix(trace_out, [lock_path], f"{LOCK_CALLS[kind]},{AFTER_LOCK_CALLS}", cwd=cwd)


def is_lock_call(line: str, kind: str) -> bool:
    """Whether a trace line is a successful lock call of `kind` (taking the lock, not dropping it)."""
    op = observe.parse_line(line, "")
    return op is not None and locking.takes(op, kind)


def lock_held(path: str, kind: str) -> bool:
    """Whether the lock is held now: the lock file exists, or the kernel lists a lock on the file's inode."""
    try:
        st = os.stat(path)
    except OSError:
        return False
    if kind in ("exclusive-create", "link"):
        return True
    return any(lock.on(st) and not lock.waiting for lock in proc_locks())


# --- taking a process over after its exec ------------------------------------------------------------------

def exec_stop_prefix(trace_out: Path, exe: str) -> list[str]:
    """strace arguments that stop the process just after each execve of `exe` (the string the process passes),
    as a tracer that lets go of it on SIGTERM: daemonized (-D: the tracee is the launched process itself, not a
    child that strace would kill on its way out) and interruptible (-I1: -o would block SIGTERM)."""
    return [observe.strace_path(), "-I1", "-D", "-ff", "-y", "-s", "4096",
            "-e", "quiet=attach,personality,exit,path-resolution", "-e", "signal=SIGSTOP", "-e", "trace=execve",
            "-P", exe, "-e", "inject=execve:signal=SIGSTOP:when=1+", "-o", str(trace_out), "--"]


def tracer_of(pid: int) -> int | None:
    """The pid tracing `pid` (0: none), None once it is gone."""
    try:
        with open(f"/proc/{pid}/status") as handle:
            return next((int(line.split()[1]) for line in handle if line.startswith("TracerPid:")), 0)
    except (OSError, ValueError, IndexError):
        return None


class Handover:
    """An invocation started under `exec_stop_prefix(prefix, exe)`: at the exec of `exe` that `wanted(argv)`
    accepts, the stopping strace lets go of the process, still stopped, and the strace command line
    `attach(pid)` takes it over from that instant (a kill counted from the exec on); every other exec of `exe`
    goes on at once. Why: a version manager's shim (a shell script running helpers before it execs the
    interpreter) makes strace's per-thread counts land in its helpers; counted from the interpreter's exec, in
    its process only, they land where the traced run numbered them. `note` says what happened."""

    def __init__(self, running: Process, prefix: Path, wanted: Callable[[list[str]], bool],
                 attach: Callable[[int], list[str]]) -> None:
        require()
        self.running, self.log, self.wanted, self.attach = running, StopLog(prefix), wanted, attach
        self.tracer: subprocess.Popen[bytes] | None = None
        self.note = ""

    def take_over(self, timeout: float) -> bool:
        """Wait for the wanted exec (or the end, or `timeout`) and hand the process over; True once done."""
        deadline = time.monotonic() + timeout
        while self.tracer is None and time.monotonic() < deadline and not ended(self.running):
            self.log.poll()
            for stop in self.log.pending[:]:
                self.log.pending.remove(stop)
                argv = exec_argv(stop.call)
                if argv is not None and self.wanted(argv) and self._switch(stop.pid, argv):
                    return True
                resume(stop.pid)
            time.sleep(POLL)
        if self.tracer is None and not self.note:
            self.note = "the process never exec'd the program that wrote the config in the traced run"
        return self.tracer is not None

    def _switch(self, pid: int, argv: list[str]) -> bool:
        tracer = tracer_of(pid)
        if tracer:
            os.kill(tracer, signal.SIGTERM)  # it detaches; the process stays stopped
        if not _until(lambda: tracer_of(pid) in (0, None), 5.0):
            self.note = f"strace did not let go of pid {pid}"
            return False
        taker = self.tracer = subprocess.Popen(self.attach(pid), stdin=subprocess.DEVNULL,
                                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        attached = _until(lambda: tracer_of(pid) == taker.pid or taker.poll() is not None, 5.0)
        if not attached or taker.poll() is not None:
            why = "timed out"
            if taker.poll() is not None and taker.stderr is not None:  # it has ended (stderr is always a pipe)
                why = (taker.stderr.read().decode(errors="replace").strip().splitlines() or ["no reason given"])[-1]
            self.note = f"strace could not take over pid {pid} after its exec of {argv[0]} ({why})"
            self.close()
            self.tracer = None
            resume(pid)
            return False
        self.note = f"strace took over pid {pid} just after its exec of {' '.join(argv)[:200]}"
        resume(pid)
        return True

    def close(self) -> None:
        """Continue anything still stopped, and wait for the second strace (it ends with its tracee)."""
        self.log.poll()
        self.log.continue_pending()
        if self.tracer is not None:
            try:
                self.tracer.wait(10)
            except subprocess.TimeoutExpired:
                self.tracer.kill()
                self.tracer.wait()
            if self.tracer.stderr:
                self.tracer.stderr.close()


def exec_argv(line: str) -> list[str] | None:
    """The argv of a traced execve line ("execve(PATH, [ARGV...], ...) = 0"), None for another call."""
    if not line.startswith("execve("):
        return None
    start, end = line.find("["), line.find("], ")
    if start < 0 or end < start:
        return None
    return [observe.unescape(m.group(1)) for m in QUOTED.finditer(line[start:end])]


QUOTED = re.compile(r'"((?:[^"\\]|\\.)*)"')


def _until(condition: Callable[[], bool], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() >= deadline:
            return False
        time.sleep(POLL)
    return True


class Hold:
    """One invocation, started under `hold_prefix(...)`, held while it holds its lock, with no test hook.

    `at="inside"` (default) holds it at its first call on the lock file after the lock call (writing its pid
    into the lock file, truncating it, closing it): the tool has gone on from the lock call and is inside its
    critical section. `at="lock"` holds it on the lock call's return itself: a signal then lands before the
    tool's next line of code, a harsher instant than a user's Ctrl-C would ever hit (a Python tool raises
    KeyboardInterrupt before entering the `try` whose `finally` removes the lock). Then `release()` (it goes
    on normally) or `signal(sig)` (delivered where it is held). `running` is a launch.Running (or anything
    with `pid`).
    """

    def __init__(self, running: Process, prefix: Path, lock_path: str, kind: str, at: str = "inside") -> None:
        require()
        if kind not in LOCK_CALLS or at not in ("inside", "lock"):
            raise ValueError(f"unknown lock kind {kind!r} or hold point {at!r}")
        self.running, self.log = running, StopLog(prefix)
        self.lock_path, self.kind, self.at = lock_path, kind, at
        self.locked: Stop | None = None  # the stop after the lock call
        self.stop: Stop | None = None  # where it is held
        self.continuer: Continuer | None = None

    def wait_held(self, timeout: float) -> Stop | None:
        """The stop where it is held, or None if it ended (or `timeout` passed) without being held."""
        deadline = time.monotonic() + timeout
        changes = TraceChanges([self.log.prefix.parent])
        try:
            return self._wait_held(deadline, changes)
        finally:
            changes.close()

    def _wait_held(self, deadline: float, changes: TraceChanges) -> Stop | None:
        while self.stop is None and time.monotonic() < deadline:
            over = ended(self.running)
            for stop in self.log.poll():
                if self.locked is None and is_lock_call(stop.call, self.kind):
                    self.locked = stop
                    if self.at == "lock":
                        self.stop = stop
                elif self.locked is not None and self.stop is None:
                    self.stop = stop
            # Stops before the lock, and the lock call's own when held inside: continued, once per process, but
            # never the held one's (its other threads' lines of the same stop are not a reason to go on).
            held = process_of(self.stop.pid) if self.stop is not None else None
            for pid in dict.fromkeys(process_of(stop.pid) for stop in self.log.pending if stop is not self.stop):
                if pid != held:
                    resume(pid)
            self.log.pending = [stop for stop in self.log.pending if stop is self.stop]
            if over:
                break
            if self.stop is None:
                changes.wait(TICK)
        return self.stop

    @property
    def holding(self) -> bool:
        """It is held, and the lock is held now (the lock file exists, or the kernel lists the lock)."""
        return self.stop is not None and not ended(self.running) and lock_held(self.lock_path, self.kind)

    def tracees(self) -> list[int]:
        """The tool's processes (strace itself excluded: a signal to strace would end and detach its child)."""
        return [pid for pid in self.log.pids() if pid != self.running.pid]

    def release(self) -> None:
        self._continue()

    def signal(self, sig: int) -> None:
        """Send `sig` to the tool's processes, then continue the held one, which receives it where it stopped."""
        for pid in self.tracees():
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        self._continue()

    def _continue(self) -> None:
        if self.continuer is None:
            self.log.continue_pending()
            self.continuer = Continuer([self.log], lambda: ended(self.running))

    def close(self) -> None:
        if self.continuer is not None:
            self.continuer.close()
        else:
            self.log.poll()
            self.log.continue_pending()

    def __enter__(self) -> Hold:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _threads(pid: int) -> list[int]:
    """The threads of a process (/proc/PID/task), none once it is gone."""
    try:
        return [int(tid) for tid in os.listdir(f"/proc/{pid}/task") if tid.isdigit()]
    except OSError:
        return []


class KillAfter:
    """SIGKILL an invocation just after the `when`-th call that `meant` matches (a trace line), counted over
    every thread and process it has: for a call strace's per-thread `when=N` cannot single out (a Go tool
    writes from whichever OS thread runs its goroutine, Node from libuv's threadpool while other threads write
    to an eventfd, and a temp file's random name cannot be given to -P).

    The invocation runs under `stop_prefix(prefix, paths, calls, when="1+")`: it stops just after every call of
    `calls`. Once every live thread of the process that stopped has joined the stop (see
    rendezvous.Rendezvous._all_stopped; other processes of the invocation go on), its calls so far are all in the
    trace: if `meant` has matched `when` of them, the process that made the last one is
    killed while it is stopped there (nothing else ran since); else it is continued. `log()` is the killed
    thread's trace (each line led by its thread id, as `strace -f` writes it): the call it was killed after,
    then its `+++ killed by SIGKILL +++`; two matching calls that ended in one stop make it say so instead."""

    def __init__(self, running: Process, prefix: Path, meant: Callable[[str], bool], when: int) -> None:
        self.running, self.stops, self.meant, self.when = running, StopLog(prefix), meant, when
        self.killed: tuple[int, str] | None = None  # (thread, the call it was killed after)
        self.note = ""
        self.continuer: Continuer | None = None

    def run(self, timeout: float, over: Callable[[], bool] | None = None) -> None:
        """Watch the invocation until it is killed or has ended (or `timeout`, or `over()` says the command it
        works for has ended: a daemon does not end); every stop it is left in is continued before returning,
        whatever happens."""
        continued: dict[int, int] = {}
        seen: float | None = None
        deadline = time.monotonic() + timeout
        changes = TraceChanges([self.stops.prefix.parent])
        try:
            while (self.killed is None and not ended(self.running) and time.monotonic() < deadline
                   and not (over is not None and over())):
                self.stops.poll()
                if not self.stops.pending:
                    changes.wait(TICK)
                    continue
                now = time.monotonic()
                seen = seen or now
                # Only the processes that stopped: the others (a parent shell waiting, a shim's helpers) go on.
                groups = {process_of(stop.pid) for stop in self.stops.pending}
                live = [tid for group in groups for tid in _threads(group)
                        if alive(tid)]
                if not (all(self.stops.stopped.get(tid, 0) > continued.get(tid, 0) for tid in live)
                        or now - seen >= JOIN_PATIENCE):
                    changes.wait(TICK)
                    continue
                hits = [(tid, line) for tid, events in self.stops.events.items() for line in events
                        if line != STOPPED and self.meant(line)]
                if len(hits) >= self.when:
                    tid, line = hits[-1]
                    self.killed = (tid, line)
                    if len(hits) > self.when:
                        self.note = f"{len(hits)} such calls had ended at the stop, not {self.when}"
                    os.kill(process_of(tid), signal.SIGKILL)
                    return
                continued, seen = dict(self.stops.stopped), None
                self.stops.continue_pending()
        finally:
            changes.close()
            # The invocation's other processes must not stay stopped: a parent shell whose child was killed here
            # sat in its stop until the invocation's deadline (11 s for `sh -c 'sed -i ...'`), and so read as
            # timed out, no landed kill. Their later stops are continued as they come, until it has ended.
            self.stops.poll()
            self.stops.continue_pending()
            if self.killed is not None:
                self.continuer = Continuer([self.stops], lambda: ended(self.running) or time.monotonic() > deadline)

    def close(self) -> None:
        """Stop continuing the invocation's later stops (once it has ended); whatever is stopped is continued."""
        if self.continuer is not None:
            self.continuer.close()

    def log(self) -> str:
        if self.killed is None:
            return ""
        tid, line = self.killed
        if self.note:
            return f"{tid} clirace: {self.note}\n{tid} +++ killed by SIGKILL +++\n"
        return f"{tid} {line}\n{tid} {STOPPED}\n{tid} +++ killed by SIGKILL +++\n"
