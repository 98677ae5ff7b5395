"""Where in the spec a finding points: the line that declared the workload or lock entry its check exercised.

CI annotations (GitHub, SARIF) need a file and a line. A finding is about the tool, not the spec, but the spec
line that declared what was exercised is where a reader starts, so each check maps to a spec section. A spec
that no longer loads (a history judged elsewhere) falls back to line 1.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

WORKLOAD_CHECKS = ("counter", "keys", "claim", "output")


@dataclass(frozen=True)
class Place:
    path: str  # relative to the current directory when under it (a CI checkout's root), else absolute
    line: int = 1
    column: int = 1


def display_path(spec_path: str) -> str:
    if not spec_path:
        return ""
    absolute = os.path.abspath(spec_path)
    relative = os.path.relpath(absolute)
    return absolute if relative.startswith("..") else relative


def _section(check: str, data: dict) -> tuple:
    workloads = data.get("workloads") or []

    def workload(kind: str) -> tuple:
        index = next((i for i, w in enumerate(workloads) if isinstance(w, dict) and w.get("kind") == kind), None)
        return () if index is None else ("workloads", index)

    if check in WORKLOAD_CHECKS:
        return workload(check)
    if check.startswith("lock-"):
        return ("lock",)
    if check == "session-isolation":
        return ("session",)
    if check == "atomic-config":
        at = workload("keys")
        return at + ("config",) if at and "config" in workloads[at[1]] else at
    return ()


class Locator:
    """Spec positions for checks, from one read of the spec file."""

    def __init__(self, spec_path: str):
        self.path = display_path(spec_path)
        self.located = None
        try:
            from .._yaml import load_located
            self.located = load_located(Path(spec_path))
        except Exception:  # noqa: BLE001 - a missing or broken spec only costs the precise line
            self.located = None

    def place(self, check: str) -> Place:
        if self.located is None or not isinstance(self.located.data, dict):
            return Place(self.path)
        path = _section(check, self.located.data)
        if not path:
            return Place(self.path)
        where = self.located.where_key(path) if isinstance(path[-1], str) else self.located.where(path)
        try:
            _, line, column = where.rsplit(":", 2)
            return Place(self.path, int(line), int(column))
        except ValueError:
            return Place(self.path)


def located_findings(result):
    """[(finding, check id, Place)] for every finding, in report order."""
    locator = Locator(result.spec_path)
    return [(f, check, locator.place(check)) for check, verdict in result.verdicts.items() for f in verdict.findings]
