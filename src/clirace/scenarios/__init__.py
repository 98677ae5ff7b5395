"""Stages 2-4, plan and launch: each scenario runs its experiments in fresh sandboxes and adds their records
to the history (history/__init__.py). A scenario that the spec gives no way to run adds a NotRun record saying why;
the checks then say "not tested". Scenarios record what happened and never judge it.

May import: clirace.errors, clirace.history, clirace.spec, clirace.run, clirace.checks.registry (the plan).
"""
from __future__ import annotations

from collections.abc import Callable

from clirace.scenarios import atomic, lock, reference, session, workloads
from clirace.scenarios._box import Context

# Order is the order of the run: cheap, decisive experiments first.
SCENARIOS: dict[str, Callable[[Context], None]] = {
    "reference": reference.run,  # first: the oracle for everything after it (a failure here is a spec error)
    "workloads": workloads.run,
    "lock-conflict": lock.conflict,
    "lock-release": lock.release,
    "lock-wait": lock.wait,
    "session": session.run,
    "atomic-config": atomic.run,
}

# Scenarios that mostly wait (a holder holding the lock, a contender waiting out its lock timeout, a retry
# obeying retry_after_ms) run side by side when they follow each other: each trial has its own sandbox, so
# they share no state, and the waits overlap instead of adding up. Each keeps its own trials in order.
SIDE_BY_SIDE = frozenset({"lock-conflict", "lock-release", "lock-wait"})

__all__ = ["Context", "SCENARIOS", "SIDE_BY_SIDE"]
