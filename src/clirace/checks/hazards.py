"""Hazards (advice beside no-silent-corruption): what the traced rounds show a tool doing to its state that
opens a race window, whether or not a round lost anything. The rounds decide the criterion; these say why
they may fail on another day, with the calls that show it:

- the state is read before any lock is taken (a lock taken after the read protects nothing), or no lock at all
  (an open of a state file made only to lock it is no read; a failed exclusive create of a marker is no lock; a
  round whose servers saw a lock taken, SET NX, an advisory lock or FOR UPDATE, did lock: strace cannot see it,
  and which invocation's connection took it is not known, so no "without any lock call" is said there);
- a temp file at a fixed path is written by every invocation (two runs clobber each other's);
- a lock file created with O_EXCL is left behind by an invocation that ended normally;
- the state is rewritten in place (opened with O_TRUNC, or truncated) rather than replaced by a rename, so a
  reader or a crash in the middle of the write sees it torn. (A keys workload's config is left to CR603, in
  atomic-config-writes, which also samples and kills its writers.)

What is a lock file and what is state is run/locking.py's reading, the rendezvous's too: a state file the tool locks
through its own fd (lockf on the config, then truncate and write) is state.
"""
from __future__ import annotations

from collections import Counter

from clirace.checks import _served
from clirace.checks._common import finding, records
from clirace.checks.findings import NOT_APPLICABLE, PASS, Finding, Verdict
from clirace.history import FileOp, History, WorkloadRound
from clirace.run import locking
from clirace.run.locking import RENAMES, written_paths
from clirace.run.observe import OWN_DIRS, TEMP_DIRS

ID = "hazards"


def _rel(path: str, root: str) -> str:
    return path[len(root):] if path.startswith(root) else ""


def _to_its_lock(ops: tuple[FileOp, ...], n: int, reading: locking.Reading) -> bool:
    """Whether the open at `ops[n]` is the way to a lock on that very file: the next call on the fd it returned
    is a lock call (lockf or flock on the state file itself), so nothing was read before the lock."""
    opened = ops[n]
    after = next((op for op in ops[n + 1:] if op.pid == opened.pid and op.fd == opened.fd), None)
    return opened.fd is not None and after is not None and reading.attempt(after)


def _read_first(ops: tuple[FileOp, ...]) -> set[str]:
    """Files this trace read before it wrote them: state it changes (read, then replaced), never a temp file of its
    own, which is written first (a scratch file read back afterwards too)."""
    seen: set[str] = set()
    out: set[str] = set()
    for op in ops:
        if not op.ok or not op.paths:
            continue
        if op.paths[0] not in seen and op.call in ("open", "openat", "openat2") and not op.writes:
            out.add(op.paths[0])
        seen.update(op.paths)
    return out


