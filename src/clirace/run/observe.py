"""Watching what the target does to files, through strace where the machine allows it.

strace is optional: `available()` says whether it is installed and may trace (ptrace can be forbidden in
containers), and every caller that needs it reports "not available" instead of passing silently.
"""
from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
from collections.abc import Iterator
from functools import lru_cache
from pathlib import Path

from clirace.history import FileOp
from clirace.run import locking
from clirace.run.locking import RENAMES as RENAMES  # re-exported: older callers
from clirace.run.locking import written_paths as written_paths

FILE_CALLS = "open,openat,openat2,creat,close,rename,renameat,renameat2,mkdir,mkdirat,unlink,unlinkat,link,linkat,flock,fcntl,truncate,ftruncate"
WRITE_CALLS = "write,pwrite64,writev,pwritev,pwritev2"
RENAME_CALLS = "rename,renameat,renameat2"
# Which program a process runs and which threads and processes it starts (FileOp.child).
PROCESS_CALLS = frozenset({"execve", "clone", "clone3", "fork", "vfork"})

_LINE = re.compile(r"^(?:(?P<at>\d+\.\d+)\s+)?(?P<call>\w+)\((?P<args>.*)\)\s+=\s+(?P<ret>-?\d+|\?)(?:<(?P<ret_path>[^>]*)>)?")
# A path argument, with the directory strace -y shows for the dirfd before it (AT_FDCWD</cwd>, 3</dir>): a
# relative path is relative to that, which is the process's own cwd, not necessarily the one it started in.
_STRING = re.compile(r'(?:(?:AT_FDCWD|\d+)<(?P<dir>[^>]*)>,\s*)?"(?P<path>(?:[^"\\]|\\.)*)"')
_OPEN_CALLS = frozenset({"open", "openat", "openat2", "creat"})
# Calls on an fd, first argument: the strings strace prints after it are data (what was read or written), not paths.
_FD_CALLS = (frozenset(WRITE_CALLS.split(",")) | {"read", "pread64", "readv", "preadv", "preadv2"}
             | {"flock", "fcntl", "ftruncate", "close", "fsync", "fdatasync"})
_FD_PATH = re.compile(r"^(\d+)<([^>]*)>")  # strace -y: an fd annotated with its path
_MMAP_FD = re.compile(r"^(?:[^,]*,\s*){4}(\d+)<([^>]*)>")  # mmap(addr, length, prot, flags, FD<path>, offset)


def strace_path() -> str:
    """strace by absolute path: a target's own PATH (tool.env) may not have it."""
    return shutil.which("strace") or "strace"


