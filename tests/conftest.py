"""Shared test helpers. Unit tests (tests/unit) judge literal histories; e2e tests (tests/e2e) run real fixtures."""
from __future__ import annotations

import compileall
import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from .procs import no_leftovers  # noqa: F401 - a fixture shared by the tests that run hostile targets

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "fixtures"


def pytest_configure(config):
    """Byte-compile clirace once: the tests start it in a few hundred processes, and where PYTHONDONTWRITEBYTECODE
    is set (CI images often set it) each would compile every module again (0.1 s a start; 4 s of the fast subset).
    Python still reads bytecode it did not write itself."""
    import clirace
    try:
        compileall.compile_dir(Path(clirace.__file__).parent, quiet=2)
    except OSError:  # an installed copy we may not write to: the tests only run slower
        pass


# Modules whose tests share one expensive module- or session-scoped fixture (a live check, a Go/Rust/C build, the
# CLI on every bad spec): under pytest-xdist (`--dist loadgroup`, pyproject.toml) each runs in one worker, so that
# fixture runs once, not once per worker; every other test goes to whichever worker is free.
SHARED_FIXTURE_MODULES = {"test_fuzz_spec", "test_result_schema", "test_bad_specs", "test_cli", "test_fuzz_history",
                          "test_hostile_reports", "test_reach", "test_runtimes"}
# (test_replay_only groups its tests per fixture itself: one module-wide group was 400 s in one worker.)


def pytest_xdist_auto_num_workers(config):
    """`-n auto`: one worker per core, at most 4. Each e2e test already runs a tool 8 at a time beside clirace
    and strace; more workers than cores only slow each check, whose verdicts are judged against the tool's own
    times on the same machine."""
    import os
    return max(1, min(4, len(os.sched_getaffinity(0))))


def pytest_collection_modifyitems(items):
    for item in items:
        if item.path.stem in SHARED_FIXTURE_MODULES:
            item.add_marker(pytest.mark.xdist_group(item.path.stem))


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

