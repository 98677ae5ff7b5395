"""What a trace says about locking, in one place: which calls take a lock, which files are lock files and
which are the tool's state. The observation lines (checks/_observed.py), the hazards (checks/hazards.py),
the rendezvous's aim (scenarios/aim.py), the stopper (run/stopper.py) and the side-by-side rule
(observe.shared_paths) all read traces through here, so they cannot disagree; a better reading applies to
histories saved before it (it reads FileOp's call, flags, args and result, not a verdict stored at the time).

- **A lock call** asks for a lock: flock(LOCK_EX/LOCK_SH), fcntl(F_SETLK, F_SETLKW, F_OFD_SETLK*) with a read
  or write lock (lockf is fcntl underneath), an exclusive create (O_CREAT|O_EXCL), or a link(2)/linkat(2) of a
  file made for the purpose onto the lock's name (shadow-utils, liblockfile, mail dotlocks: a temp file holding
  the pid, linked to FILE.lock; the link fails with EEXIST while another holds it). It *takes* the lock only
  when it returned without error: a failed exclusive create or link (EEXIST) took nothing. Unlocking (LOCK_UN,
  F_UNLCK) is no lock call. The lock's path is the link's new name (`lock_path`), the file linked to it a temp
  file.
- **A lock file** is a file whose role is to be locked: an exclusively created file that more than one
  invocation tried to create (two creates of one path exclude each other: that is what makes it a lock), or,
  seen in one trace only, one that is neither renamed away nor named like a temp file (mkstemp's tmpXXXX and
  .name.XXXXXXXX are temp files, not locks; git's config.lock is both, and contended in every round), and so is
  the new name of a link made the same way; and a
  file locked with flock/fcntl that no invocation writes, or that protects another file (locked, then
  something else rewritten: level3's lock file, with its holder record in it).
- **State locked in place** is not a lock file: a file a tool locks through its own fd and then rewrites, with
  nothing else written (lockf on the config, then truncate and write; sqlite's database, whose journal is
  removed again). It is state for the rendezvous and the hazards like any other.
"""
from __future__ import annotations

import os
import re
from collections.abc import Iterable
from dataclasses import dataclass

from clirace.history import FileOp

# The calls of each lock kind a spec can name (lock.hold.take.kind), as strace names them.
CALLS = {"exclusive-create": "open,openat,openat2,creat", "flock": "flock", "fcntl": "fcntl", "link": "link,linkat",
         # SQLite's write lock is a byte-range fcntl lock on the database (its RESERVED byte)
         "sqlite-write": "fcntl"}
LINKS = ("link", "linkat")
RENAMES = ("rename", "renameat", "renameat2")
_OPENS = frozenset(CALLS["exclusive-create"].split(","))
_KERNEL_LOCK = re.compile(r"\bLOCK_(?:EX|SH)\b|\bF_(?:OFD_)?SETLKW?\b")
_UNLOCK = re.compile(r"\bLOCK_UN\b|\bF_UNLCK\b")
_CONTENT_WRITES = frozenset({"write", "pwrite64", "writev", "pwritev", "pwritev2", "ftruncate", "truncate"})
# An exclusively created temp file: tmpXXXX, tmp_obj_XXXX, x.tmp, x-temp-1, or a random suffix (.name.k3j9x_2a).
_TEMP_NAME = re.compile(r"^tmp|[._-]te?mp(?:[._-]|$)|(?<=[.-])(?=[A-Za-z0-9_]*[0-9])[A-Za-z0-9_]{6,10}$",
                        re.IGNORECASE)
# A tail that may be random (.k3j9xabc): with no digit in it (8% of Python's tempfile names) the name alone cannot
# tell it from a word (.lockfile), but two different tails after one stem in one folder are two temp files.
_RANDOM_TAIL = re.compile(r"(?<=[.-])[A-Za-z0-9_]{6,10}$")


def _random_siblings(paths: Iterable[str]) -> set[str]:
    """The paths that share a folder and a stem with another path and differ from it only in a random-looking
    tail: mkstemp's names, one per invocation (a lock file has one name, whoever makes it)."""
    by_stem: dict[tuple[str, str], set[str]] = {}
    for path in paths:
        name = os.path.basename(path)
        tail = _RANDOM_TAIL.search(name)
        if tail:
            by_stem.setdefault((os.path.dirname(path), name[:tail.start()]), set()).add(path)
    return {path for group in by_stem.values() if len(group) >= 2 for path in group}


def kernel_lock(args: str) -> bool:
    """Whether the arguments of a flock or fcntl call ask for a lock (not to drop one, nor F_GETFL and the like)."""
    return bool(_KERNEL_LOCK.search(args)) and not _UNLOCK.search(args)


