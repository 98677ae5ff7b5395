"""The options of one run (`clirace check`'s, or `clirace.check()`'s), apart from the pipeline that takes them:
the command line builds them before it imports the pipeline, so that a bad spec is refused without loading
every check."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Options:
    seed: int | None = None
    rounds: int | None = None
    parallel: int | None = None
    budget: float | None = None  # seconds of extra workload rounds after the spec's (--budget)
    only: tuple[str, ...] = ()  # check ids; empty means all
    keep: bool = False
    strace: bool = True
    allow_outside_sandbox: bool = False
    confidence: float | None = None  # --confidence/--rate, recorded with the rounds they asked for
    rate: float | None = None
    shard: tuple[int, int] | None = None  # (K, N) of --shard K/N: this run does the K-th of N shares of the work
