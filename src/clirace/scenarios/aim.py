"""Where to stop the invocations of a rendezvous round, from what an earlier traced round saw them do.

The state is what several invocations of the round wrote (in place or by rename): a counter file, a config,
a queue; clirace's own io/ and trace/ files are not, nor lock files (created with O_EXCL). The window of a
read-modify-write opens at the first read of that state, so each invocation stops just after it, and they
are then released in turn (rendezvous.Rendezvous.release_in_turn): a tool that reads before it locks
(kubectl: the kubeconfig, then config.lock) writes back what it read before the others wrote. This
chooses the attack; whether it found anything is for the checks to say.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from ..history import WorkloadRound
from ..observe import OWN_DIRS, RENAMES, TEMP_DIRS, takes_lock, written_paths
from ..stopper import READ_CALLS


@dataclass(frozen=True)
class Aim:
    paths: tuple[str, ...]  # relative to the sandbox
    calls: str
    why: str


def aim(traced: WorkloadRound) -> Aim | None:
    """Where to stop, from a traced round's file operations; None when they show no shared state."""
    root = traced.sandbox.rstrip("/") + "/"
    writers: Counter[str] = Counter()
    locks: set[str] = set()
    for ops in traced.traces.values():
        writers.update({p[len(root):] for p in written_paths(ops) if p.startswith(root)})
        locks |= {op.paths[0][len(root):] for op in ops if op.paths and takes_lock(op)}
    renamed_away = {op.paths[0][len(root):] for ops in traced.traces.values() for op in ops
                    if op.ok and op.call in RENAMES and op.paths}
    # Written by any of them (a tool that refuses most callers may have had one writer in the traced round),
    # but not clirace's files, lock files, temp files (renamed away, or under TMPDIR / XDG_RUNTIME_DIR).
    state = sorted(p for p in writers if not p.startswith(OWN_DIRS + TEMP_DIRS) and p not in locks
                   and p not in renamed_away)
    if not state:
        return None
    if _reads_apart(traced, root, set(state)):
        # It reads the state through an fd of its own and writes it through another: stop once that reading
        # fd is closed, when the whole state has been read (a stop after the first read would let a late
        # second read see the file another invocation rewrote meanwhile: a torn read, not a lost update).
        return Aim(tuple(state), "close", "the end of its reading of its state (the reading fd closed)")
    return Aim(tuple(state), READ_CALLS, "the first read of its state")


def _reads_apart(traced: WorkloadRound, root: str, state: set[str]) -> bool:
    """Whether the invocations read their state through an fd of its own, closed before they write it: the
    first open of the state is read-only, and a close of it comes before any write to it. (A tool that never
    closes its reading fd, jq, leaves that to the kernel at exit: a stop at close would never come.)"""
    for ops in traced.traces.values():
        on_state = [op for op in ops if op.paths and op.paths[0][len(root):] in state]
        # The first open attempt, found or not (the first writer of a fresh sandbox finds no file to read).
        first = next((op for op in on_state if op.call in ("open", "openat", "openat2")), None)
        if first is None or {"O_WRONLY", "O_RDWR"} & set(first.flags):
            continue
        rest = on_state[on_state.index(first) + 1:]
        # Its own reading fd, closed: not another fd whose file now bears the state's name (jq's stdout, a temp
        # file another invocation renamed onto the state, closes as the state).
        closed = next((n for n, op in enumerate(rest) if op.call == "close" and op.pid == first.pid
                       and first.fd is not None and op.fd == first.fd), None)
        written = next((n for n, op in enumerate(rest) if op.writes or op.call in RENAMES), None)
        if closed is not None and (written is None or closed < written):
            return True
    return False