def exclusive_create(op: FileOp) -> bool:
    return op.call in _OPENS and {"O_CREAT", "O_EXCL"} <= set(op.flags)


def linked(op: FileOp) -> bool:
    """A link(2) or linkat(2) to a new name: it creates that name or fails, as an exclusive create does."""
    return op.call in LINKS and len(op.paths) >= 2


def lock_path(op: FileOp) -> str:
    """The file a lock call locks: a link's new name, else the call's own path."""
    return op.paths[1] if linked(op) else op.paths[0] if op.paths else ""


def asks(op: FileOp, kind: str | None = None) -> bool:
    """Whether the call asks for a lock (of `kind`, when given), whatever the answer."""
    if kind is not None and op.call not in CALLS[kind].split(","):
        return False
    if op.call in ("flock", "fcntl"):
        return kernel_lock(op.args)
    return exclusive_create(op) or linked(op) or (kind == "exclusive-create" and op.call == "creat")


def takes(op: FileOp, kind: str | None = None) -> bool:
    """Whether the call took a lock: asked for one and returned without error."""
    return op.ok and asks(op, kind)


RETRIES_SHOWN = 3  # refused tries at one lock that make a retry loop rather than one look at the lock
_NON_BLOCKING = re.compile(r"\bLOCK_NB\b|\bF_(?:OFD_)?SETLK\b")


def waited_in_trace(ops: Iterable[FileOp]) -> str:
    """What the trace of a contender that ran while another held the lock shows of its waiting for that lock ("" when
    nothing does): a blocking lock call (flock without LOCK_NB, F_SETLKW) that returned only with an error (its
    timeout cut it short), or RETRIES_SHOWN or more refused tries at one lock (a retry loop: exclusive creates or
    links refused with EEXIST, LOCK_NB or F_SETLK refused). One refused try and then a sleep shows neither."""
    refused: dict[str, list[FileOp]] = {}
    for op in ops:
        if op.ok or not asks(op):
            continue
        if op.call in ("flock", "fcntl") and not _NON_BLOCKING.search(op.args):
            return f"its trace shows it blocked in {op.call}({op.args}) until the call was cut short"
        refused.setdefault(lock_path(op), []).append(op)
    for path, tries in refused.items():
        if len(tries) >= RETRIES_SHOWN:
            return f"its trace shows {len(tries)} tries at {path} refused ({tries[0].call}): retrying the lock"
    return ""


def _content_written(ops: Iterable[FileOp]) -> tuple[set[str], set[str]]:
    """(files whose content the trace changed, files it removed or renamed away)."""
    written, gone = set(), set()
    for op in ops:
        if not op.ok or not op.paths:
            continue
        if op.call in _CONTENT_WRITES or (op.call in _OPENS and "O_TRUNC" in op.flags):
            written.add(op.paths[0])
        elif op.call in RENAMES and len(op.paths) >= 2:
            written.add(op.paths[1])
            gone.add(op.paths[0])
        elif op.call in ("unlink", "unlinkat"):
            gone.add(op.paths[0])
    return {p for p in written if p.startswith("/") and not p.startswith(("/dev/", "/proc/"))}, gone


@dataclass(frozen=True)
class Reading:
    """What a set of traces (one per invocation) shows about locking; see the module docstring."""
    lock_files: frozenset[str] = frozenset()  # files locked for their own sake: never state
    locked_state: frozenset[str] = frozenset()  # state files locked through their own fd: still state
    temps: frozenset[str] = frozenset()  # exclusively created temp files (mkstemp): neither lock nor state

    def attempt(self, op: FileOp) -> bool:
        """A lock call, taken or refused: a kernel lock on any file, an exclusive create of a lock file (a failed
        exclusive create of anything else, a marker made once, is no lock)."""
        if not asks(op) or not op.paths:
            return False
        return op.call in ("flock", "fcntl") or lock_path(op) in self.lock_files

    def held(self, op: FileOp) -> bool:
        """A lock call that took a lock (an exclusive create of a temp file took none)."""
        return op.ok and self.attempt(op)


