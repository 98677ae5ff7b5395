"""The rendezvous and the hook-free hold on real programs, through clirace's own launcher.

Deterministic by construction, not by luck: every unlocked invocation is stopped after reading the state
and before writing it, so each one writes back what it read plus its own change; a locked tool's others are
refused or blocked and never read before the holder has written.
"""
import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from clirace.run import observe
from clirace.run.launch import Launcher
from clirace.run.rendezvous import Rendezvous, commit_point_prefix
from clirace.run.stopper import LOCK_CALLS, READ_CALLS, Hold, hold_prefix, lock_held

from ..conftest import FIXTURES

USABLE, WHY = observe.available()
pytestmark = [pytest.mark.e2e, pytest.mark.skipif(not USABLE, reason=f"strace not available: {WHY}")]
N = 6
TIGHT = FIXTURES.parent / "benchmarks" / "targets" / "tight_counter.py"
LEVEL3 = FIXTURES / "level3" / "tool.py"
READ_THEN_LOCK = FIXTURES / "reach" / "read_then_lock.py"
SLOW_START = FIXTURES / "reach" / "slow_start_counter.py"


def launcher(tmp_path: Path) -> Launcher:
    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path / "state"), "XDG_CONFIG_HOME": str(tmp_path / "config"),
           "HOME": str(tmp_path), "PYTHONDONTWRITEBYTECODE": "1"}
    return Launcher(env, str(tmp_path), {}, 60)


def rendezvous_round(tmp_path, tool, args_of, state: Path, n=N, calls=READ_CALLS, locks=()):
    """n invocations released together, stopped after their first of `calls` on `state` (by default their first
    read), then released at once. `locks`: lock files, traced so that a refused lock call shows."""
    trace = tmp_path / "trace"
    trace.mkdir()
    runnings = launcher(tmp_path).start_together(
        [(f"inv-{i}", [sys.executable, str(tool), *args_of(i)], None,
          commit_point_prefix(trace / f"inv-{i}", [str(state), *map(str, locks)], calls, cwd=str(tmp_path),
                              also_trace="flock")) for i in range(n)])
    with Rendezvous.of(runnings, trace) as rendezvous:
        rendezvous.wait_all_arrived()
        rendezvous.release()
        invocations = [r.finish() for r in runnings]
    return invocations, rendezvous


