"""Watching what the target does to files, through strace where the machine allows it.

strace is optional: `available()` says whether it is installed and may trace (ptrace can be forbidden in
containers), and every caller that needs it reports "not available" instead of passing silently.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
from functools import lru_cache
from pathlib import Path

FILE_CALLS = "open,openat,openat2,creat,rename,renameat,renameat2,mkdir,mkdirat,unlink,unlinkat,flock,fcntl,truncate,ftruncate"
WRITE_CALLS = "write,pwrite64,writev,pwritev,pwritev2"
RENAME_CALLS = "rename,renameat,renameat2"

_LINE = re.compile(r"^(?P<call>\w+)\((?P<args>.*)\)\s+=\s+(?P<ret>-?\d+|\?)(?:<(?P<ret_path>[^>]*)>)?")
# A path argument, with the directory strace -y shows for the dirfd before it (AT_FDCWD</cwd>, 3</dir>): a
# relative path is relative to that, which is the process's own cwd, not necessarily the one it started in.
_STRING = re.compile(r'(?:(?:AT_FDCWD|\d+)<(?P<dir>[^>]*)>,\s*)?"(?P<path>(?:[^"\\]|\\.)*)"')
_OPEN_CALLS = frozenset({"open", "openat", "openat2", "creat"})
# An exclusively created temp file (tmpXXXX, tmp_obj_XXXX, x.tmp, x-temp-1) is not a lock file.
_TEMP_NAME = re.compile(r"^tmp|[._-]te?mp(?:[._-]|$)", re.IGNORECASE)
_FD_CALLS = frozenset(WRITE_CALLS.split(",")) | {"flock", "fcntl", "ftruncate"}
_FD_PATH = re.compile(r"^(\d+)<([^>]*)>")  # strace -y: an fd annotated with its path


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
    """
    writes = f"{WRITE_CALLS},{RENAME_CALLS}"
    return ["strace", "-ff", "-qq", "-y", "-s", "4096", "-e", "signal=none", "-e", f"trace={FILE_CALLS},{WRITE_CALLS}",
            "-e", f"inject={writes}:delay_enter={delay_ms * 1000}", "-o", str(out_prefix), "--"]


def kill_prefix(calls: str, when: int = 1, log: Path | str = "/dev/null") -> list[str]:
    """strace arguments that SIGKILL the process at its `when`-th call of `calls`. The `log` says which
    process was killed (see `killed`): it may be a child of the invocation (a shell script's `mv`), whose
    own exit status then reads 137, not a signal."""
    return ["strace", "-f", "-qq", "-o", str(log), "-e", f"trace={calls}",
            "-e", f"inject={calls}:signal=SIGKILL:when={when}", "--"]


def killed(log: Path) -> bool:
    """Whether a `kill_prefix` run killed a process (any process of the invocation)."""
    try:
        return "+++ killed by SIGKILL +++" in Path(log).read_text(errors="replace")
    except OSError:
        return False


def trace_prefix(out_prefix: Path, calls: str) -> list[str]:
    """strace arguments recording `calls` (fds shown with their paths), one output file per process."""
    return ["strace", "-ff", "-qq", "-y", "-e", "signal=none", "-e", f"trace={calls}", "-o", str(out_prefix), "--"]


def file_events(out_prefix: Path, cwd: str) -> list[dict]:
    """Parse the per-process trace files written by `amplify_prefix` or `trace_prefix` into plain events."""
    events = []
    for trace in sorted(out_prefix.parent.glob(out_prefix.name + ".*")):
        pid = int(trace.suffix[1:]) if trace.suffix[1:].isdigit() else 0
        for line in trace.read_text(errors="replace").splitlines():
            event = parse_line(line, cwd)
            if event:
                event["pid"] = pid
                events.append(event)
    return events


