"""Stages 2-4, plan and launch: each scenario runs its experiments in fresh sandboxes and adds their records
to the history (history.py). A scenario that the spec gives no way to run adds a NotRun record saying why;
the checks then say "not tested". Scenarios record what happened and never judge it.
"""
from __future__ import annotations

from collections.abc import Callable

from . import atomic, lock, reference, session, workloads
from ._box import Context

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

__all__ = ["Context", "SCENARIOS"]
