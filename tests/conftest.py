"""Shared test helpers. Unit tests (tests/unit) judge literal histories; e2e tests (tests/e2e) run real fixtures."""
from __future__ import annotations

import compileall
import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

try:
    from _pytest.nodeid import NodeId  # pytest >= 9.2: see pytest_collection_modifyitems
except ImportError:
    NodeId = None

# pytest rewrites the asserts of every module of tests/ and of the distributions that register a pytest11 plugin (all
# of clirace and hypothesis), and keeps the rewritten code in __pycache__, which it reads back on every run. Where
# PYTHONDONTWRITEBYTECODE is set (CI images often set it) it writes none, so every process, each xdist worker too,
# rewrites ~240 modules again: about 4 s of CPU a process (collecting the fast subset: 6.3-7.3 s, then 2.4-2.6 s).
# Let this process write it (pytest_configure compiles clirace for the same reason). Set before the imports below so
# that they are cached too; the processes the tests start keep the variable.
sys.dont_write_bytecode = False

from .procs import no_leftovers  # noqa: E402, F401 - a fixture shared by the tests that run hostile targets

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "fixtures"
E2E = Path(__file__).resolve().parent / "e2e"


def may_select_e2e(markexpr: str) -> bool:
    """Whether the `-m` expression can select a test marked e2e (every test in tests/e2e is: its conftest.py).

    Exact: the expression is evaluated with `e2e` true and every other marker it names (with or without
    arguments, `e2e(...)` included) both true and false, in every combination it reaches, and the answer is
    yes if any selects the test. No `-m`, and an expression this pytest cannot parse here, say yes."""
    if not markexpr:
        return True
    try:
        from _pytest.mark.expression import Expression  # no public name; a pytest without it collects everything
        expression = Expression.compile(markexpr)
    except Exception:  # noqa: BLE001 - pytest itself reports a bad expression, after collecting
        return True
    choices: list[bool] = []  # the value of each other marker, in the order one path of the evaluation asks them
    while True:
        selected, reached = _evaluate(expression, choices)
        if selected:
            return True
        del choices[reached:]
        while choices and choices[-1]:  # next path: the last marker still false turns true
            choices.pop()
        if not choices:
            return False
        choices[-1] = True


def _evaluate(expression, choices: list[bool]) -> tuple[bool, int]:
    """Evaluate with `e2e` true and the other markers as `choices` says, in the order they are asked (false past
    its end, appended); return the answer and how many markers were asked."""
    values: dict[tuple, bool] = {}

    def matcher(name: str, /, **kwargs) -> bool:
        if name == "e2e" and not kwargs:
            return True
        key = (name, tuple(sorted(kwargs.items())))
        if key not in values:
            if len(values) == len(choices):
                choices.append(False)
            values[key] = choices[len(values)]
        return values[key]

    return expression.evaluate(matcher), len(values)


def pytest_ignore_collect(collection_path: Path, config):
    """Skip importing tests/e2e (42 modules, ~2 s of CPU in each xdist worker) when `-m` deselects all of it anyway,
    as the fast subset's `-m "not e2e"` does; its tests are then not counted as deselected."""
    if collection_path == E2E and not may_select_e2e(config.option.markexpr):
        return True
    return None


