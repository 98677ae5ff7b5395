"""`[tool.clirace]` in the nearest pyproject.toml: the specs `clirace check` runs when given none, and the
defaults of --min-score and --rounds (options on the command line win).

    [tool.clirace]
    specs = ["tests/tool.clirace.yaml", "specs/"]   # files or directories, relative to pyproject.toml
    min-score = 2
    rounds = 5

The nearest is the first pyproject.toml with a [tool.clirace] table found from the current directory upwards
(as ruff finds its own table). A wrong key or value is a usage error naming the file and the key (exit 2).
"""
from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from clirace.errors import UsageError, did_you_mean

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

KEYS = {"specs": "a list of spec files or directories", "min-score": "an integer from 0 to 3",
        "rounds": "an integer from 1 to 100"}


@dataclass(frozen=True)
class Settings:
    path: Path | None = None  # the pyproject.toml they came from
    specs: tuple[Path, ...] = ()
    min_score: int | None = None
    rounds: int | None = None


def find(start: Path) -> Settings:
    """The [tool.clirace] settings of the nearest pyproject.toml that has them, or empty Settings."""
    for directory in (start.resolve(), *start.resolve().parents):
        candidate = directory / "pyproject.toml"
        if not candidate.is_file():
            continue
        try:
            data = tomllib.loads(candidate.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
            raise UsageError(f"{candidate}: cannot read it as TOML ({exc}).") from None
        table = data.get("tool", {}).get("clirace")
        if table is not None:
            return _settings(candidate, table)
    return Settings()


def _settings(path: Path, table: object) -> Settings:
    def bad(key: str, value: object) -> UsageError:
        return UsageError(f"{path}: [tool.clirace] {key} is {value!r}; expected {KEYS[key]}.")

    if not isinstance(table, dict):
        raise UsageError(f"{path}: [tool.clirace] is {table!r}; expected a table.")
    for key in table:
        if key not in KEYS:
            guess = did_you_mean(key, sorted(KEYS), "{}")
            raise UsageError(f"{path}: [tool.clirace] has the key {key!r}, which clirace does not know"
                             + (f"; did you mean {guess!r}?" if guess else "."), hint=f"Keys: {', '.join(KEYS)}.")
    specs = table.get("specs", [])
    if isinstance(specs, str):
        specs = [specs]
    if not isinstance(specs, list) or not all(isinstance(s, str) and s for s in specs):
        raise bad("specs", table.get("specs"))
    min_score, rounds = table.get("min-score"), table.get("rounds")
    if min_score is not None and (type(min_score) is not int or not 0 <= min_score <= 3):
        raise bad("min-score", min_score)
    if rounds is not None and (type(rounds) is not int or not 1 <= rounds <= 100):
        raise bad("rounds", rounds)
    return Settings(path, tuple(path.parent / s for s in specs), min_score, rounds)


SPEC_NAMES = ("clirace.yaml", "*.clirace.yaml", "*.clirace.yml")
SKIPPED_DIRS = {"node_modules", "__pycache__", "venv"}


def expand(paths: list[Path]) -> list[Path]:
    """Spec files as given, and every clirace.yaml or *.clirace.yaml under each directory (hidden directories,
    virtualenvs and node_modules skipped), in a stable order. A directory with none is a usage error."""
    out: list[Path] = []
    for path in paths:
        if not path.is_dir():
            out.append(path)  # a missing file is load_spec's to report, with its own message
            continue
        found = sorted({p for pattern in SPEC_NAMES for p in path.rglob(pattern)
                        if not any(part.startswith(".") or part in SKIPPED_DIRS
                                   for part in p.relative_to(path).parts[:-1])})
        if not found:
            raise UsageError(f"{path}: a directory with no clirace.yaml or *.clirace.yaml under it.",
                             hint="Name spec files so, or give them one by one.")
        out += found
    return list(dict.fromkeys(out))
