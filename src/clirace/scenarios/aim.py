"""Where to stop the invocations of a rendezvous round, from what an earlier traced round saw them do.

The state is what several invocations of the round wrote (in place or by rename): a counter file, a config,
a queue; clirace's own io/ and trace/ files are not. The window of a read-modify-write opens at the first
read of that state, so by default each invocation stops just after it. A tool that reads its state and only
then takes its lock (kubectl: the kubeconfig, then config.lock with O_EXCL) has its window between the
read and the lock: it stops just after its lock call instead, every invocation holding the state it read.
This chooses the attack; whether it found anything is for the checks to say.
"""
from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass

from ..history import FileOp, WorkloadRound
from ..stopper import LOCK_CALLS, READ_CALLS

OPEN_LOCK_CALLS = LOCK_CALLS["exclusive-create"]
_OWN = ("io/", "trace/")  # clirace's inputs, outputs and traces in the sandbox


@dataclass(frozen=True)
class Aim:
    paths: tuple[str, ...]  # relative to the sandbox
    calls: str
    why: str


def aim(traced: WorkloadRound) -> Aim | None:
    """Where to stop, from a traced round's file operations; None when they show no shared state."""
    root = traced.sandbox.rstrip("/") + "/"
    writers: Counter[str] = Counter()
    for ops in traced.traces.values():
        writers.update({p[len(root):] for p in _written(ops) if p.startswith(root)})
    state = sorted(p for p, n in writers.items() if n >= 2 and not p.startswith(_OWN))
    if not state:
        return None
    lock = _read_before_lock(traced, root, set(state))
    if lock is not None:
        return Aim((lock,), OPEN_LOCK_CALLS, "its lock call, which comes after it has read its state")
    return Aim(tuple(state), READ_CALLS, "the first read of its state")


def _written(ops: tuple[FileOp, ...]) -> set[str]:
    out = {op.paths[0] for op in ops if op.ok and op.writes and op.paths}
    out |= {op.paths[1] for op in ops if op.ok and op.call.startswith("rename") and len(op.paths) > 1}
    return out


def _read_before_lock(traced: WorkloadRound, root: str, state: set[str]) -> str | None:
    """The lock file (relative) of a tool that opened its state before creating its lock file with O_EXCL."""
    for ops in traced.traces.values():
        first_state = first_lock = None
        lock_path = ""
        for n, op in enumerate(ops):
            rel = op.paths[0][len(root):] if op.paths and op.paths[0].startswith(root) else ""
            if first_state is None and rel in state and op.call in ("open", "openat", "openat2"):
                first_state = n
            if (first_lock is None and op.ok and "O_EXCL" in op.flags and "O_CREAT" in op.flags and rel
                    and rel not in state and not os.path.basename(rel).startswith(("tmp", "."))):
                first_lock, lock_path = n, rel
        if first_state is not None and first_lock is not None and first_state < first_lock:
            return lock_path
    return None
