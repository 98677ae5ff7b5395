"""Reference runs: what the tool does alone, before anything runs in parallel.

Each workload's commands run one at a time in a fresh sandbox (the output command twice per input, in two
sandboxes, once in order and once reversed, so that what varies between runs of the same input shows);
the lock's contender and error command run alone on fresh state, twice each. These records are the oracle
for everything after them: checks/reference.py turns a failure here into a spec error (exit 2, before any
parallel round) or, when the commands ended without saying (killed, timed out), into "could not decide".
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from ..history import Alone, OutputRound, Trial
from ..spec import Workload
from ..vocab import WorkloadKind
from ._box import Context
from .workloads import RUNNERS, Serial

SERIAL_RUNS = 3  # increments, keys and claims run one at a time: enough to show that they add up


def run(ctx: Context) -> None:
    for workload in ctx.spec.workloads:
        if ctx.only and workload.kind.value not in ctx.only:
            continue
        record, runner = RUNNERS[workload.kind]
        ctx.say(f"{workload.name}: reference run, one invocation at a time")

        def one_pass(ctx: Context, round_: int, reverse: bool, workload: Workload = workload, record: Any = record,
                     runner: Any = runner) -> None:
            with ctx.box(record, workload.name, round_, setup=workload.setup) as box:
                box.fields.update(workload=workload.name, serial=True)
                runner(ctx, box, workload, Serial(box, reverse), SERIAL_RUNS if record is not OutputRound else ctx.parallel)

        if workload.kind is WorkloadKind.OUTPUT:  # twice, in two sandboxes, in opposite orders: side by side
            _side_by_side_if_alone(ctx, [lambda c: one_pass(c, 0, False), lambda c: one_pass(c, 1, True)],
                                   lambda trials: _all_ok(trials) and _same_outputs(trials))
        else:
            one_pass(ctx, 0, False)
    lock = ctx.spec.lock
    if lock is None or (ctx.only and not _lock_only(ctx)):
        return
    ctx.say("lock: contender and error command alone on fresh state, twice each")

    def alone(ctx: Context, name: str, command: Any, round_: int) -> None:
        with ctx.box(Alone, name, round_) as box:
            box.fields["command"] = name
            box.run("alone", command)

    _side_by_side_if_alone(ctx, [lambda ctx, n=name, c=command, r=round_: alone(ctx, n, c, r)
                                 for name, command in (("contender", lock.contender),
                                                       ("error_command", lock.error_command))
                                 if command is not None for round_ in range(2)], _all_ok)


def _side_by_side_if_alone(ctx: Context, experiments: list[Callable[[Context], None]],
                           agree: Callable[[list[Trial]], bool]) -> None:
    """Run them side by side, each in a fresh sandbox of its own, which keeps each one alone, unless the tool
    shares something between sandboxes (a lock file or temp file at a fixed path, /tmp/tool.lock). Then they
    fail or disagree side by side, and they run again one at a time: only those records are kept, since the
    reference must be what the tool does alone."""
    together = dataclasses.replace(ctx, trials=[])
    together.side_by_side(*experiments)
    if agree(together.trials):
        ctx.trials.extend(together.trials)
        return
    ctx.say("reference runs side by side failed or disagreed (does the tool share a file between sandboxes?): "
            "again, one at a time")
    for experiment in experiments:
        experiment(ctx)


def _all_ok(trials: list[Trial]) -> bool:
    return all(not t.error and all(inv.ok for inv in t.invocations) for t in trials)


def _same_outputs(trials: list[Trial]) -> bool:
    produced = [{label: run.produced for label, run in t.runs.items()} for t in trials if isinstance(t, OutputRound)]
    return all(p == produced[0] for p in produced)


def _lock_only(ctx: Context) -> bool:
    """Whether --only asks for a lock check (the reference runs of the lock commands are then needed)."""
    return any(name.startswith("lock-") for name in ctx.only)
