"""The fixtures of fixtures/reach, end to end: each one's verdict where it is deterministic by construction.

A rendezvous round (the third round of a workload, once a traced round has shown the state) stops every
invocation where its last read of the state before its lock or write has ended and lets them go one at a
time: an unlocked read-modify-write then loses updates in that round whatever the load, so the tests assert
that round, never the plain and amplified rounds, whose races are luck. A tool launched through a version
manager's shim scores like the same tool launched directly.
"""
import json
import shutil
import sys
from pathlib import Path

import pytest

from clirace.checks import hazards
from clirace.history import History
from clirace.run import observe
from clirace.run.stopper import NotAvailable, require

from ..conftest import FIXTURES, check_json
from .test_levels import EXPECTED

REACH = FIXTURES / "reach"
pytestmark = pytest.mark.skipif(not observe.available()[0], reason=f"needs strace: {observe.available()[1]}")


def stops_available() -> bool:
    try:
        require()
    except NotAvailable:
        return False
    return True


def rendezvous_test(test):
    """A test of a rendezvous round: strace must be able to stop processes here."""
    stops = pytest.mark.skipif(not stops_available(), reason="strace cannot stop processes here")
    return pytest.mark.timeout(240)(stops(test))


@pytest.fixture(scope="module")
def go_fixtures(tmp_path_factory):
    sys.path.insert(0, str(REACH))
    try:
        import gobuild
    finally:
        sys.path.remove(str(REACH))
    try:
        return gobuild.build(tmp_path_factory.mktemp("go"))
    except gobuild.NoGo as exc:
        pytest.skip(str(exc))


def rendezvous_round(spec: Path, check: str, tmp_path: Path) -> tuple[dict, dict]:
    """(the check's verdict, the rendezvous round's record) of `clirace check SPEC --only CHECK`."""
    saved = tmp_path / "history.json"
    result = check_json(spec, "--only", check, "--rounds", "3", "--seed", "3", "--history", saved, timeout=240)
    trials = json.loads(saved.read_text())["trials"]
    met = [t for t in trials if t.get("rendezvous") and not t.get("error")]
    assert len(met) == 1, [t.get("error") for t in trials]
    return result["checks"][check], met[0]


def assert_lost_at_the_rendezvous(verdict: dict, met: dict, reads: int) -> None:
    meeting = met["rendezvous"]
    assert verdict["status"] == "fail" and verdict["rates"]["failed_rendezvous_rounds"] == 1, verdict
    # Every one arrived, none let through as idle: the round is the race built, not a race hoped for.
    assert meeting["why_released"] == "all arrived" and meeting["blocked"] == {}, meeting
    assert len(meeting["arrived"]) == len([i for i in met["invocations"] if i["label"].startswith(("set-", "inc-"))])
    assert ("second read" if reads == 2 else "its read" if reads == 1 else "first read") in meeting["aimed"], meeting


@rendezvous_test
def test_a_tool_reading_twice_loses_keys_at_the_rendezvous(tmp_path):
    verdict, met = rendezvous_round(REACH / "read-twice" / "clirace.yaml", "keys", tmp_path)
    assert_lost_at_the_rendezvous(verdict, met, reads=2)


@rendezvous_test
def test_go_reading_at_start_up_on_two_goroutines_then_locking_loses_clusters_at_the_rendezvous(go_fixtures, tmp_path):
    verdict, met = rendezvous_round(go_fixtures["go-kube"], "keys", tmp_path)
    assert_lost_at_the_rendezvous(verdict, met, reads=2)
    assert all(i["exit_code"] == 0 for i in met["invocations"] if i["label"].startswith("set-"))  # each in turn


@rendezvous_test
def test_go_unlocked_counter_loses_increments_at_the_rendezvous(go_fixtures, tmp_path):
    verdict, met = rendezvous_round(go_fixtures["go-counter"], "counter", tmp_path)
    assert_lost_at_the_rendezvous(verdict, met, reads=1)


