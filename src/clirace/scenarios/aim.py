"""Where to stop the invocations of a rendezvous round, from what an earlier traced round saw them do.

The state is what the invocations of the round wrote (in place or by rename): a counter file, a config, a
queue; clirace's own io/ and trace/ files are not, nor lock files, nor temp files, nor, where some file is
shared, a file one invocation alone touched (its own log; locking.state_files). A state file a tool locks
through its own fd is still state.

The window of a read-modify-write runs from the read whose content is written back to the write. So each
invocation is stopped where its *last* read of the state before its window closes has ended: before its
first lock call (a lock taken after the read protects nothing: kubectl reads its kubeconfig, then creates
config.lock), or else before its first write of the state. A tool that reads its state twice (a check, then
the load; Go's loaders on two goroutines) is stopped after the second read, not the first, or it would read
its predecessor's write when let go. The invocations are then released in turn
(rendezvous.Rendezvous.release_in_turn): each writes back what it read before the others wrote. A tool that
locks before it reads has no read before its lock: it is stopped at its first read, inside its critical
section, and the others wait at the lock. This chooses the attack; whether it found anything is for the
checks to say.
"""
from __future__ import annotations

from dataclasses import dataclass

from clirace.history import FileOp, WorkloadRound
from clirace.run import locking
from clirace.run.observe import OWN_DIRS, RENAMES, TEMP_DIRS
from clirace.run.rendezvous import CLOSE_CALLS
from clirace.run.stopper import READ_CALLS

_OPENS = ("open", "openat", "openat2")


@dataclass(frozen=True)
class Aim:
    paths: tuple[str, ...]  # the state, relative to the sandbox
    calls: str  # what each invocation is stopped after, every time, on the state and lock files
    why: str
    ends: str = "read"  # what ends a read of the state: "read" (a read call) or "close" (rendezvous.Arrival)
    count: int = 1  # arrived after this many ends of a read
    locks: tuple[str, ...] = ()  # lock files, relative: traced too, so that a refused lock call shows


def aim(traced: WorkloadRound) -> Aim | None:
    """Where to stop, from a traced round's file operations; None when they show no shared state."""
    root = traced.sandbox.rstrip("/") + "/"
    # Written by any of them (a tool that refuses most callers may have had one writer in the traced round).
    state = sorted(locking.state_files(traced.traces, traced.sandbox, OWN_DIRS, TEMP_DIRS))
    if not state:
        return None
    reading = locking.read(traced.traces.values(), ignore=tuple(root + d for d in OWN_DIRS))
    locks = tuple(sorted(p[len(root):] for p in reading.lock_files if p.startswith(root)))
    windows = [w for w in (_window(ops, {root + p for p in state}, reading) for ops in traced.traces.values()) if w]
    closed = [reads for reads, still_open in windows if reads and not still_open]
    if windows and len(closed) == len(windows):
        count = min(closed)
        nth = {1: "", 2: "second ", 3: "third "}.get(count, f"{count}th ")
        return Aim(tuple(state), CLOSE_CALLS, f"the end of its {nth}read of its state, its last before it locks or "
                   "writes (the reading fd closed, or no state found)", "close", count, locks)
    return Aim(tuple(state), READ_CALLS, "the first read of its state", "read", 1, locks)


def _window(ops: tuple[FileOp, ...], state: set[str], reading: locking.Reading) -> tuple[int, bool] | None:
    """(reads of the state that ended before the window closed, whether one was still open then); None for an
    invocation that neither locked nor wrote its state (it failed first: nothing to learn from it).

    The window closes at the first lock call (taken or refused) or the first write of the state. A read ends at
    the close of its fd, or at once for an open that found no state (reading "nothing" is a read: the tool
    starts from empty)."""
    # A list, not a set: threads merged in the order their calls began can show a second open returning the fd
    # number before the first thread's close of it (Go's two loader goroutines); each close ends one read.
    reads, open_fds = 0, list[tuple[int, int | None]]()
    for _n, op in enumerate(ops):
        on_state = bool(op.paths) and op.paths[0] in state
        if reading.attempt(op):  # (an fd of the state opened only to be locked has read nothing yet)
            return reads, bool({fd for _, fd in open_fds} - {op.fd})
        if (on_state and _writes_state(op)) or (op.call in RENAMES and len(op.paths) > 1 and op.paths[1] in state):
            return reads, bool(open_fds)
        if not on_state:
            continue
        if op.call in _OPENS and not op.ok:
            reads += 1
        elif op.call in _OPENS and op.fd is not None:
            open_fds.append((op.pid, op.fd))
        elif op.call == "close" and op.fd in {fd for _, fd in open_fds}:  # its own reading fd (any thread's):
            # not another fd whose file now bears the state's name (jq's stdout, a temp file renamed onto it)
            open_fds.remove(next(entry for entry in open_fds if entry[1] == op.fd))
            reads += 1
    return None


def _writes_state(op: FileOp) -> bool:
    if op.call in _OPENS:
        return op.ok and bool({"O_WRONLY", "O_TRUNC"} & set(op.flags))
    return op.call in ("write", "pwrite64", "writev", "pwritev", "pwritev2", "ftruncate", "truncate")
