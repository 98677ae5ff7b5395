"""The fixtures of fixtures/runtimes, end to end: the same settings tool in Go, Node, Rust and C, and a client
whose daemon does the write, each in a correct (lock, atomic replace) and an in-place twin.

The crash injection must land its kills in whichever thread or process makes the call (a goroutine's OS
thread, libuv's threadpool, a daemon started by the setup and attached by pid) and confirm it from the trace:
a correct tool then scores 3 with atomic-config-writes passed on landed kills; its twin loses keys and is torn
on a kill, which is corruption. Binaries are built once per session (fixtures/runtimes/build.py).
"""
import shutil
import sys

import pytest

from clirace.run import observe
from clirace.run.stopper import NotAvailable, require

from ..conftest import FIXTURES, check_json

RUNTIMES = FIXTURES / "runtimes"


def _stops() -> bool:
    try:
        require()
    except NotAvailable:
        return False
    return True


pytestmark = [pytest.mark.skipif(not observe.available()[0], reason=f"needs strace: {observe.available()[1]}"),
              pytest.mark.skipif(not _stops(), reason="strace cannot stop processes here")]


@pytest.fixture(scope="session")
def built(tmp_path_factory):
    """name -> spec of each compiled fixture whose toolchain is here (built once per session)."""
    sys.path.insert(0, str(RUNTIMES))
    try:
        import build
    finally:
        sys.path.remove(str(RUNTIMES))
    out, specs, missing = tmp_path_factory.mktemp("runtimes"), {}, {}
    for name in build.BUILDS:
        try:
            specs |= build.build(out, [name])
        except build.NoToolchain as exc:
            missing[name] = str(exc)
    return specs, missing


def spec_of(name: str, built):
    if name.startswith(("node-", "daemon-")):
        if name.startswith("node-") and not shutil.which("node"):
            pytest.skip("node is not installed")
        return RUNTIMES / name / "clirace.yaml"
    specs, missing = built
    if name not in specs:
        pytest.skip(missing[name])
    return specs[name]


def atomic_verdict(result: dict) -> dict:
    return next(c for c in result["criteria"] if c["id"] == "atomic-config-writes")


def assert_kills_landed(atomic: dict, in_daemon: bool = False) -> None:
    assert atomic["status"] == "pass", atomic["evidence"]  # a string: pytest does not cut it short
    assert "the kill meant for" not in atomic["evidence"] and "never reached" not in atomic["evidence"], atomic
    assert "a kill landed on each kind of kill point" in atomic["evidence"], atomic
    assert "rename" in atomic["evidence"], atomic  # the commit itself was among the crashes tried
    if in_daemon:
        assert "in the daemon" in atomic["evidence"], atomic


@pytest.mark.timeout(300)
@pytest.mark.parametrize("name", ["go-atomic", "node-atomic", "rust-atomic", "c-atomic", "daemon-atomic"])
def test_a_correct_tool_in_any_runtime_scores_3_on_kills_that_landed(name, built):
    result = check_json(spec_of(name, built), "--seed", "3", "--rounds", "2", timeout=300)
    assert_kills_landed(atomic_verdict(result), in_daemon=name.startswith("daemon-"))
    assert (result["score"], result["corruption"]) == (3, False), [
        (c["id"], c["status"], c["evidence"][:300]) for c in result["criteria"] if c["status"] != "pass"]


@pytest.mark.timeout(300)
@pytest.mark.parametrize("name", ["go-inplace", "node-inplace", "rust-inplace", "c-inplace"])
def test_its_unlocked_in_place_twin_scores_0_with_corruption(name, built):
    result = check_json(spec_of(name, built), "--only", "keys", "--only", "atomic-config", "--seed", "3", timeout=300)
    atomic = atomic_verdict(result)
    assert atomic["status"] == "fail" and "left the config" in atomic["evidence"], atomic  # torn by a landed kill
    assert (result["score"], result["corruption"]) == (0, True), result["headline"]


@pytest.mark.timeout(300)
def test_a_daemon_rewriting_the_config_in_place_fails_atomic_config_writes_at_its_own_write(built):
    result = check_json(spec_of("daemon-inplace", built), "--only", "atomic-config", "--seed", "3", timeout=300)
    atomic = atomic_verdict(result)
    assert atomic["status"] == "fail", atomic
    assert "config.json itself in the daemon left the config unparseable" in atomic["evidence"], atomic