def read(traces: Iterable[tuple[FileOp, ...]], ignore: tuple[str, ...] = ()) -> Reading:
    """Read the traces of one round (or one trace). `ignore`: path prefixes that are clirace's own files
    (a run's inputs and outputs), never evidence of what a lock protects."""
    traces = [tuple(ops) for ops in traces]
    creators: dict[str, int] = {}  # exclusively created (or linked-to) path -> traces that tried to
    created, renamed_away, link_sources = set(), set(), set()
    kernel_locked: dict[str, list[tuple[set[str], set[str]]]] = {}  # path -> (written, gone) of each locker
    for ops in traces:
        written, gone = _content_written(ops)
        written -= gone  # removed again (a journal) or renamed away (a temp file): not what a lock protects
        written = {p for p in written if not p.startswith(ignore)} if ignore else written
        renamed_away |= {op.paths[0] for op in ops if op.ok and op.call in RENAMES and op.paths}
        for path in {lock_path(op) for op in ops if (exclusive_create(op) and op.paths) or linked(op)}:
            creators[path] = creators.get(path, 0) + 1
        created |= {lock_path(op) for op in ops if op.ok and ((exclusive_create(op) and op.paths) or linked(op))}
        link_sources |= {op.paths[0] for op in ops if linked(op)}  # the pid file linked to the lock's name
        for path in {op.paths[0] for op in ops if op.call in ("flock", "fcntl") and asks(op) and op.paths}:
            kernel_locked.setdefault(path, []).append((written, gone))
    lock_files, temps = set(), set()
    siblings = _random_siblings(path for path in created if creators[path] == 1)
    for path in created:
        if creators[path] >= 2 or (path not in renamed_away and path not in siblings
                                   and not _TEMP_NAME.search(os.path.basename(path))):
            lock_files.add(path)
        else:
            temps.add(path)
    locked_state: set[str] = set()
    for path, lockers in kernel_locked.items():
        rewritten = any(path in written for written, _ in lockers)
        protects_another = any(written - {path} for written, _ in lockers)
        (locked_state if rewritten and not protects_another else lock_files).add(path)
    lock_files -= link_sources  # made with O_EXCL, maybe, but only to be linked to the lock's name
    temps |= link_sources
    return Reading(frozenset(lock_files), frozenset(locked_state - lock_files), frozenset(temps - lock_files))


def state_files(traces: dict[str, tuple[FileOp, ...]], root: str, own: tuple[str, ...], temp_dirs: tuple[str, ...],
                min_writers: int = 1) -> set[str]:
    """The tool's state in a traced round, relative to the sandbox `root`: files written by at least
    `min_writers` invocations, neither lock files nor temp files (renamed away, exclusively created temps, or
    under the sandbox's TMPDIR / XDG_RUNTIME_DIR), nor clirace's `own` directories. State locked in place
    stays state. Where some of it is shared (touched by two or more invocations), a file that one invocation
    alone touched is that invocation's own (npm's debug log, named by the time it started), not state; where
    none is (the others refused by a lock before they opened anything), every one stays."""
    root = root.rstrip("/") + "/"
    reading = read(traces.values(), ignore=tuple(root + d for d in own))
    writers: dict[str, int] = {}
    touched: dict[str, int] = {}  # how many invocations made any call on it (a rename onto it too)
    gone_at_end: set[str] = set()  # renamed away or removed by the last call on it, in some trace
    there_at_end: set[str] = set()  # written or renamed onto by the last call on it, in some trace
    for ops in traces.values():
        for path in {_rel(p, root) for p in written_paths(ops)} - {""}:
            writers[path] = writers.get(path, 0) + 1
        for path in {_rel(p, root) for op in ops for p in op.paths} - {""}:
            touched[path] = touched.get(path, 0) + 1
        last: dict[str, bool] = {}  # path -> whether the last call on it left it there
        for op in ops:
            if not op.ok or not op.paths:
                continue
            if op.call in RENAMES and len(op.paths) >= 2:
                last[op.paths[0]], last[op.paths[1]] = False, True
            elif op.call in ("unlink", "unlinkat"):
                last[op.paths[0]] = False
            elif op.writes:
                last[op.paths[0]] = True
        gone_at_end |= {_rel(p, root) for p, there in last.items() if not there}
        there_at_end |= {_rel(p, root) for p, there in last.items() if there}
    # A file renamed away as a backup and then replaced by a rename onto it (rclone: rclone.conf -> .old, a temp
    # -> rclone.conf, .old removed) is the state all the same; what no trace leaves behind is a temp or a lock.
    not_state = {_rel(p, root) for p in reading.lock_files | reading.temps} | (gone_at_end - there_at_end)
    state = {p for p, n in writers.items() if n >= min_writers and p not in not_state
             and not p.startswith(own + temp_dirs)}
    return {p for p in state if touched[p] > 1} or state


def written_paths(ops: tuple[FileOp, ...]) -> list[str]:
    """Files a process created or wrote: opened for writing, or the target of a rename."""
    out = []
    for op in ops:
        if not op.ok:
            continue
        if op.writes and op.paths:
            out.append(op.paths[0])
        elif op.call in RENAMES and len(op.paths) >= 2:
            out.append(op.paths[1])
    return list(dict.fromkeys(out))


def _rel(path: str, root: str) -> str:
    return path[len(root):] if path.startswith(root) else ""
