"""Shards: one check spread over several machines (`clirace check --shard K/N`), and its histories joined again
(`clirace judge H1 H2 ...`).

Every shard plans the whole check (the same plan, from the same seed) and runs its share of it: the reference
runs (the oracle every round is judged against) in every shard, the workload rounds whose index is K-1 modulo N,
and every N-th of the other stages. A shard judged alone therefore shows the other shards' parts as missing,
undecided, never passed. Joined, the histories hold every planned part once, and every bound counts every
shard's rounds. Random choices flow from the seed and each trial's identity, so a round makes the same choices
in whichever shard runs it.

Histories are joined only when they are shards of one check: the same spec bytes, the same tool files, the same
seed, rounds, width, options and clirace version, each shard of the same N once.
"""
from __future__ import annotations

import dataclasses
import hashlib
import os
import shutil
from pathlib import Path

from clirace.errors import HistoryError, UsageError
from clirace.history import Alone, History, Trial, WorkloadRound


def parse(text: str) -> tuple[int, int]:
    """'K/N' -> (K, N), 1 <= K <= N <= 1000; a UsageError in words otherwise."""
    k, _, n = text.partition("/")
    try:
        shard, of = int(k), int(n)
    except ValueError:
        shard, of = 0, 0
    if not 1 <= shard <= of <= 1000:
        raise UsageError(f"--shard {text!r} is not K/N with 1 <= K <= N <= 1000.",
                         hint="e.g. --shard 1/2 on one machine and --shard 2/2 on another, with the same --seed.")
    return shard, of


def owns(shard: tuple[int, int] | None, index: int) -> bool:
    """Whether this run does part `index` (a round, a stage): every part without shards."""
    return shard is None or index % shard[1] == shard[0] - 1


def label(shard: tuple[int, int] | None) -> str:
    return f"{shard[0]}/{shard[1]}" if shard else ""


def _sha256(paths: list[Path]) -> str:
    digest = hashlib.sha256()
    for path in paths:
        try:
            digest.update(path.read_bytes())
        except OSError:
            digest.update(b"unreadable:" + str(path).encode())
    return digest.hexdigest() if paths else ""


def fingerprints(spec_path: Path, command: tuple[str, ...], spec_dir: Path, env_path: str | None = None) -> tuple[str, str]:
    """(the spec file's sha256, the tool's files' sha256): tool.command's program and every argument of it that
    names a file (a script run by an interpreter). `command` comes with {spec_dir} and {python} already expanded
    (the caller's spec placeholders); an argument still holding a placeholder names no file yet."""
    files: list[Path] = []
    for n, part in enumerate(command):
        found = shutil.which(part, path=env_path or os.environ.get("PATH")) if n == 0 and "/" not in part else None
        candidate = Path(found) if found else (Path(part) if Path(part).is_absolute() else spec_dir / part)
        if "{" not in part and candidate.is_file():
            files.append(candidate.resolve())
    return _sha256([spec_path]), _sha256(files)


def _same_check(first: History, other: History, where: str) -> None:
    """Refuse to join histories that are not shards of one check, naming what differs."""
    a, b = first.options, other.options
    differences = [
        ("spec file", first.environment.spec_sha256, other.environment.spec_sha256),
        ("tool's files", first.environment.tool_sha256, other.environment.tool_sha256),
        ("clirace version", first.environment.clirace_version, other.environment.clirace_version),
        ("seed", a.seed, b.seed), ("rounds", first.environment.rounds, other.environment.rounds),
        ("parallel", first.environment.parallel, other.environment.parallel),
        ("--only", a.only, b.only), ("strace", first.environment.strace, other.environment.strace),
        ("number of shards", a.shard.partition("/")[2], b.shard.partition("/")[2]),
    ]
    for what, mine, theirs in differences:
        if mine != theirs:
            raise HistoryError(f"is not a shard of the same check as {first.spec_path!r}'s first history: its "
                               f"{what} differs ({theirs!r}, not {mine!r}).", where=where,
                               hint="Join only the histories of one `clirace check --shard K/N` matrix, run with "
                                    "the same spec, tool, --seed and options.")


def _identity(trial: Trial) -> tuple[object, ...]:
    """What makes a record the same part of the plan in two shards: the reference runs, which every shard makes."""
    return (type(trial).__name__, trial.name, getattr(trial, "round", None), getattr(trial, "command", None))


def _is_reference(trial: Trial) -> bool:
    return isinstance(trial, Alone) or (isinstance(trial, WorkloadRound) and trial.serial)


def _answered(trial: Trial) -> bool:
    """Whether a reference record can be the oracle: carried out, and every command it counts gave an answer."""
    return not trial.error and trial.unanswered() is None


def merge(histories: list[History], names: list[str]) -> History:
    """One history of the whole check from its shards' histories (a single history is returned as it is)."""
    if len(histories) == 1:
        return histories[0]
    shards: dict[str, str] = {}
    for history, where in zip(histories, names, strict=True):
        if not history.options.shard:
            raise HistoryError("is not the history of a shard (`clirace check --shard K/N`): there is nothing to "
                               "join it with.", where=where, hint="Judge it alone: `clirace judge FILE`.")
        _same_check(histories[0], history, where)
        if history.options.shard in shards:
            raise HistoryError(f"is shard {history.options.shard} again (also {shards[history.options.shard]}).",
                               where=where, hint="Give each shard's history once.")
        shards[history.options.shard] = where
    ordered = sorted(histories, key=lambda h: int(h.options.shard.partition("/")[0]))
    # Every shard ran the oracle: the first shard's copy that answered judges them all (the first copy when none
    # did), so that one shard's stalled reference run does not leave the whole check undecided.
    oracle: dict[tuple[object, ...], tuple[int, Trial]] = {}  # identity -> (shard index, its copy)
    for index, history in enumerate(ordered):
        for trial in history.trials:
            if _is_reference(trial) and not (isinstance(trial, WorkloadRound) and trial.superseded):
                _, chosen = oracle.setdefault(_identity(trial), (index, trial))
                if chosen is not trial and _answered(trial) and not _answered(chosen):
                    oracle[_identity(trial)] = index, trial
    trials: list[Trial] = []
    for index, history in enumerate(ordered):
        superseded: list[Trial] = []  # a reference pass that ran again: kept with the pass after it, or dropped with it
        for trial in history.trials:
            if isinstance(trial, WorkloadRound) and trial.superseded:
                superseded.append(trial)
                continue
            if _is_reference(trial) and oracle[_identity(trial)][0] != index:
                superseded = []
                continue
            trials += [*superseded, trial]
            superseded = []
        trials += superseded
    first = ordered[0]
    # A shard that was not given leaves its parts of the plan without records: undecided (checks/_plan.py).
    stopped = "; ".join(f"shard {h.options.shard}: {h.stopped}" for h in ordered if h.stopped)
    return dataclasses.replace(
        first, trials=trials, options=dataclasses.replace(first.options, shard=""), stopped=stopped,
        not_removed=tuple(p for h in ordered for p in h.not_removed),
        environment=dataclasses.replace(first.environment, stage_seconds={}))