def seeded(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


@pytest.mark.timeout(60)
def test_unlocked_counter_loses_every_update_but_one(tmp_path):
    state = seeded(tmp_path / "state" / "tight" / "counter", "0\n")
    invocations, rendezvous = rendezvous_round(tmp_path, TIGHT, lambda i: ["counter", "incr"], state)
    assert all(inv.exit_code == 0 for inv in invocations)
    assert rendezvous.arrived == [f"inv-{i}" for i in range(N)] and rendezvous.why == "all arrived"
    assert all('"0\\n"' in a["call"] for a in rendezvous.record()["arrived"].values())  # all read the same 0
    assert state.read_text() == "1\n"  # N successful increments, N - 1 lost


@pytest.mark.timeout(90)
def test_slow_syscall_heavy_start_up_still_meets_at_the_read(tmp_path):
    state = seeded(tmp_path / "state" / "slow-start" / "counter", "0\n")
    invocations, rendezvous = rendezvous_round(tmp_path, SLOW_START, lambda i: ["counter", "incr"], state, n=4)
    assert all(inv.exit_code == 0 for inv in invocations)
    assert not rendezvous.timed_out
    assert state.read_text() == "1\n"


@pytest.mark.timeout(60)
def test_locked_counter_loses_nothing_and_only_waits(tmp_path):
    state = seeded(tmp_path / "state" / "level3" / "counter", "0\n")
    waiting = ["counter", "incr", "--lock-timeout", "20000"]
    invocations, rendezvous = rendezvous_round(tmp_path, LEVEL3, lambda i: waiting, state,
                                               locks=[state.with_name("lock")])
    assert all(inv.exit_code == 0 for inv in invocations)
    assert state.read_text() == f"{N}\n"
    # The holder stopped inside its critical section; the others waited on the lock and never arrived: their
    # traces show the flock refused (LOCK_NB, polled every 10 ms) and they sat idle.
    assert len(rendezvous.arrived) == 1 and rendezvous.why == "the others blocked on the lock"
    assert all("refused" in why for why in rendezvous.record()["blocked"].values())
    assert len(rendezvous.record()["blocked"]) == N - 1
    assert rendezvous.record()["late_stops_continued"] >= N - 1  # each later holder stopped, continued


@pytest.mark.timeout(60)
def test_read_before_lock_tool_loses_keys_when_stopped_at_its_lock_call(tmp_path):
    # Stopped at the lock call, each has read the whole config; the first holds the lock file, the others were
    # refused once (they retry after the release).
    config = seeded(tmp_path / "config" / "read-then-lock" / "config.json", "{}\n")
    lock = config.with_name("config.lock")
    invocations, rendezvous = rendezvous_round(tmp_path, READ_THEN_LOCK, lambda i: ["set", f"key{i}", f"v{i}"], lock,
                                               n=4, calls=LOCK_CALLS["exclusive-create"])
    assert not rendezvous.timed_out
    assert all(inv.exit_code == 0 for inv in invocations)  # each took the lock in turn...
    assert len(json.loads(config.read_text())) == 1  # ...and saved what it read before: {} plus its own key


# --- the hold --------------------------------------------------------------------------------------------

def held(tmp_path, tool, lock: Path, kind: str, args, at="inside"):
    launch = launcher(tmp_path)
    setup = launch.run("setup", [sys.executable, str(tool), *args])
    assert setup.exit_code == 0, setup.stderr
    running = launch.start("holder", [sys.executable, str(tool), *args],
                           wrap=hold_prefix(tmp_path / "hold", str(lock), kind, cwd=str(tmp_path)))
    hold = Hold(running, tmp_path / "hold", str(lock), kind, at=at)
    if hold.wait_held(30) is None or not hold.holding:
        hold.close()
        running.stop("the test failed")
        pytest.fail(f"never held: {running.finish().stderr[-500:]}")
    return running, hold


RELEASE_CASES = [  # (tool, lock file, kind, command, how it ends, lock left after it ended)
    (READ_THEN_LOCK, "config/read-then-lock/config.lock", "exclusive-create", ["set", "a", "b"], "release", False),
    (READ_THEN_LOCK, "config/read-then-lock/config.lock", "exclusive-create", ["set", "a", "b"], "SIGINT", False),
    (READ_THEN_LOCK, "config/read-then-lock/config.lock", "exclusive-create", ["set", "a", "b"], "SIGTERM", True),
    (FIXTURES / "adversarial/lock-left-on-sigterm/tool.py", "state/lock-left-on-sigterm/lock", "exclusive-create",
     ["config", "set", "a", "b"], "SIGTERM", True),
    (FIXTURES / "adversarial/lock-left-on-sigterm/tool.py", "state/lock-left-on-sigterm/lock", "exclusive-create",
     ["config", "set", "a", "b"], "SIGINT", False),
    (FIXTURES / "level2/tool.py", "state/level2/lock", "exclusive-create", ["config", "set", "a", "b"], "SIGTERM",
     False),
    (LEVEL3, "state/level3/lock", "flock", ["config", "set", "a", "b"], "SIGTERM", False),
]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("tool, lock, kind, args, how, left", RELEASE_CASES,
                         ids=[f"{c[0].parent.name}/{c[0].stem}-{c[4]}" for c in RELEASE_CASES])
def test_hold_then_release_or_signal(tmp_path, tool, lock, kind, args, how, left):
    lock = tmp_path / lock
    running, hold = held(tmp_path, tool, lock, kind, args)
    with hold:
        if how == "release":
            hold.release()
        else:
            hold.signal(getattr(signal, how))
        invocation = running.finish()
    assert lock_held(str(lock), kind) is left
    if how == "release":
        assert invocation.exit_code == 0
    else:  # it was ended by the signal where it was held, with or without a handler
        assert invocation.signal == getattr(signal, how) or invocation.exit_code == 128 + getattr(signal, how)


@pytest.mark.timeout(60)
def test_holding_keeps_a_contender_out(tmp_path):
    lock = tmp_path / "config/read-then-lock/config.lock"
    running, hold = held(tmp_path, READ_THEN_LOCK, lock, "exclusive-create", ["set", "a", "b"])
    with hold:
        contender = launcher(tmp_path).run("contender", [sys.executable, str(READ_THEN_LOCK), "set", "c", "d"])
        assert contender.exit_code == 3 and "holds the lock" in contender.stderr
        hold.release()
        assert running.finish().exit_code == 0


@pytest.mark.timeout(60)
@pytest.mark.skipif(not shutil.which("git"), reason="git is not installed")
@pytest.mark.parametrize("how, left", [("SIGTERM", False), ("SIGINT", False), ("SIGKILL", True)])
def test_hold_git_config_at_its_config_lock(tmp_path, how, left):
    # git reads its config at start-up (no FIFO park possible); held while writing config.lock, it still
    # removes the lock on SIGTERM and SIGINT (its lockfile signal handlers), and cannot on SIGKILL.
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    lock = tmp_path / ".git" / "config.lock"
    wrap = hold_prefix(tmp_path / "hold", str(lock), "exclusive-create", cwd=str(tmp_path))
    running = launcher(tmp_path).start("holder", ["git", "config", "user.name", "held"], wrap=wrap)
    with Hold(running, tmp_path / "hold", str(lock), "exclusive-create") as hold:
        assert hold.wait_held(30) is not None and hold.holding
        hold.signal(getattr(signal, how))
        invocation = running.finish()
    assert invocation.signal == getattr(signal, how)
    assert lock.exists() is left
