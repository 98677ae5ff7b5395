"""What traced file operations mean: files written, in-place rewrites, renames, and locking mechanisms.

The history keeps the operations strace saw; these readings of them live here, beside the checks, so that
a better reading (a new kind of lock file, say) applies to histories saved before it.
"""
from __future__ import annotations

import os
import re
from collections import Counter
from dataclasses import dataclass

from clirace.history import FileOp, History, Trial, WorkloadRound
from clirace.run import locking
from clirace.run.locking import RENAMES, written_paths


@dataclass(frozen=True)
class Summary:
    """What one invocation did to files in its sandbox; paths shown as {sandbox}/..."""
    written: list[str]
    in_place: list[str]  # opened with O_TRUNC and never replaced by a rename
    renamed_onto: list[str]
    locks: list[str]  # locking mechanisms, in words


def summary(ops: tuple[FileOp, ...], within: str, reading: locking.Reading | None = None) -> Summary:
    """`reading`: what the whole round shows about its locks (locking.read), when there is one; else this trace's."""
    root = within.rstrip("/") + "/"

    def inside(path: str) -> bool:
        return path.startswith(root)

    def short(text: str) -> str:  # paths read the same in every trial
        return text.replace(root, "{sandbox}/")

    written = [p for p in written_paths(ops) if inside(p)]
    in_place = sorted({op.paths[0] for op in ops if op.ok and op.call in ("open", "openat", "openat2") and op.paths
                       and inside(op.paths[0]) and "O_TRUNC" in op.flags and "O_EXCL" not in op.flags})
    renamed_onto = {op.paths[1] for op in ops if op.ok and op.call in RENAMES and len(op.paths) >= 2
                    and inside(op.paths[1])}
    # A file renamed away or removed again (a temp file, link(2)'s pid file) was never state rewritten in place.
    gone = {op.paths[0] for op in ops if op.ok and op.paths and op.call in (*RENAMES, "unlink", "unlinkat")}
    temps = (reading or locking.read([ops])).temps | gone
    return Summary(written=[short(p) for p in written],
                   in_place=[short(p) for p in in_place if p not in renamed_onto and p not in temps],  # replaced by rename in the end
                   renamed_onto=sorted(short(dst) for dst in renamed_onto),
                   locks=[short(m) for m in mechanisms(ops, reading)])


def mechanisms(ops: tuple[FileOp, ...], reading: locking.Reading | None = None) -> list[str]:
    """The locking mechanisms a trace shows, in words, with the file each one is on (which calls are lock calls:
    run/locking.py; a temp file made with O_EXCL, or a failed exclusive create of a marker, is none)."""
    reading = reading or locking.read([ops])
    found = []
    for op in ops:
        path = locking.lock_path(op) or "?"
        if reading.attempt(op):
            found.append(f"flock on {path}" if op.call == "flock" else f"fcntl record lock on {path}"
                         if op.call == "fcntl" else f"lock file made by {op.call}(2): {path}" if locking.linked(op)
                         else f"lock file created with O_CREAT|O_EXCL: {path}")
        elif path.endswith(("-journal", "-wal")):
            found.append(f"sqlite ({os.path.basename(path)})")
    return list(dict.fromkeys(found))


_RECENT: dict[int, tuple[Trial, dict[str, Summary]]] = {}  # id -> (the trial, its summaries): see summaries()
_KEPT = 16


def summaries(trial: Trial) -> dict[str, Summary]:
    """label -> Summary, for a trial whose invocations were traced (empty otherwise); read-only.

    The last few trials' are kept: the evidence of every finding of a round, the checks that read its traces and
    the observed lines all ask about the same round, and reading its traces again each time was most of the time
    spent judging a big history (a 500-round one: 37 s of 70 s under cProfile)."""
    kept = _RECENT.get(id(trial))
    if kept is not None and kept[0] is trial:
        return kept[1]
    traces = getattr(trial, "traces", None) or {}
    reading = locking.read(traces.values())
    out = {label: summary(ops, trial.sandbox, reading) for label, ops in traces.items()}
    if len(_RECENT) >= _KEPT:
        del _RECENT[next(iter(_RECENT))]
    _RECENT[id(trial)] = (trial, out)
    return out


def describe(trial: Trial) -> str:
    """One sentence on how the traced invocations of a trial wrote files: shared paths, in-place writes, locks."""
    observed = summaries(trial)
    if not observed:
        return ""
    n = len(observed)
    writers = Counter(path for s in observed.values() for path in set(s.written))
    parts = [f"all {n} invocations wrote {path}" if count == n else f"{count} of {n} invocations wrote {path}"
             for path, count in writers.most_common() if count > 1][:2]
    in_place = sorted({p for s in observed.values() for p in s.in_place})
    if in_place:
        parts.append(f"rewrote {', '.join(in_place[:2])} in place (O_TRUNC) instead of temp + rename")
    renamed = sorted({p for s in observed.values() for p in s.renamed_onto})
    if renamed:
        parts.append(f"replaced {', '.join(renamed[:2])} by rename")
    locks = sorted({m for s in observed.values() for m in s.locks})
    parts.append(f"locking seen: {', '.join(locks)}" if locks else "no lock call seen (flock, fcntl, O_EXCL, link)")
    return "; ".join(parts)


def observed_lines(history: History) -> list[str]:
    """How the tool was seen to lock and write, from every traced round (empty without strace).

    Paths that differ only by a random part (a run id, a mkstemp suffix) are shown once, with a count.
    """
    lines: dict[str, set[str]] = {}
    traced = False

    def note(template: str, path: str) -> None:
        if not path.startswith("{sandbox}/io/"):  # clirace's own input and output files
            lines.setdefault(template.format(_shape(path)), set()).add(path)

    for trial in history.trials:
        if not isinstance(trial, WorkloadRound):  # session runs and kill traces would repeat them per id
            continue
        for s in summaries(trial).values():
            traced = True
            for lock in s.locks:
                note("locks with {}", lock)
            for path in s.renamed_onto:
                note("replaces {} by rename (atomic)", path)
            for path in s.in_place:
                note("rewrites {} in place (O_TRUNC)", path)
    if traced and not any(line.startswith("locks with") for line in lines):
        lines["no lock call seen in any traced invocation (flock, fcntl, O_CREAT|O_EXCL)"] = set()
    return [line + (f" ({len(paths)} distinct paths)" if len(paths) > 1 else "") for line, paths in lines.items()]


def _shape(path: str) -> str:
    """A path with its random parts (hex run ids, mkstemp suffixes) replaced by *."""
    path = re.sub(r"[0-9a-f]{8,}", "*", path)
    return re.sub(r"(?<=[.-])(?=[A-Za-z0-9_]*[0-9])[A-Za-z0-9_]{6,10}$", "*", path)
