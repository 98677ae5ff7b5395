"""The plan against the records: which planned experiments left fewer records than promised, and why.

A check judges the records it finds; only the plan says which records it should have found. A verdict that
is not a failure stands only when every planned record behind it is there: a run interrupted between two
rounds, or a scenario that failed outside its trials, leaves the criterion undecided with the reason. A
failure stands whatever is missing: what was seen was seen. A saved history without a plan is refused
(History.from_json); `plan` None is left only to a history built in memory and never saved.
"""
from __future__ import annotations

from dataclasses import dataclass

from clirace.checks.findings import FAIL, UNKNOWN, Verdict
from clirace.history import (
    Alone,
    ConfigSampled,
    History,
    KillPointsFound,
    LockConflict,
    LockRelease,
    LockWait,
    NotRun,
    Planned,
    SessionRun,
    Trial,
    WorkloadRound,
    WriterKilled,
)
from clirace.history.vocab import INTERRUPTED_TRIAL, Failure

UNFINISHED = (Failure.INTERRUPTED, Failure.CLIRACE)  # a record these ended is no record of what was planned


@dataclass(frozen=True)
class Gap:
    planned: Planned
    found: int  # its records that finished
    expected: int | None  # None: not known (the kill points were never listed)
    why: str
    hint: str = ""  # what decides it, when the record that says why has a hint (the tool's doing, not a bug)

    def message(self) -> str:
        what = f"workload {self.planned.part}" if self.planned.experiment == "workloads" else self.planned.describe()
        noun = "rounds" if self.planned.experiment == "workloads" else "records"
        if self.found and self.expected:
            ran = f"{self.found} of {self.expected} planned {noun} finished"
        else:
            ran = "planned, never finished"
        return f"{what}: {ran} ({self.why})"


def part_of(trial: Trial) -> tuple[str, str] | None:
    """(experiment, part) a record belongs to, as the plan names them."""
    if isinstance(trial, WorkloadRound):  # (a superseded reference pass ran again: the pass after it is the record)
        return None if trial.superseded else ("reference" if trial.serial else "workloads", trial.workload)
    if isinstance(trial, Alone):
        return "reference", f"lock.{trial.command}"
    if isinstance(trial, LockRelease):
        return "lock-release", trial.way.value
    if isinstance(trial, SessionRun):
        return "session", trial.name
    if isinstance(trial, ConfigSampled):
        return "atomic-config", "sampled"
    if isinstance(trial, (KillPointsFound, WriterKilled)):
        return "atomic-config", "kill"
    single = {LockConflict: "lock-conflict", LockWait: "lock-wait"}.get(type(trial))
    return (single, "") if single else None


def gaps(history: History) -> list[Gap]:
    """Every planned part whose records are not all there (and no NotRun says why it did not run)."""
    if history.plan is None:
        return []
    records: dict[tuple[str, str], list[Trial]] = {}
    for trial in history.trials:
        part = part_of(trial)
        if part is not None:
            records.setdefault(part, []).append(trial)
    out = []
    for planned in history.plan:
        declined = [t for t in history.of(NotRun) if t.experiment in (planned.experiment,
                                                                      f"{planned.experiment}/{planned.part}")]
        if any(not t.error for t in declined):  # the scenario said why it does not run (the spec, strace)
            continue
        mine = records.get((planned.experiment, planned.part), [])
        finished = [t for t in mine if t.failure not in UNFINISHED]
        expected = _expected(planned, finished)
        if expected is not None and len(finished) >= expected:
            continue
        out.append(Gap(planned, len(finished), expected, *_why(history, declined, mine)))
    return out


def _expected(planned: Planned, finished: list[Trial]) -> int | None:
    if planned.trials:
        return planned.trials
    found = [t for t in finished if isinstance(t, KillPointsFound)]  # one traced run, then one kill per point
    return 1 + len(found[0].points) if found else None


def _why(history: History, declined: list[NotRun], mine: list[Trial]) -> tuple[str, str]:
    """Why the planned part's records are missing, and what decides it when the record that says why knows
    (a NotRun the tool's failure made: nothing could run); "" leaves the hint to held_to_plan."""
    failed = next((t.error for t in (*declined, *mine) if t.error and t.failure is Failure.CLIRACE), None)
    if failed:
        return failed, ""
    kept = next((t for t in declined if t.error and t.failure is Failure.TOOL), None)
    if kept is not None:
        return kept.error or "", kept.hint
    if history.stopped:
        return f"the run was {history.stopped}", ""
    if any(t.failure is Failure.INTERRUPTED for t in mine):
        return INTERRUPTED_TRIAL, ""
    if history.options.shard:
        return (f"left to the other shards: this history is shard {history.options.shard}; judge it with theirs, "
                "`clirace judge H1 H2 ...`"), ""
    return "the history holds no record of it, and no reason: a bug in clirace, please report it", ""


def held_to_plan(verdict: Verdict, history: History, all_gaps: list[Gap] | None = None) -> Verdict:
    """The verdict, or undecided when a planned record behind it is missing, saying which and why (a failure
    always stands; an undecided verdict takes the plan's reason, which says what did not run)."""
    if verdict.status is FAIL:
        return verdict
    mine = [g for g in (gaps(history) if all_gaps is None else all_gaps) if verdict.check in g.planned.checks]
    if not mine:
        return verdict
    return Verdict(verdict.check, UNKNOWN, f"could not decide: {mine[0].message()}", verdict.findings,
                   hint=mine[0].hint or (RERUN_HINT if history.stopped else SHARD_HINT if history.options.shard
                                         else BUG_HINT),
                   rates=verdict.rates)


RERUN_HINT = "Run the check to its end: the history lists what was planned and what ran."
SHARD_HINT = "Judge every shard's history together: `clirace judge H1 H2 ...` (one per --shard K/N)."
BUG_HINT = "An experiment ended without its records: this is a bug in clirace, please report it with the spec."
