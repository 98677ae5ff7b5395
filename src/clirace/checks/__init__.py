"""Stage 5, checks: each module judges the history and returns one Verdict.

Contract: `check(history) -> Verdict`, a pure function of the saved history's records (no processes, no
files, no spec), so a history is judged again by newer checks, and checks are tested on literal histories.
Which experiment feeds which check, and which criterion and rule codes each serves: checks/registry.py.
The check modules are imported when a history is judged, not with this package: `clirace explain`, `checks`
and `validate` read the registry and the catalogue without loading a check (docs/benchmarks.md, Start-up).

May import: clirace.errors, clirace.history, clirace.spec, clirace.run (trace readers only).
"""
from __future__ import annotations


def __getattr__(name: str) -> object:
    # REGISTRY (check id -> its check function) imports every check module: built on first use only.
    if name == "REGISTRY":
        from clirace.checks.registry import EXPERIMENTS, check_function
        registry = {check_id: check_function(check_id) for check_id in EXPERIMENTS}
        globals()["REGISTRY"] = registry  # one table, as the module had before it was lazy
        return registry
    raise AttributeError(name)
