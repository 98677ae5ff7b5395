"""Every test in tests/e2e launches real target processes: all are marked e2e here, so that
`pytest -m "not e2e"` (the fast subset, tests/unit) launches none, whether or not a test remembered its marker.

It also holds the live checks that tests of several modules read (`shared_check`): one live run per (fixture,
options), not one per test."""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import pytest

from clirace.checks.catalogue import load_section
from clirace.checks.registry import ADVICE_ONLY

from ..conftest import check_json

HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(items):
    for item in items:
        if HERE in Path(str(item.path)).resolve().parents:
            item.add_marker(pytest.mark.e2e)


def shared_group(fixture: str) -> pytest.MarkDecorator:
    """The xdist group of every test that reads `shared_check` of one fixture: under `--dist loadgroup` they run in
    one worker, so that its check is made once (tests/conftest.py puts the group in each test's id); the fixtures
    themselves spread over the workers."""
    return pytest.mark.xdist_group(f"check-{fixture}")


@dataclass(frozen=True)
class SharedCheck:
    """A live `clirace check --format json --history` run with HOME and TMPDIR set to canary folders."""
    result: dict
    history: Path
    canaries_before: list  # every path below the canary folders (see snapshot) before the check
    canaries_after: list  # and after it: the targets must only touch their sandboxes, clirace clean its own temp


_MADE: dict[tuple[str, ...], SharedCheck | BaseException] = {}


@pytest.fixture(scope="session")
def shared_check(tmp_path_factory):
    """`shared_check(spec, *options, timeout=...)`: the check of spec with these options, made once per session
    (per xdist worker: mark the tests that read it with shared_group) and kept for every test that asks for it
    again. The options are the whole key, so two tests share a run only when they ask for the same one."""
    def check(spec: Path, *options: str, timeout: float = 240) -> SharedCheck:
        key = (str(spec), *map(str, options))
        if isinstance(_MADE.get(key), BaseException):  # once, not again in every test that reads it
            pytest.fail(f"the shared check {' '.join(key)} failed in an earlier test: {_MADE[key]!r}"[:3000])
        if key not in _MADE:
            folder = tmp_path_factory.mktemp("shared-check")
            canaries, history = folder / "canaries", folder / "history.json"
            home, tmp = canaries / "home", canaries / "tmp"
            for canary in (home, tmp):
                (canary / ".config").mkdir(parents=True)
                (canary / ".config" / "keep.txt").write_text("canary")
            before = snapshot(canaries)
            env = {**os.environ, "HOME": str(home), "TMPDIR": str(tmp)}
            try:
                result = check_json(spec, *options, "--history", history, timeout=timeout, env=env)
            except BaseException as exc:
                _MADE[key] = exc
                raise
            _MADE[key] = SharedCheck(result, history, before, snapshot(canaries))
        made = _MADE[key]
        assert isinstance(made, SharedCheck)
        return made
    return check


def snapshot(root: Path) -> list:
    """Every path below root, with size and mtime for files (a directory's mtime changes when clirace
    creates and removes its own work directory in it, which is allowed)."""
    return sorted((str(p.relative_to(root)), *((p.stat().st_size, p.stat().st_mtime_ns) if p.is_file() else ()))
                  for p in root.rglob("*"))


def only_up_to(level: int, *more: str) -> tuple[str, ...]:
    """`--only` for every check that decides a criterion of levels 1 to `level`, and for the checks `more`: what a
    test asserting a score of `level` (a level reached) or of `level - 1` (a criterion of `level` failed) needs,
    and nothing of the levels above, which such a score does not read. Advice-only checks decide nothing (and
    `--only` of one would run the experiment it judges beside), so they are left out."""
    checks = [check for lvl in load_section()["levels"] if 0 < lvl["score"] <= level
              for criterion in lvl.get("criteria", []) for check in criterion["checks"] if check not in ADVICE_ONLY]
    return tuple(option for check in (*checks, *more) for option in ("--only", check))
