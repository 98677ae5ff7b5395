"""Stage 5, checks: each module judges the history and returns one Verdict. The registry lists them all.

Contract: `check(history) -> Verdict`, a pure function of the saved history (no processes, no files),
so a history can be judged again and checks are tested on literal histories.
"""
from __future__ import annotations

from ..findings import UNKNOWN, Verdict
from . import atomic_config, claim, counter, keys, lock_excludes, lock_release, lock_structured, lock_wait, output, session

REGISTRY = {m.ID: m.check for m in (counter, keys, claim, output, lock_excludes, lock_structured, lock_release,
                                     lock_wait, session, atomic_config)}

# Which scenarios must run for a check to have something to judge (used by --only).
NEEDS = {"counter": "workloads", "keys": "workloads", "claim": "workloads", "output": "workloads",
         "lock-excludes": "lock-conflict", "lock-error-structured": "lock-conflict", "lock-release": "lock-release",
         "lock-wait-timeout": "lock-wait", "session-isolation": "session", "atomic-config": "atomic-config"}


def run_all(history) -> dict[str, Verdict]:
    """Every check's verdict; a check that raises is reported as unknown with the error, never aborting the run."""
    verdicts = {}
    for check_id, check in REGISTRY.items():
        try:
            verdicts[check_id] = check(history)
        except Exception as exc:  # a bug in one check must not sink the others
            verdicts[check_id] = Verdict(check_id, UNKNOWN, f"the check itself failed ({type(exc).__name__}: {exc}); "
                                         "this is a bug in clirace, please report it")
    return verdicts