@lru_cache(maxsize=1)
def available() -> tuple[bool, str]:
    """(usable, why not). Disabled on purpose with CLIRACE_NO_STRACE=1 (tests of the fallback use it)."""
    if os.environ.get("CLIRACE_NO_STRACE"):
        return False, "strace disabled by CLIRACE_NO_STRACE"
    path = shutil.which("strace")
    if not path:
        return False, "strace is not installed (apt-get install strace)"
    try:
        probe = subprocess.run([path, "-f", "-qq", "-o", "/dev/null", "-e", "trace=getpid", "true"],
                               capture_output=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, f"strace could not run ({exc})"
    if probe.returncode != 0:
        reason = probe.stderr.decode(errors="replace").strip().splitlines()[-1:] or ["unknown error"]
        return False, f"strace cannot trace here (ptrace not permitted?): {reason[0]}"
    return True, ""


def amplify_prefix(out_prefix: Path, delay_ms: int) -> list[str]:
    """Trace file operations (one output file per process) and delay every write and rename by `delay_ms`.

    Why writes and renames: they end a read-modify-write. Delaying them keeps a process inside its window
    (state read, result not yet saved) long enough for the others to read the same stale state; and an
    in-place writer's file stays truncated meanwhile. Reads and opens are left alone: the interpreter's own
    imports would soak up the delay and spread the starts instead of widening the window.

    --seccomp-bpf stops each process only at the calls traced, not at every call: the delays still land (strace
    6.1 injects delays from a seccomp stop; only signal injection needs every stop, run/stopper.py), and a traced
    round costs about a third less CPU (8.4 s against 5.8 s of CPU for ten `counter incr` of the level-3 tool).
    """
    writes = f"{WRITE_CALLS},{RENAME_CALLS}"
    return [strace_path(), "-ff", "-qq", "-y", "-ttt", "--seccomp-bpf", "-s", "4096", "-e", "signal=none", "-e", f"trace={FILE_CALLS},{WRITE_CALLS}",
            "-e", f"inject={writes}:delay_enter={delay_ms * 1000}", "-o", str(out_prefix), "--"]


def kill_prefix(calls: str, when: int = 1, log: Path | str = "/dev/null", path: str | None = None,
                attach: int | None = None) -> list[str]:
    """strace arguments that SIGKILL the process at its `when`-th call of `calls` (with `path`, the
    `when`-th of those on that path). The `log` shows which call of which process was killed (fds with their
    paths): it may be a child of the invocation (a shell script's `mv`), whose own exit status then reads
    137, not a signal. With `attach`, the whole command line, attaching to that running process (counting
    from then on) instead of starting one.

    Why `path`: strace counts `when` per thread. In a multi-threaded writer, "the 2nd write" without a path
    is whichever thread writes twice first, often not the one writing the config; restricted to the
    config's path (-P), only the calls on it are traced and counted."""
    only = ["-P", path] if path else []
    target = ["-p", str(attach)] if attach is not None else ["--"]
    return [strace_path(), "-f", "-qq", "-y", *only, "-o", str(log), "-e", f"trace={calls}",
            "-e", f"inject={calls}:signal=SIGKILL:when={when}", *target]


def killed(log: Path) -> bool:
    """Whether a `kill_prefix` run killed a process (any process of the invocation)."""
    return any("+++ killed by SIGKILL +++" in line for line in own_lines(log))


TRACE_CAP = 64 * 1024 * 1024  # bytes of one strace output file read; a real one is far smaller


def open_own(path: Path | str) -> int | None:
    """An fd to read a file strace wrote for clirace, or None when it is missing or not a regular file."""
    through_fd = re.fullmatch(r"/proc/\d+/fd/\d+", os.fspath(path)) is not None  # a magic link: must be followed
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | (0 if through_fd else os.O_NOFOLLOW))
    except OSError:
        return None
    if stat.S_ISREG(os.fstat(fd).st_mode):
        return fd
    os.close(fd)
    return None


def own_lines(path: Path | str, cap: int = TRACE_CAP) -> Iterator[str]:
    """The lines of a file strace wrote for clirace, read a chunk at a time up to `cap` bytes: nothing if it is
    not a regular file (a link, FIFO or device planted where it was expected is never followed or read).
    Only the last component is opened without following: it may be under /proc/PID/fd/N (the trace directory,
    reached through clirace's fd on it), or be that fd itself (a kill log)."""
    fd = open_own(path)
    if fd is None:
        return
    try:
        partial, left = b"", cap
        while left > 0:
            chunk = os.read(fd, min(1 << 20, left))
            if not chunk:
                break
            left -= len(chunk)
            lines = (partial + chunk).split(b"\n")
            partial = lines.pop()
            yield from (line.decode(errors="replace") for line in lines)
        if partial:
            yield partial.decode(errors="replace")
    finally:
        os.close(fd)


def trace_prefix(out_prefix: Path, calls: str) -> list[str]:
    """strace arguments recording `calls` (fds shown with their paths, times since the epoch), one output file per
    process."""
    return [strace_path(), "-ff", "-qq", "-y", "-ttt", "-s", "4096", "-e", "signal=none", "-e", f"trace={calls}", "-o",
            str(out_prefix), "--"]


