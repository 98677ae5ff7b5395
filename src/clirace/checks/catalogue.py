"""The rubric's data files (rubric/*.yaml, lock_held.schema.json), loaded once.

Findings, the lock-error reader and the scorer all read these; none of them imports another for it.
"""
from __future__ import annotations

import json
import string
from functools import cache, lru_cache
from pathlib import Path
from typing import Any

import yaml

# libyaml's loader where PyYAML was built with it (rules.yaml: 5 ms instead of 59 here, explain.yaml: 22
# instead of 59: paid by every `clirace explain`, `checks` and `validate`), the pure-Python one otherwise; both
# build the same data from these files (a test holds them equal).
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def load_yaml(path: Path) -> Any:
    """One of the rubric's YAML files, as data."""
    return yaml.load(path.read_text(), Loader=_LOADER)  # a safe loader, C or Python


def rubric_dir() -> Path:
    # Beside the package's own files, as importlib.resources.files("clirace") would say for an installed copy
    # (a directory: the wheel is unpacked), without importing importlib's resource readers at every start.
    here = Path(__file__).resolve().parents[1]
    shipped = here / "_rubric"
    if shipped.is_dir():
        return shipped
    return here.parents[1] / "rubric"  # a source checkout or editable install


@cache
def load_section(name: str = "s15") -> dict[str, Any]:
    data: dict[str, Any] = load_yaml(rubric_dir() / f"{name}.yaml")
    return data


@lru_cache(maxsize=1)
def rules() -> dict[str, dict[str, Any]]:
    data: dict[str, dict[str, Any]] = load_yaml(rubric_dir() / "rules.yaml")
    return data


def rule(code: str) -> dict[str, Any]:
    return rules()[code]


@lru_cache(maxsize=1)
def lock_held_schema() -> dict[str, Any]:
    data: dict[str, Any] = json.loads((rubric_dir() / "lock_held.schema.json").read_text())
    return data


# A code's lifecycle, as ruff keeps its rules': "stable"; "preview" (reported, its wording may still change);
# "removed" (`retired: true`: kept so that the code is never reused, and never reported again).
LIFECYCLES = ("stable", "preview", "removed")


def lifecycle(code: str) -> str:
    entry = rule(code)
    return "removed" if entry.get("retired") else str(entry.get("lifecycle", "stable"))


@cache
def template_fields(code: str) -> frozenset[str]:
    """The names a code's message template formats: a finding of that code must carry each in its args."""
    return frozenset(name.split(".")[0].split("[")[0] for _, name, _, _ in string.Formatter().parse(rule(code)["message"])
                     if name)
