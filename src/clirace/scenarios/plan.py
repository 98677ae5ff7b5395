"""Stage 2, plan: what the run sets out to do, written into the history before anything runs.

Jepsen logs each operation's invoke before its completion and keeps the test map with the history, so that a
checker tells "never ran" from "ran and saw nothing". The plan does that for clirace's experiments: one entry
per part of an experiment (a workload's rounds, a way the lock holder ends), the records it will leave and
the checks they decide. An entry whose records are missing when the history is judged (the run was
interrupted, or its scenario failed outside any trial) leaves those checks undecided with the reason
(checks/_plan.py), never passed and never "not in the spec".

It lists what the scenarios will run, as `clirace validate` describes it; what a scenario decides only when it
runs (strace refused, no error command) it records as a NotRun, which accounts for the entry.
"""
from __future__ import annotations

from clirace.checks.registry import SCENARIO_OF
from clirace.history import Planned
from clirace.history.vocab import HoldMode, Way, WorkloadKind
from clirace.spec import Spec, Workload

LOCK_CHECKS = ("lock-excludes", "lock-error-structured", "lock-released-on-exit", "lock-wait-timeout")
TRACE_READERS = ("hazards", "server-hazards")  # checks that read every workload's observed rounds


def _checks_of(scenario: str) -> tuple[str, ...]:
    return tuple(check for check, of in SCENARIO_OF.items() if of == scenario)


def workloads_for(spec: Spec, only: tuple[str, ...]) -> list[Workload]:
    """The spec's workloads a run exercises: every one, or with --only those of the kinds asked for (hazards,
    and server-hazards, which read every workload's observed rounds, ask for all of them)."""
    if not only or any(name in only for name in TRACE_READERS):
        return list(spec.workloads)
    return [w for w in spec.workloads if w.kind.value in only]


def lock_commands_alone(only: tuple[str, ...]) -> bool:
    """Whether the lock commands' reference runs are needed: always, or with --only a lock check."""
    return not only or any(name.startswith("lock-") for name in only)


def plan(spec: Spec, only: tuple[str, ...], rounds: int, wanted: set[str]) -> tuple[Planned, ...]:
    """The experiments of the scenarios `wanted`, in run order, as the scenarios will run them for this spec."""
    lock = spec.lock
    out: list[Planned] = []
    if "reference" in wanted:
        for workload in workloads_for(spec, only):
            runs = 2 if workload.kind is WorkloadKind.OUTPUT else 1  # an output command runs alone twice
            out.append(Planned("reference", workload.name, runs, (workload.kind.value, *TRACE_READERS)))
        if lock is not None and lock_commands_alone(only):
            for command, given in (("contender", lock.contender), ("error_command", lock.error_command)):
                if given is not None:
                    out.append(Planned("reference", f"lock.{command}", 2, LOCK_CHECKS))
            if lock.hold.how in (HoldMode.PARK, HoldMode.COMMAND) and lock.hold.command:  # reference.holds_alone
                out.append(Planned("reference", "lock.holder", 1, LOCK_CHECKS))
            if (lock.wait_option is not None or lock.wait_env) and not lock.never_waits:  # reference.waits_alone
                out.append(Planned("reference", "lock.waiter", 1, LOCK_CHECKS))
    if "workloads" in wanted:
        for workload in workloads_for(spec, only):
            out.append(Planned("workloads", workload.name, rounds, (workload.kind.value, *TRACE_READERS)))
    if lock is not None:
        if "lock-conflict" in wanted:
            # A tool that never waits has its lock timeout judged on the conflict's contender.
            extra = ("lock-wait-timeout",) if lock.never_waits else ()
            out.append(Planned("lock-conflict", "", 1, _checks_of("lock-conflict") + extra))
        if "lock-release" in wanted:
            out += [Planned("lock-release", way.value, 1, _checks_of("lock-release")) for way in Way]
        if "lock-wait" in wanted and (lock.wait_option is not None or lock.wait_env) and not lock.never_waits:
            out.append(Planned("lock-wait", "", 1, _checks_of("lock-wait")))
    if "session" in wanted and spec.session is not None and not spec.session.none:
        out += [Planned("session", part, 1, _checks_of("session"))
                for part in ("with session ids", "without session ids")]
    if "atomic-config" in wanted and any(w.kind is WorkloadKind.KEYS and w.config for w in spec.workloads):
        checks = _checks_of("atomic-config")
        out += [Planned("atomic-config", "sampled", 1, checks), Planned("atomic-config", "kill", 0, checks)]
    return tuple(out)