def file_events(out_prefix: Path, cwd: str, within: str | None = None) -> tuple[FileOp, ...]:
    """Parse the per-process trace files written by `amplify_prefix` or `trace_prefix` into file operations.

    With `within` (the sandbox), only what concerns the run is kept: operations on paths under it, and every
    write or lock anywhere. An interpreter's thousands of read-only opens of its own modules are dropped.
    """
    ops = []
    root = within.rstrip("/") + "/" if within else None
    for trace in sorted(out_prefix.parent.glob(out_prefix.name + ".*")):
        pid = int(trace.suffix[1:]) if trace.suffix[1:].isdigit() else 0
        for line in own_lines(trace):
            if root is not None and _elsewhere(line, root):
                continue
            op = parse_line(line, cwd, pid)
            if op and (root is None or op.writes or op.lock or op.call in PROCESS_CALLS
                       or any(p.startswith(root) for p in op.paths)):
                ops.append(op)
    # In the order they happened, across threads and processes (traces with times: -ttt); per process as written.
    return tuple(sorted(ops, key=lambda op: op.at))


# The bulk of a trace, an interpreter opening and closing its own modules, as file_events would drop it: a
# read-only open that returned an fd on a file named without escapes, or a close of such an fd. Read by one
# regular expression, not parsed (parse_line costs several times as much), when that file is outside the sandbox.
_OPEN_ELSEWHERE = re.compile(r"\s*(?:\d+\.\d+\s+)?(?:open|openat|openat2)\(.*\)\s+=\s+\d+<([^>\\]+)>\s*$")
_CLOSE = re.compile(r"\s*(?:\d+\.\d+\s+)?close\(\d+<([^>\\]*)>\)\s+=")
_WRITING_FLAGS = ("O_WRONLY", "O_RDWR", "O_CREAT", "O_TRUNC")  # anywhere in the line: then it is parsed


def _elsewhere(line: str, root: str) -> bool:
    """Whether file_events would drop this line for `root` (see _OPEN_ELSEWHERE); False when unsure."""
    found = _CLOSE.match(line)
    if found is None and not any(flag in line for flag in _WRITING_FLAGS):
        found = _OPEN_ELSEWHERE.match(line)
    return found is not None and not found[1].startswith(root)


def parse_line(line: str, cwd: str, pid: int = 0) -> FileOp | None:
    match = _LINE.match(line.strip())
    if not match:
        return None
    call, args, ret = match["call"], match["args"], match["ret"]
    on_fd = call in _FD_CALLS or call == "mmap"
    fd_path = (_MMAP_FD if call == "mmap" else _FD_PATH).match(args)
    if on_fd:  # the strings they print are data, not paths
        paths = [unescape(fd_path.group(2))] if fd_path else []
    else:
        paths = [_absolute(unescape(m["path"]), unescape(m["dir"]) if m["dir"] else cwd)
                 for m in _STRING.finditer(args)]
        if call in _OPEN_CALLS and match["ret_path"]:
            paths = [unescape(match["ret_path"])]  # the file it really opened, absolute (strace -y on the fd)
    flags: tuple[str, ...] = ()
    writes = lock = False
    if call in _OPEN_CALLS:
        flags = tuple(sorted(set(re.findall(r"\bO_[A-Z]+", args))))
        writes = call == "creat" or bool(set(flags) & {"O_WRONLY", "O_RDWR", "O_CREAT", "O_TRUNC"})
    elif call in ("write", "pwrite64", "writev", "pwritev", "pwritev2"):
        writes = True
    elif call in ("flock", "fcntl"):
        lock = locking.kernel_lock(args)
    elif call in locking.LINKS:
        lock = True  # a link to a new name is a lock call wherever it lands (a fixed /tmp/tool.lock too)
    ok = ret != "?" and not ret.startswith("-")
    # Which fd: a close of fd 1 shows the path of whatever file fd 1 is now (a temp file renamed onto the state
    # reads as the state), so "closed the fd it read through" needs the number, not the path.
    fd = int(ret) if call in _OPEN_CALLS and ok else int(fd_path.group(1)) if on_fd and fd_path else None
    child = None
    if call in PROCESS_CALLS:  # which program (its argv kept whole in args), which new thread or process
        paths = paths[:1] if call == "execve" else []
        child = int(ret) if ok and call != "execve" else None
    return FileOp(pid=pid, call=call, paths=tuple(paths), ok=ok, flags=flags, writes=writes, lock=lock,
                  args=args if call == "execve" else args[:300], fd=fd, at=float(match["at"] or 0), child=child)