def parse_line(line: str, cwd: str) -> dict | None:
    match = _LINE.match(line.strip())
    if not match:
        return None
    call, args, ret = match["call"], match["args"], match["ret"]
    fd_path = _FD_PATH.match(args)
    if call in _FD_CALLS:  # the strings they print are data, not paths
        paths = [_unescape(fd_path.group(2))] if fd_path else []
    else:
        paths = [_absolute(_unescape(m["path"]), _unescape(m["dir"]) if m["dir"] else cwd)
                 for m in _STRING.finditer(args)]
        if call in _OPEN_CALLS and match["ret_path"]:
            paths = [_unescape(match["ret_path"])]  # the file it really opened, absolute (strace -y on the fd)
    event = {"call": call, "paths": paths, "ok": ret != "?" and not ret.startswith("-"), "args": args[:300]}
    if call in _OPEN_CALLS:
        flags = set(re.findall(r"\bO_[A-Z]+", args))
        event["flags"] = sorted(flags)
        event["writes"] = call == "creat" or bool(flags & {"O_WRONLY", "O_RDWR", "O_CREAT", "O_TRUNC"})
    elif call in ("write", "pwrite64", "writev", "pwritev", "pwritev2"):
        event["writes"] = True
    elif call in ("flock", "fcntl"):
        event["lock"] = bool(re.search(r"LOCK_EX|LOCK_SH|F_SETLK|F_OFD_SETLK", args))
    return event


# strace's quoting of a string or an fd's path: \xNN (with -x/-xx), \NNN octal (1-3 digits: "\377\1"), C escapes.
_ESCAPE = re.compile(r"\\(?:x([0-9a-fA-F]{2})|([0-7]{1,3})|(.))", re.DOTALL)
_C_ESCAPES = {"n": 10, "t": 9, "r": 13, "v": 11, "f": 12, "a": 7, "b": 8, '"': 34, "\\": 92, "'": 39, "?": 63}


def _unescape(text: str) -> str:
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


def written_paths(events: list[dict]) -> list[str]:
    """Files a process created or wrote: opened for writing, or the target of a rename."""
    out = []
    for e in events:
        if not e["ok"]:
            continue
        if e.get("writes") and e["paths"]:
            out.append(e["paths"][0])
        elif e["call"] in ("rename", "renameat", "renameat2") and len(e["paths"]) >= 2:
            out.append(e["paths"][1])
    return list(dict.fromkeys(out))


def summary(events: list[dict], within: str) -> dict:
    """What one invocation did to files under `within`: written paths, in-place rewrites, renames, locks."""
    inside = lambda p: p.startswith(within.rstrip("/") + "/")
    written = [p for p in written_paths(events) if inside(p)]
    in_place = sorted({e["paths"][0] for e in events if e["ok"] and e["call"] in ("open", "openat", "openat2")
                       and e["paths"] and inside(e["paths"][0]) and "O_TRUNC" in e.get("flags", [])
                       and "O_EXCL" not in e.get("flags", [])})
    renames = [e["paths"][:2] for e in events if e["ok"] and e["call"] in ("rename", "renameat", "renameat2")
               and len(e["paths"]) >= 2 and inside(e["paths"][1])]
    renamed_onto = {dst for _, dst in renames}
    root = within.rstrip("/") + "/"
    short = lambda text: text.replace(root, "{sandbox}/")  # noqa: E731 - paths read the same in every trial
    return {"written": [short(p) for p in written],
            "in_place": [short(p) for p in in_place if p not in renamed_onto],  # replaced by rename in the end
            "renamed_onto": sorted(short(dst) for dst in renamed_onto),
            "locks": [short(m) for m in mechanisms(events)]}


def mechanisms(events: list[dict]) -> list[str]:
    """The locking mechanisms a trace shows, in words, with the file each one is on."""
    found = []
    # A file created with O_EXCL and then renamed is a temp file (mkstemp), not a lock file.
    renamed = {e["paths"][0] for e in events if e["call"].startswith("rename") and e["paths"]}
    for e in events:
        path = e["paths"][0] if e["paths"] else "?"
        if e.get("lock") and e["call"] == "flock":
            found.append(f"flock on {path}")
        elif e.get("lock") and e["call"] == "fcntl":
            found.append(f"fcntl record lock on {path}")
        elif ("O_EXCL" in e.get("flags", []) and "O_CREAT" in e.get("flags", []) and path not in renamed
              and not _TEMP_NAME.search(os.path.basename(path))):  # git's objects/xx/tmp_obj_*: linked, not renamed
            found.append(f"lock file created with O_CREAT|O_EXCL: {path}")
        elif path.endswith(("-journal", "-wal")):
            found.append(f"sqlite ({os.path.basename(path)})")
    return list(dict.fromkeys(found))
