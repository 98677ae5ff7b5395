"""Where in the spec a finding points: the line that declared the workload or lock entry its check exercised.

CI annotations (GitHub, SARIF) need a file and a line. A finding is about the tool, not the spec, but the spec
line that declared what was exercised is where a reader starts, so each check maps to a spec section. A spec
that no longer loads (a history judged elsewhere) falls back to line 1.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clirace.checks.findings import Finding
from clirace.spec._paths import shown_path
from clirace.spec._yaml import Located
from clirace.verdict.result import Result

Keys = tuple[str, ...]  # spec keys from the top: ("lock", "contender"); ("workloads", KIND, ...) names a kind
KeyPath = tuple[str | int, ...]  # a path into the loaded spec: ("workloads", 0, "keys"), () for none


@dataclass(frozen=True)
class Place:
    path: str  # as _paths.shown_path shows it: relative to the working directory in its tree, else absolute
    line: int = 1
    column: int = 1


def display_path(spec_path: str) -> str:
    return shown_path(spec_path)


# Each scenario (registry.SCENARIO_OF) -> the spec keys that declare what it exercises, most precise first; the
# first one the spec has is where its checks' findings point. A scenario missing here fails a unit test.
SECTIONS: dict[str, tuple[Keys, ...]] = {
    "lock-conflict": (("lock", "contender"), ("lock",)),
    "lock-release": (("lock", "hold"), ("lock",)),
    "lock-wait": (("lock", "wait_option"), ("lock", "never_waits"), ("lock",)),
    "session": (("session",),),
    "atomic-config": (("workloads", "keys", "config"), ("workloads", "keys")),
    "workloads": (("workloads",),),
}
# Codes whose check runs in one scenario but whose finding is about another part of the spec (s58-advice judges
# the session experiment's trials, yet CR951 is about the lock's wait).
CODE_SECTIONS: dict[str, tuple[Keys, ...]] = {
    "CR951": (("lock", "wait_option"), ("lock", "never_waits"), ("lock",)),
    "CR952": (("session",),),
}
# Where a finding points when the spec has none of its sections: the tool, never line 1 column 1.
LAST_RESORT: tuple[Keys, ...] = (("tool", "command"), ("tool",))


def _workload(trial: str, data: dict[str, Any]) -> KeyPath:
    """("workloads", index) of the workload a finding's trial names ("counter: counter#1 (round 2)", or the
    workload's own `name`), or () when the trial is no workload's."""
    from clirace.history.vocab import WorkloadKind

    kind, _, rest = trial.partition(": ")
    if kind not in {k.value for k in WorkloadKind}:
        return ()
    name = rest.split(" (round ", 1)[0]
    for index, w in enumerate(data.get("workloads") or []):
        if isinstance(w, dict) and w.get("kind") == kind and w.get("name", f"{kind}#{index}") == name:
            return ("workloads", index)
    return ()


def _section(check: str, data: dict[str, Any], code: str = "", trial: str = "") -> KeyPath:
    from clirace.checks.registry import SCENARIO_OF
    from clirace.history.vocab import WorkloadKind

    workloads = data.get("workloads") or []

    def present(path: Keys) -> KeyPath:
        """`path` with a workload kind replaced by its index, or () when the spec does not have it."""
        if path[:1] == ("workloads",) and len(path) > 1:
            index = next((i for i, w in enumerate(workloads) if isinstance(w, dict) and w.get("kind") == path[1]),
                         None)
            if index is None or (len(path) > 2 and path[2] not in workloads[index]):
                return ()
            return ("workloads", index, *path[2:])
        node: Any = data
        for key in path:
            if not isinstance(node, dict) or key not in node:
                return ()
            node = node[key]
        return path

    workload = _workload(trial, data)
    if workload and code not in CODE_SECTIONS:
        return workload
    scenario = SCENARIO_OF.get(check)
    candidates = CODE_SECTIONS.get(code) or (SECTIONS.get(scenario, ()) if scenario else ())
    if check in {kind.value for kind in WorkloadKind}:
        candidates = (("workloads", check),) + candidates
    return next((found for found in map(present, candidates + LAST_RESORT) if found), ())


class Locator:
    """Spec positions for checks, from one read of the spec file."""

    def __init__(self, spec_path: str) -> None:
        self.path = display_path(spec_path)
        self.located: Located | None = None
        try:
            from clirace.spec._yaml import load_located
            self.located = load_located(Path(spec_path))
        except Exception:  # noqa: BLE001 - a missing or broken spec only costs the precise line
            self.located = None

    def place(self, check: str, finding: Finding | None = None) -> Place:
        """Where a finding of `check` points: its workload (from the trial its evidence names), else the spec key
        of its code or its check's experiment, else tool.command."""
        if self.located is None or not isinstance(self.located.data, dict):
            return Place(self.path)
        code, trial = (finding.code, finding.evidence.trial) if finding is not None else ("", "")
        path = _section(check, self.located.data, code, trial)
        if not path:
            return Place(self.path)
        where = self.located.where_key(path) if isinstance(path[-1], str) else self.located.where(path)
        try:
            _, line, column = where.rsplit(":", 2)
            return Place(self.path, int(line), int(column))
        except ValueError:
            return Place(self.path)


def located_findings(result: Result) -> list[tuple[Finding, str, Place]]:
    """[(finding, check id, Place)] for every finding, in report order."""
    locator = Locator(result.spec_path)
    return [(f, check, locator.place(check, f)) for check, verdict in result.verdicts.items() for f in verdict.findings]