# strace's quoting of a string or an fd's path: \xNN (with -x/-xx), \NNN octal (1-3 digits: "\377\1"), C escapes.
_ESCAPE = re.compile(r"\\(?:x([0-9a-fA-F]{2})|([0-7]{1,3})|(.))", re.DOTALL)
_C_ESCAPES = {"n": 10, "t": 9, "r": 13, "v": 11, "f": 12, "a": 7, "b": 8, '"': 34, "\\": 92, "'": 39, "?": 63}


def unescape(text: str) -> str:
    """A path exactly as the kernel saw it, whatever bytes it holds: strace's escapes turned back into bytes,
    then os.fsdecode (a UTF-8 name such as tōol reads as itself; bytes that are not UTF-8 round-trip as
    surrogate escapes). strace escapes every byte outside printable ASCII, in octal by default and in hex
    with -xx, and '<' '>' inside an fd's <path>, so the trace itself is ASCII."""
    if "\\" not in text:
        return text
    out = bytearray()
    position = 0
    for match in _ESCAPE.finditer(text):
        out += text[position:match.start()].encode("utf-8", "surrogateescape")
        hexa, octal, char = match.groups()
        if hexa:
            out.append(int(hexa, 16))
        elif octal:
            out.append(int(octal, 8) & 0xFF)
        elif char in _C_ESCAPES:
            out.append(_C_ESCAPES[char])
        else:  # not an escape strace makes: kept as written
            out += ("\\" + char).encode("utf-8", "surrogateescape")
        position = match.end()
    out += text[position:].encode("utf-8", "surrogateescape")
    return os.fsdecode(bytes(out))


def _absolute(path: str, cwd: str) -> str:
    return path if path.startswith("/") or not cwd else os.path.normpath(os.path.join(cwd, path))


# --- readings of traced file operations that both the attack (scenarios/aim.py) and the checks need --------------

OWN_DIRS = ("io/", "trace/")  # clirace's inputs, outputs and traces in a sandbox, relative to its root
TEMP_DIRS = ("tmp/", "run/")  # the sandbox's TMPDIR and XDG_RUNTIME_DIR, relative to its root


def shared_paths(ops: tuple[FileOp, ...], sandbox: str) -> list[str]:
    """Files an invocation locked or wrote outside its sandbox (a hard-coded /tmp/tool.lock, /var/lib/tool/):
    what every sandbox shares, so runs in two sandboxes are not independent. Devices, /proc and Python's
    __pycache__ (written once per program, by O_EXCL temp file and rename) are not state."""
    root = sandbox.rstrip("/") + "/"
    reading = locking.read([ops])
    locked = {locking.lock_path(op) for op in ops if op.paths and reading.held(op)}
    return sorted(p for p in locked | set(written_paths(ops))  # (a pipe or socket reads "pipe:[123]": no file)
                  if p.startswith("/") and not p.startswith((root, "/dev/", "/proc/")) and "/__pycache__/" not in p)


LOCK_CALLS = "open,openat,openat2,creat,link,linkat,flock,fcntl"  # every call a lock is asked with (locking.CALLS)


def lock_prefix(out_prefix: Path) -> list[str]:
    """strace arguments that record only the calls a lock is asked with, stopping the process at those calls only
    (--seccomp-bpf): a contender's tries at a held lock, at little cost to its timing."""
    return [strace_path(), "-ff", "-qq", "-y", "--seccomp-bpf", "-e", "signal=none", "-e", f"trace={LOCK_CALLS}",
            "-o", str(out_prefix), "--"]


def watch_prefix(out_prefix: Path) -> list[str]:
    """strace arguments that only record file operations (one output file per process). --seccomp-bpf stops the
    process at those calls only, not at every call: about 20 ms on a Python start-up, against 140 ms without."""
    return [strace_path(), "-ff", "-qq", "-y", "--seccomp-bpf", "-e", "signal=none", "-e",
            f"trace={FILE_CALLS},{WRITE_CALLS}", "-o", str(out_prefix), "--"]
