"""Stage 2-4, plan and launch: each scenario runs its experiments in fresh sandboxes and returns trials.

A scenario that the spec gives no way to run returns no trials; the checks then say "not tested".
"""
from __future__ import annotations

from . import atomic, lock, session, workloads
from ._box import Context

# Order is the order of the run: cheap, decisive experiments first.
SCENARIOS = {
    "workloads": workloads.run,
    "lock-conflict": lock.conflict,
    "lock-release": lock.release,
    "lock-wait": lock.wait,
    "session": session.run,
    "atomic-config": atomic.run,
}

__all__ = ["Context", "SCENARIOS"]
