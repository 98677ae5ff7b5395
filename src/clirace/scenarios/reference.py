"""Reference runs: what the tool does alone, before anything runs in parallel.

Each workload's commands run one at a time in a fresh sandbox (the output command twice per input, in two
sandboxes, once in order and once reversed, so that what varies between runs of the same input shows);
the lock's contender and error command run alone on fresh state, twice each (a contender that writes a key, given
{key} and {value}, has it read back). These records are the oracle
for everything after them: checks/reference.py turns a failure here into a spec error (exit 2, before any
parallel round) or, when the commands ended without saying (killed, timed out), into "could not decide".
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from clirace.history import Alone, OutputRound
from clirace.history.vocab import WorkloadKind
from clirace.scenarios import effects
from clirace.scenarios._box import Context, shared_between_sandboxes
from clirace.scenarios.workloads import RUNNERS, Serial
from clirace.spec import Workload

SERIAL_RUNS = 3  # increments, keys and claims run one at a time: enough to show that they add up


def run(ctx: Context) -> None:
    for workload in ctx.workloads:
        record, runner = RUNNERS[workload.kind]
        ctx.say(f"{workload.name}: reference run, one invocation at a time")

        def one_pass(ctx: Context, watched: bool, round_: int, reverse: bool, workload: Workload = workload,
                     record: Any = record, runner: Any = runner) -> None:
            with ctx.box(record, workload.name, round_, setup=workload.setup) as box:
                box.fields.update(workload=workload.name, serial=True)
                runner(ctx, box, workload, Serial(box, reverse, watched),
                       SERIAL_RUNS if record is not OutputRound else ctx.parallel)

        if workload.kind is WorkloadKind.OUTPUT:  # twice, in two sandboxes, in opposite orders: side by side
            _side_by_side_if_alone(ctx, lambda c, w: one_pass(c, w, 0, False), lambda c, w: one_pass(c, w, 1, True))
        else:
            one_pass(ctx, False, 0, False)
    lock = ctx.spec.lock
    if lock is None or not ctx.lock_commands_alone:
        return
    ctx.say("lock: contender and error command alone on fresh state, twice each")

    def alone(ctx: Context, watched: bool, name: str, command: Any, round_: int) -> None:
        with ctx.box(Alone, name, round_) as box:
            box.fields["command"] = name
            if name == "contender":
                effects.state_before(box)
            Serial(box, watched=watched).run([("alone", box.argv(command, **effects.values(box, "alone", command)),
                                               None)])
            effects.read_back(box)  # the key it wrote alone must be found: the lock experiments read theirs so

    _side_by_side_if_alone(ctx, *(lambda c, w, n=name, cmd=command, r=round_: alone(c, w, n, cmd, r)
                                  for name, command in (("contender", lock.contender),
                                                        ("error_command", lock.error_command))
                                  if command is not None for round_ in range(2)))


def _side_by_side_if_alone(ctx: Context, *experiments: Callable[[Context, bool], None]) -> None:
    """Run them side by side, each in a fresh sandbox of its own and watched by strace, when the traces show
    that this kept each one alone: nothing locked or written outside its sandbox. A tool that shares a file
    between sandboxes (a lock file or temp file at a fixed path, /tmp/tool.lock) is not alone side by side:
    they run again one at a time, and only those records are kept, since the reference must be what the tool
    does alone. So do they without strace, or when one ended before its commands ran."""
    if ctx.strace:
        together = dataclasses.replace(ctx, trials=[])
        together.side_by_side(*(lambda c, e=e: e(c, True) for e in experiments))
        shared = shared_between_sandboxes(together.trials)
        # A trial that ended before its commands ran (its setup refused, say by another sandbox's lock) has
        # no trace to show it was alone; one whose commands ran and hung or crashed has, and stands.
        unseen = [t for t in together.trials if t.error and not getattr(t, "traces", None)]
        if not shared and not unseen:
            ctx.trials.extend(together.trials)
            return
        ctx.say("reference runs: " + (f"the tool locked or wrote {shared[0]}, outside its sandbox" if shared else
                                      "one ended before its commands ran") + "; again, one at a time")
    for experiment in experiments:
        experiment(ctx, False)