def _round_hazards(trial: WorkloadRound) -> list[Finding]:
    root = trial.sandbox.rstrip("/") + "/"
    writers: Counter[str] = Counter()
    for ops in trial.traces.values():
        writers.update({r for p in written_paths(ops) if (r := _rel(p, root)) and not r.startswith(OWN_DIRS)})
    everyone = len(trial.traces)
    reading = locking.read(trial.traces.values(), ignore=tuple(root + d for d in OWN_DIRS))
    locks = {_rel(p, root) for p in reading.lock_files}  # (state locked in place is still state)
    renamed_away = {_rel(op.paths[0], root) for ops in trial.traces.values() for op in ops
                    if op.call in RENAMES and op.paths}
    config = getattr(trial, "config", None)
    said = _rel(config.path, root) if config is not None else ""  # the state the spec names (a keys workload's)
    # Found by its writers (two at least), or named by the spec: a tool that refuses rather than waits can have
    # a single writer of its config in a round, and its reads of it are a state read all the same.
    state = locking.state_files(trial.traces, trial.sandbox, OWN_DIRS, TEMP_DIRS, min_writers=2) | (
        {said} if said else set())
    server_locked = bool(_served.locks_taken(trial))
    out: list[Finding] = []
    # The state itself is no temp file, even kept under TMPDIR or renamed away to a backup before its rewrite.
    state_read = {_rel(p, root) for ops in trial.traces.values() for p in _read_first(ops)}
    fixed_temps = sorted(p for p, n in writers.items() if n == everyone > 1 and p not in locks and p not in state_read
                         and (p in renamed_away or p.startswith(TEMP_DIRS)))
    if fixed_temps:
        out.append(finding("CR703", trial, list(trial.traces)[:2], "a temp path of its own per run",
                           f"all {everyone} wrote {fixed_temps[0]}", path=fixed_temps[0], count=everyone))
    for label, ops in trial.traces.items():
        first_read = next((n for n, op in enumerate(ops) if op.call in ("open", "openat", "openat2") and op.ok
                           and op.paths and _rel(op.paths[0], root) in state and not _to_its_lock(ops, n, reading)),
                          None)
        first_lock = next((n for n, op in enumerate(ops) if reading.attempt(op)), None)  # tried, even if refused
        if first_lock is None and server_locked:
            continue
        if first_read is not None and (first_lock is None or first_read < first_lock):
            read = ops[first_read]
            def shown(op: FileOp) -> str:
                return f"{op.call}({op.paths[0].replace(root, '{sandbox}/')})"
            how = (f"{shown(read)} came before any lock call" if first_lock is None else
                   f"{shown(read)} came before {shown(ops[first_lock])}")
            out.append(finding("CR701" if first_lock is not None else "CR702", trial, [label],
                               "the lock taken before the state is read", how, label=label,
                               path=_rel(read.paths[0], root), how=how))
            break
    for label, ops in trial.traces.items():
        renamed_onto = {_rel(op.paths[1], root) for op in ops if op.ok and op.call in RENAMES and len(op.paths) > 1}
        rewrite = next((op for op in ops if op.ok and op.paths and (r := _rel(op.paths[0], root)) in state
                        and r != said and r not in renamed_onto and "O_EXCL" not in op.flags
                        and ("O_TRUNC" in op.flags or op.call in ("ftruncate", "truncate"))), None)
        if rewrite is not None:
            path = _rel(rewrite.paths[0], root)
            how = f"{rewrite.call}({rewrite.paths[0].replace(root, '{sandbox}/')}{', O_TRUNC' if 'O_TRUNC' in rewrite.flags else ''})"
            out.append(finding("CR705", trial, [label], "a temp file renamed over the state", how, label=label,
                               path=path, how=how))
            break
    for label, ops in trial.traces.items():
        inv = trial.invocation(label)
        if inv is None or not inv.ok:
            continue
        created = [locking.lock_path(op) for op in ops if op.ok and op.paths
                   and (locking.exclusive_create(op) or locking.linked(op))
                   and locking.lock_path(op) in reading.lock_files]
        gone = {op.paths[0] for op in ops if op.ok and op.paths and op.call in ("unlink", "unlinkat", *RENAMES)}
        left = [p for p in created if p not in gone]
        if left:
            out.append(finding("CR704", trial, [label], "the lock file removed on exit", f"{left[0]} left",
                               label=label, path=_rel(left[0], root)))
            break
    return out


def check(history: History) -> Verdict:
    traced = [t for t in history.trials if isinstance(t, WorkloadRound) and t.traces and not t.error
              and not t.serial]
    if not traced:
        return Verdict(ID, NOT_APPLICABLE, "no traced round to read hazards from")
    seen: dict[str, Finding] = {}
    for trial in traced:
        for f in _round_hazards(trial):
            seen.setdefault(f"{f.code}/{trial.workload}", f)
    found = list(seen.values())
    if not found:
        return Verdict(ID, PASS, f"the traces of {len(traced)} round(s) show no read before a lock, no shared "
                       "fixed temp path, no lock file left behind, no state rewritten in place", read=records(traced))
    return Verdict(ID, PASS, f"advice from the traces: {'; '.join(f.message() for f in found[:3])}", found,
                   read=records(traced))