@rendezvous_test
@pytest.mark.skipif(not shutil.which("node"), reason="node is not installed")
def test_node_threadpool_writer_loses_keys_at_the_rendezvous(tmp_path):
    verdict, met = rendezvous_round(REACH / "node-keys" / "clirace.yaml", "keys", tmp_path)
    assert_lost_at_the_rendezvous(verdict, met, reads=1)


@rendezvous_test
def test_a_state_file_locked_through_its_own_fd_is_state_and_its_rendezvous_loses_nothing(tmp_path):
    verdict, met = rendezvous_round(REACH / "lock-own-config" / "clirace.yaml", "counter", tmp_path)
    meeting = met["rendezvous"]
    assert meeting["paths"] == ["home/.local/state/lock-own-config/counter"], meeting
    # One stopped inside its lock; the others proven waiting for it by the kernel, not merely idle.
    assert len(meeting["arrived"]) == 1 and meeting["why_released"] == "the others blocked on the lock", meeting
    assert set(meeting["blocked"].values()) == {"the kernel lists it waiting for a lock (/proc/locks)"}, meeting
    assert verdict["status"] == "pass", verdict
    # (--only leaves the hazards unjudged; the saved traced round is judged here as `clirace judge` would)
    found = hazards.check(History.load(tmp_path / "history.json")).findings
    assert [f.code for f in found] == ["CR705"], found  # truncated in place; locked before it read


@pytest.mark.timeout(300)
def test_a_tool_launched_through_a_version_managers_shim_scores_like_it_does_directly(tmp_path):
    saved = tmp_path / "history.json"
    # One plain round of 4 per workload: the workloads are not what the shim changes (and cost its helpers
    # per invocation); the lock, session and atomic experiments run in full.
    result = check_json(REACH / "shim" / "clirace.yaml", "--seed", "7", "--rounds", "1", "--parallel", "4",
                        "--history", saved, timeout=300)
    statuses = {c["id"]: c["status"] for c in result["criteria"]}
    assert {c: statuses[c] for c in EXPECTED[3]} == EXPECTED[3] and result["score"] == 3, result["criteria"]
    trials = json.loads(saved.read_text())["trials"]
    killed = [t for t in trials if t["kind"] == "writer-killed"]
    # The temp file's calls were counted on it over the whole invocation (the shim's helpers write to pipes), and
    # every kill landed on the tool's own calls, never a helper's.
    assert any(t["point"]["after"] for t in killed), killed
    assert killed and all("+++ killed by SIGKILL +++" in t["kill_log"] and "pipe:" not in t["kill_log"]
                          for t in killed), killed


@pytest.mark.timeout(60)
@pytest.mark.skipif(not stops_available(), reason="strace cannot stop processes here")
def test_a_hand_over_that_cannot_attach_lets_the_process_go_on_and_says_why(tmp_path):
    # The second strace fails at once (here: not strace at all); the process, stopped just after its exec by
    # the first, must not stay stopped: it runs to its end untraced, and the note says the kill never came.
    from clirace.run.launch import Launcher
    from clirace.run.stopper import Handover, exec_stop_prefix

    python = str(Path(sys.executable).resolve())
    prefix = tmp_path / "exec"
    launcher = Launcher({"PATH": "/usr/bin:/bin"}, str(tmp_path), {}, 30)
    running = launcher.start("writer", ["/bin/sh", "-c", f'v=$(echo x | tr x y); exec "{python}" -c "print(1)"'],
                             wrap=exec_stop_prefix(prefix, python))
    handover = Handover(running, prefix, lambda argv: argv[0] == python, lambda pid: ["/bin/false", str(pid)])
    try:
        assert handover.take_over(20) is False
        invocation = running.finish()
    finally:
        handover.close()
    assert invocation.exit_code == 0 and invocation.stdout == "1\n", invocation
    assert handover.note.startswith("strace could not take over pid"), handover.note