def pytest_configure(config):
    """Byte-compile clirace once: the tests start it in a few hundred processes, and where PYTHONDONTWRITEBYTECODE
    is set (CI images often set it) each would compile every module again (0.1 s a start; 4 s of the fast subset).
    Python still reads bytecode it did not write itself.

    And let SIGINT reach the processes the tests start: a suite run in the background of a shell without job control
    (`.ci/run &`, nohup) inherits SIGINT ignored, every child would inherit that too, and the tests that send a
    Ctrl-C would see clirace rightly ignore it. A handler (unlike SIG_IGN) is reset to the default at exec."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    import clirace
    try:
        compileall.compile_dir(Path(clirace.__file__).parent, quiet=2)
    except OSError:  # an installed copy we may not write to: the tests only run slower
        pass


# Modules whose tests share one expensive module- or session-scoped fixture (a live check, a Go/Rust/C build, the
# CLI on every bad spec, src's import graph): under pytest-xdist (`--dist loadgroup`, pyproject.toml) each runs in
# one worker, so that fixture runs once, not once per worker; every other test goes to whichever worker is free.
SHARED_FIXTURE_MODULES = {"test_fuzz_spec", "test_result_schema", "test_bad_specs", "test_cli", "test_fuzz_history",
                          "test_hostile_reports", "test_reach", "test_runtimes", "test_layout"}
# (test_replay_only marks its tests with a group per fixture itself: one module-wide group was 400 s in one worker.)


def pytest_xdist_auto_num_workers(config):
    """`-n auto`: two workers per core when e2e tests run, one per core for the fast subset; at most 4.

    The e2e tests mostly wait (holds, prompts, lock-wait timers, rendezvous settles): with one worker per core, 33%
    of a 2-core machine's CPU was idle through a whole suite. Measured there (benchmarks/suite.py, docs/benchmarks.md,
    session 21): 2 workers 11 min 38 s, 3 workers 8 min 36 s, 4 workers 7 min 20 s with 8% idle, every test passing;
    the tests' own seconds grew 13% at 4, since each check's verdicts are judged against the tool's own times
    measured at the same load. The fast subset launches no target and is CPU-bound: a worker more only imports and
    collects everything once more."""
    import os
    cores = len(os.sched_getaffinity(0))
    return max(1, min(4, cores * (2 if may_select_e2e(config.option.markexpr) else 1)))


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's own, which reads the mark
def pytest_collection_modifyitems(config, items):
    """Mark the SHARED_FIXTURE_MODULES' tests with their xdist group, and in an xdist worker (`--dist loadgroup`) put
    the group in each test's id, as `name@group`, which is what the scheduler groups by. pytest-xdist 3.8 does it by
    setting item._nodeid, which pytest 9.2 no longer reads (a node's id is its _id): without this every group was
    split over both workers and its shared fixture ran in each (test_bad_specs' ~20 CLI runs twice)."""
    grouping = config.getoption("loadgroup", default=False)
    for item in items:
        if item.path.stem in SHARED_FIXTURE_MODULES:
            item.add_marker(pytest.mark.xdist_group(item.path.stem))
        group = item.get_closest_marker("xdist_group")  # a module's, or one a test sets itself (test_replay_only)
        if group is None or not group.args:
            continue
        if grouping and NodeId is not None and isinstance(getattr(item, "_id", None), NodeId):
            item._id = NodeId.parse(f"{item.nodeid}@{group.args[0]}")


def run_clirace(*args, timeout: float = 120, env=None, cwd=None) -> subprocess.CompletedProcess:
    """Run the real CLI as a user would; never in-process, so exit codes and streams are the real ones."""
    return subprocess.run([sys.executable, "-m", "clirace", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, env=env, cwd=cwd)


def check_json(spec, *args, timeout: float = 120, env=None) -> dict:
    proc = run_clirace("check", spec, "--format", "json", *args, timeout=timeout, env=env)
    assert proc.returncode in (0, 1), proc.stderr
    assert "Traceback" not in proc.stderr
    return json.loads(proc.stdout)


@pytest.fixture(autouse=True)
def _signal_handlers_restored():
    """A test that calls clirace's main() in-process leaves its SIGTERM handler installed (main installs it for a
    clean exit 143): put back pytest's, so that a SIGTERM to the test process (timeout(1), CI) ends pytest instead
    of failing whichever test then runs with clirace's Terminated."""
    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    yield
    for sig, handler in saved.items():
        if signal.getsignal(sig) is not handler and handler is not None:
            signal.signal(sig, handler)


@pytest.fixture
def fixtures_dir() -> Path:
    return FIXTURES

