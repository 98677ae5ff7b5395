"""Stage 5, checks: each module judges the history and returns one Verdict.

Contract: `check(history) -> Verdict`, a pure function of the saved history's records (no processes, no
files, no spec), so a history is judged again by newer checks, and checks are tested on literal histories.
Which experiment feeds which check, and which criterion and rule codes each serves: checks/registry.py.

May import: clirace.errors, clirace.history, clirace.spec, clirace.run (trace readers only).
"""
from __future__ import annotations

from collections.abc import Callable

from clirace.checks import (
               atomic_config,
               claim,
               counter,
               hazards,
               keys,
               lock_excludes,
               lock_release,
               lock_structured,
               lock_wait,
               output,
               s58,
               server_hazards,
               session,
)
from clirace.checks.findings import Verdict
from clirace.history import History

Check = Callable[[History], Verdict]

REGISTRY: dict[str, Check] = {m.ID: m.check for m in (counter, keys, claim, output, hazards, server_hazards,
                                                       lock_excludes,
                                                       lock_structured, lock_release, lock_wait, session,
                                                       atomic_config, s58)}
