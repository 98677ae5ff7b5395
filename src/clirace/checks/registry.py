"""The experiments, each named once: its check, the scenario that runs it, and (from the rubric's data) the
criterion it decides and the rule codes it can emit.

The pipeline reads this to run what `--only` asks for and to judge; `clirace checks` prints it; the tests
walk it. Scenarios do not know the checks, and checks do not know the scenarios: only this table does.
"""
from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING

from clirace.checks.catalogue import load_section, rules

if TYPE_CHECKING:
    from clirace.checks.findings import Verdict
    from clirace.history import History

Check = Callable[["History"], "Verdict"]  # every check module's `check`

# check id -> its module in checks/ (whose ID it is), imported when a history is first judged: `clirace explain`,
# `checks` and `validate` read this table without loading any check (docs/benchmarks.md, Start-up).
MODULE_OF = {
    "counter": "counter",
    "keys": "keys",
    "claim": "claim",
    "output": "output",
    "hazards": "hazards",
    "server-hazards": "server_hazards",
    "lock-excludes": "lock_excludes",
    "lock-error-structured": "lock_structured",
    "lock-released-on-exit": "lock_release",
    "lock-wait-timeout": "lock_wait",
    "session-isolation": "session",
    "atomic-config-writes": "atomic_config",
    "s58-advice": "s58",
}

# check id -> the scenario whose records it judges. Workload checks share the workloads scenario, and the
# two lock-conflict checks share one experiment.
SCENARIO_OF = {
    "counter": "workloads",
    "keys": "workloads",
    "claim": "workloads",
    "output": "workloads",
    "hazards": "workloads",
    "server-hazards": "workloads",
    "lock-excludes": "lock-conflict",
    "lock-error-structured": "lock-conflict",
    "lock-released-on-exit": "lock-release",
    "lock-wait-timeout": "lock-wait",
    "session-isolation": "session",
    "atomic-config-writes": "atomic-config",
    "s58-advice": "session",
}
# Checks that only advise (their verdict is always not_applicable, with advisory findings): listed in a criterion
# for `clirace checks`, never deciding it, also under --only.
ADVICE_ONLY = frozenset({"s58-advice"})
# The check whose experiment makes each kind of trial (history.RECORDS): what the replay of an advice-only finding
# names, since such a check judges the trials of other experiments and `--only` of it runs none of them.
MAKES_TRIAL = {"counter": "counter", "keys": "keys", "claim": "claim", "output": "output",
               "lock-conflict": "lock-excludes", "lock-release": "lock-released-on-exit",
               "lock-wait": "lock-wait-timeout", "session": "session-isolation",
               "config-sampled": "atomic-config-writes", "kill-points": "atomic-config-writes",
               "writer-killed": "atomic-config-writes"}
# Earlier names of checks, still accepted by --only (replay commands printed by older versions use them).
ALIASES = {"lock-release": "lock-released-on-exit", "atomic-config": "atomic-config-writes"}


def check_function(check_id: str) -> Check:
    """The `check` function of the module that MODULE_OF names for check_id, imported now."""
    module = importlib.import_module(f"clirace.checks.{MODULE_OF[check_id]}")
    if module.ID != check_id:  # a table entry naming the wrong module would judge with the wrong check
        from clirace.errors import InternalError
        raise InternalError(f"checks/registry.py: {check_id!r} names clirace.checks.{MODULE_OF[check_id]}, whose ID "
                            f"is {module.ID!r}")
    judge: Check = module.check
    return judge


@dataclass(frozen=True)
class Experiment:
    check: str
    scenario: str
    # None: the check function of MODULE_OF[check], imported on the first judging (tests give their own)
    given: Check | None = field(default=None, repr=False)

    def judge(self, history: History) -> Verdict:
        return (self.given or check_function(self.check))(history)

    @cached_property
    def criterion(self) -> str:
        return str(next(c["id"] for level in load_section()["levels"] for c in level.get("criteria", [])
                        if self.check in c["checks"]))

    @cached_property
    def codes(self) -> tuple[str, ...]:
        return tuple(code for code, rule in rules().items() if rule.get("check") == self.check)


EXPERIMENTS: dict[str, Experiment] = {check: Experiment(check, SCENARIO_OF[check]) for check in MODULE_OF}


def resolve(name: str) -> str | None:
    """The check id a user's --only names (current or earlier name), or None."""
    name = ALIASES.get(name, name)
    return name if name in EXPERIMENTS else None


REFERENCE = "reference"  # the serial reference runs, which every other experiment is judged against


def replayed_by(check: str, trial: str) -> str | None:
    """The check a finding's replay runs: its own, or for an advice-only check the one whose experiment made the
    trial its evidence names ("lock-conflict: ..."); None (the run's own --only, if any) for a reference run."""
    if check not in ADVICE_ONLY:
        return check
    return MAKES_TRIAL.get(trial.split(":", 1)[0])


def scenarios_for(only: tuple[str, ...], never_waits: bool = False) -> set[str]:
    """The scenarios a run of the checks `only` needs. A tool that never waits (lock.never_waits) has its lock
    timeout judged on the lock-conflict experiment's contender: `--only lock-wait-timeout` must run that one."""
    chosen = {EXPERIMENTS[c].scenario for c in only} if only else {e.scenario for e in EXPERIMENTS.values()}
    if never_waits and "lock-wait-timeout" in only:
        chosen.add(EXPERIMENTS["lock-excludes"].scenario)
    return chosen | {REFERENCE}


def judge_all(history: History) -> dict[str, Verdict]:
    """Every check's verdict; a check that raises is reported as unknown with the error, never aborting the run,
    and one whose planned records are missing (history.plan) is undecided (checks/_plan.py)."""
    from clirace.checks._plan import gaps, held_to_plan
    from clirace.checks.findings import UNKNOWN, Verdict

    verdicts = {}
    missing = gaps(history)  # what the plan promised and the history lacks: undecided, never passed
    for check_id, experiment in EXPERIMENTS.items():
        try:
            verdicts[check_id] = held_to_plan(experiment.judge(history), history, missing)
        except Exception as exc:  # noqa: BLE001 - a bug in one check must not sink the others
            said = f"{type(exc).__name__}: {exc}"
            verdicts[check_id] = Verdict(check_id, UNKNOWN, f"the check itself failed ({said}); this is a bug in "
                                         "clirace, please report it", clirace_failed=said)
    return verdicts
