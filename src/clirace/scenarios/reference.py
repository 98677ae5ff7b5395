"""Reference runs: what the tool does alone, before anything runs in parallel.

Each workload's commands run one at a time in a fresh sandbox (the output command twice per input, in two
sandboxes, once in order and once reversed, so that what varies between runs of the same input shows);
the lock's contender and error command run alone on fresh state, twice each (a contender that writes a key, given
{key} and {value}, has it read back), and the holder's command and the contender with its lock-wait option once
each (holds_alone, waits_alone). These records are the oracle
for everything after them: checks/reference.py turns a failure here into a spec error (exit 2, before any
parallel round) or, when the commands ended without saying (killed, timed out), into "could not decide".
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from clirace.checks.reference import unanswered
from clirace.history import UNANSWERED_ALONE, Alone, Invocation, OutputRound, WorkloadRound
from clirace.history.vocab import HoldMode, Outcome, WorkloadKind
from clirace.run import safefs
from clirace.scenarios import effects
from clirace.scenarios._box import Box, Context, shared_between_sandboxes
from clirace.scenarios.workloads import RUNNERS, Serial
from clirace.spec import Hold, Lock, OwnCommand, Workload

SERIAL_RUNS = 3  # increments, keys and claims run one at a time: enough to show that they add up
# The lock commands whose silence alone leaves the lock undecided (the holder's and the waiter's are judged where
# they run): one that gave no answer runs again once (history.UNANSWERED_ALONE).
RUN_AGAIN_UNANSWERED = ("contender", "error_command")


def run(ctx: Context) -> None:
    for workload in ctx.workloads:
        record, runner = RUNNERS[workload.kind]
        ctx.say(f"{workload.name}: reference run, one invocation at a time")

        def one_pass(ctx: Context, watched: bool, round_: int, reverse: bool, workload: Workload = workload,
                     record: Any = record, runner: Any = runner) -> None:
            # A pass in which a command gave no answer (an add, a run or the read-back killed at its deadline)
            # leaves its workload undecided. Once may be the machine's doing (a client stalled under load), so it
            # runs once more in a fresh sandbox; the first pass stays in the history as the evidence (superseded,
            # never judged), and a second silence stands.
            for again in (False, True):
                with ctx.box(record, workload.name, round_, setup=workload.setup) as box:
                    box.fields.update(workload=workload.name, serial=True)
                    runner(ctx, box, workload, Serial(box, reverse, watched),
                           SERIAL_RUNS if record is not OutputRound else ctx.parallel)
                done = ctx.trials[-1]
                silent = unanswered(done)
                if again or silent is None or not isinstance(done, WorkloadRound):
                    return
                ctx.trials[-1] = dataclasses.replace(done, superseded=True)
                ctx.say(f"{workload.name}: reference run, {silent.label} {silent.ending()}, without an answer; again, "
                        "in a fresh sandbox")

        if workload.kind is WorkloadKind.OUTPUT:  # twice, in two sandboxes, in opposite orders: side by side
            _side_by_side_if_alone(ctx, lambda c, w: one_pass(c, w, 0, False), lambda c, w: one_pass(c, w, 1, True))
        else:
            one_pass(ctx, False, 0, False)
    lock = ctx.spec.lock
    if lock is None or not ctx.lock_commands_alone:
        return
    ctx.say("lock: contender and error command alone on fresh state, twice each" +
            (", and the holder's command once" if holds_alone(lock.hold) else "") +
            (", and the contender with its lock-wait option once" if waits_alone(lock) else ""))

    def alone(ctx: Context, watched: bool, name: str, command: Any, round_: int) -> None:
        # A contender or error command that gave no answer alone (killed at its deadline) leaves every lock
        # experiment undecided. Once may be the machine's doing (a stall under load), so it runs once more in a
        # fresh sandbox; its first run is kept in the record as the evidence, and a second silence stands.
        unanswered = None
        for _ in range(2):
            one_alone(ctx, watched, name, command, round_, unanswered)
            trial = ctx.trials[-1]
            inv = trial.invocation("alone")
            if unanswered or name not in RUN_AGAIN_UNANSWERED or trial.error or inv is None or \
                    inv.outcome is not Outcome.UNKNOWN:
                return
            ctx.trials.pop()
            unanswered = inv
            ctx.say(f"lock: {name} alone {inv.ending()}, without an answer; again, in a fresh sandbox")

    def one_alone(ctx: Context, watched: bool, name: str, command: Any, round_: int,
                  unanswered: Invocation | None) -> None:
        with ctx.box(Alone, name, round_) as box:
            box.fields["command"] = name
            if name == "contender":
                effects.state_before(box)
            if name == "holder":
                job = _holder_alone(box, lock.hold)
            elif name == "waiter":  # the contender with the lock-wait option, as the lock-wait experiment runs it
                timeouts = {"timeout_ms": int(lock.wait * 1000), "timeout_s": f"{lock.wait:g}"}
                env = {var: box.path(value, **timeouts) for var, value in lock.wait_env}
                job = ("alone", box.argv(command, lock.wait_option or (), **timeouts,
                                         **effects.values(box, "alone", command)), env or None)
            else:
                job = ("alone", box.argv(command, **effects.values(box, "alone", command)), None)
            Serial(box, watched=watched).run([job])
            effects.read_back(box)  # the key it wrote alone must be found: the lock experiments read theirs so
            if unanswered is not None:  # (its times are on its own trial's clock)
                box.invocations.append(dataclasses.replace(unanswered, label=UNANSWERED_ALONE))

    commands = (("contender", lock.contender), ("error_command", lock.error_command))
    runs: list[tuple[str, Any, int]] = [(name, command, round_) for name, command in commands
                                        if command is not None for round_ in range(2)]
    # Every command a lock experiment runs is first seen to succeed alone: the holder's, and the contender with the
    # lock-wait option (a misspelt option is the spec's error, not a lock wait that fails).
    if holds_alone(lock.hold):
        runs.append(("holder", lock.hold.command, 0))
    if waits_alone(lock):
        runs.append(("waiter", lock.contender, 0))
    _side_by_side_if_alone(ctx, *(lambda c, w, n=name, cmd=command, r=round_: alone(c, w, n, cmd, r)
                                  for name, command, round_ in runs))


def holds_alone(hold: Hold) -> bool:
    """Whether the holder runs a command of the spec's (a parked command, a hook, or hold.run), which then runs
    alone first; with `take` clirace holds the lock itself (and a stopped holder is lock.contender, run already)."""
    return hold.how in (HoldMode.PARK, HoldMode.COMMAND) and bool(hold.command)


def waits_alone(lock: Lock) -> bool:
    """Whether the lock-wait experiment will run the contender with a lock-wait option, which then runs alone first."""
    return (lock.wait_option is not None or bool(lock.wait_env)) and not lock.never_waits


def _holder_alone(box: Box, hold: Hold) -> tuple[str, list[str], dict[str, str] | None]:
    """The holder's command as a lock experiment runs it, alone: a parked command as it is (it must succeed, as
    the contender must); a hook or hold.run with its {release_file} already there and {hold_seconds} 0, so that it
    takes the lock and lets go at once."""
    if hold.how is HoldMode.PARK:
        return "alone", box.argv(hold.command, **effects.values(box, "alone", hold.command)), None
    root = box.sandbox.root
    io = root / "io"
    values: dict[str, Any] = dict(ready_file=io / "hold.ready", release_file=io / "hold.release", hold_seconds="0",
                                  hold_ms="0")
    try:
        safefs.write_new(root, safefs.within(root, values["release_file"]), b"", parents=True)
    except (FileExistsError, safefs.Refused):
        pass  # the setup made it, or planted a link there: the hook then ends by {hold_seconds}
    values.update(effects.values(box, "alone", hold.command, [value for _, value in hold.env]))
    env = {name: box.path(value, **values) for name, value in hold.env}
    command = OwnCommand(hold.command or ()) if hold.own else hold.command
    return "alone", box.argv(command, **values), env or None


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

