"""Where in the spec a finding points: the line that declared the workload or lock entry its check exercised.

The positions come from the history (History.spec_places, recorded when the spec was loaded: spec/places.py),
never from the spec file, so a history judged later or elsewhere annotates the spec as it was when it ran. A
history written before positions were recorded has none: its findings point at the spec file's line 1.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from clirace.checks.findings import Finding
from clirace.history import SpecPlace
from clirace.spec._paths import shown_path
from clirace.spec.messages import dotted
from clirace.spec.places import CODE_SECTIONS, LAST_RESORT, SECTIONS, Keys
from clirace.verdict.result import Result


@dataclass(frozen=True)
class Place:
    path: str  # as _paths.shown_path shows it: relative to the working directory in its tree, else absolute
    line: int = 1
    column: int = 1


def display_path(spec_path: str) -> str:
    return shown_path(spec_path)


class Locator:
    """Spec positions for checks, from the positions a history recorded."""

    def __init__(self, spec_path: str, places: Mapping[str, SpecPlace]) -> None:
        self.path = display_path(spec_path)
        self.places = places
        self.workloads: list[tuple[str, str]] = []  # (key, "KIND: NAME") of each workload, in the spec's order
        while (key := dotted(("workloads", len(self.workloads)))) in places:
            self.workloads.append((key, places[key].workload))

    def place(self, check: str, finding: Finding | None = None) -> Place:
        """Where a finding of `check` points: its workload (from the trial its evidence names), else the spec key
        of its code or its check's experiment, else tool.command."""
        code, trial = (finding.code, finding.evidence.trial) if finding is not None else ("", "")
        found = self.places.get(self._section(check, code, trial))
        if found is None or found.line < 1 or found.column < 1:  # (a hand-edited history: SARIF counts from 1)
            return Place(self.path)
        return Place(self.path, found.line, found.column)

    def _workload(self, trial: str) -> str:
        """The key of the workload a finding's trial names ("counter: counter#1 (round 2)", or the workload's own
        `name`), or "" when the trial is no workload's."""
        named = trial.split(" (round ", 1)[0]
        return next((key for key, workload in self.workloads if workload == named), "")

    def _present(self, keys: Keys) -> str:
        """The recorded key of `keys`, a workload kind replaced by its first workload's index; "" when the spec
        does not have it."""
        if keys[:1] == ("workloads",) and len(keys) > 1:
            first = next((key for key, workload in self.workloads if workload.startswith(f"{keys[1]}: ")), "")
            keys = (first, *keys[2:]) if first else ()
        key = dotted(keys)
        return key if key in self.places else ""

    def _section(self, check: str, code: str, trial: str) -> str:
        from clirace.checks.registry import SCENARIO_OF
        from clirace.history.vocab import WorkloadKind

        workload = self._workload(trial)
        if workload and code not in CODE_SECTIONS:
            return workload
        scenario = SCENARIO_OF.get(check)
        candidates = CODE_SECTIONS.get(code) or (SECTIONS.get(scenario, ()) if scenario else ())
        if check in {kind.value for kind in WorkloadKind}:
            candidates = (("workloads", check),) + candidates
        return next((found for found in map(self._present, candidates + LAST_RESORT) if found), "")


def located_findings(result: Result) -> list[tuple[Finding, str, Place]]:
    """[(finding, check id, Place)] for every finding, in report order."""
    locator = Locator(result.spec_path, result.history.spec_places)
    return [(f, check, locator.place(check, f)) for check, verdict in result.verdicts.items() for f in verdict.findings]
