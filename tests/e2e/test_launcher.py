"""The launcher with real processes: barrier release, deadlines, output capture, busy descriptor tables."""
import os
import sys
import time

import pytest

from clirace.run.launch import Launcher

from ..procs import WRITERS, threads_alive, wait_for

PY = sys.executable


def launcher(tmp_path, timeout=10.0):
    return Launcher(dict(os.environ), str(tmp_path), {}, timeout)


@pytest.mark.timeout(30)
def test_nobody_starts_before_the_release_and_output_is_untouched(tmp_path):
    """Each target records when it started; all must start after the release, the time the launcher noted just
    before it opened the barrier (`started`). A time taken after start_together returned is no bound: on a loaded
    machine the targets can start and write theirs before this thread runs again (seen at load 10, by 17 ms)."""
    jobs = [(f"j{i}", [PY, "-S", "-c", f"import time; open('{tmp_path}/t{i}','w').write(str(time.monotonic())); "
                       f"print('out{i}')"], None) for i in range(6)]
    runnings = launcher(tmp_path).start_together(jobs)
    released = {r.started for r in runnings}
    results = [r.finish() for r in runnings]
    starts = [float((tmp_path / f"t{i}").read_text()) for i in range(6)]
    assert len(released) == 1 and all(s >= min(released) for s in starts), (released, starts)
    assert [r.stdout for r in results] == [f"out{i}\n" for i in range(6)]  # the shim's ready byte is not in it
    assert all(r.exit_code == 0 for r in results)


@pytest.mark.timeout(30)
def test_barrier_works_when_descriptors_3_to_9_are_taken(tmp_path):
    """A POSIX shell redirects only descriptors 0-9; under `time` or a test runner they may all be in use."""
    held = [os.open(os.devnull, os.O_RDONLY) for _ in range(12)]
    try:
        results = launcher(tmp_path).run_together([(f"j{i}", ["echo", f"hi{i}"], None) for i in range(4)])
    finally:
        for fd in held:
            os.close(fd)
    assert [(r.exit_code, r.stdout) for r in results] == [(0, f"hi{i}\n") for i in range(4)]


@pytest.mark.timeout(30)
def test_deadline_ends_a_hanging_batch_once(tmp_path):
    t0 = time.monotonic()
    results = launcher(tmp_path, timeout=0.5).run_together([(f"j{i}", ["sleep", "60"], None) for i in range(4)])
    assert all(r.timed_out and r.signal == 15 for r in results), results
    assert time.monotonic() - t0 < 5  # one grace period for the batch, not one each


@pytest.mark.timeout(30)
def test_target_sees_stdin_closed_and_big_output_is_capped_but_counted(tmp_path):
    code = "import sys; data = sys.stdin.read(); sys.stdout.write('x' * 300000); print(len(data), file=sys.stderr)"
    (result,) = launcher(tmp_path).run_together([("j", [PY, "-S", "-c", code], None)])
    assert result.stderr.strip() == "0" and result.stdout_bytes == 300000 and len(result.stdout) == 64 * 1024


@pytest.mark.timeout(30)
def test_missing_program_is_recorded_like_a_shell_would(tmp_path):
    result = launcher(tmp_path).run("j", ["/nonexistent/tool"])
    assert result.exit_code == 127 and "cannot execute" in result.stderr


@pytest.mark.timeout(30)
@pytest.mark.parametrize("attempt", range(5))
def test_stop_returns_once_the_children_left_in_the_group_have_exited(tmp_path, attempt):
    """The group's last SIGKILL reaches a child the invocation never waits for (its shell has exited): stop()
    returns only when every thread of it has exited, so nothing of it writes into a folder read or removed next."""
    folder, ready = tmp_path / "box", tmp_path / "ready"
    folder.mkdir()
    running = launcher(tmp_path).start("writer", ["sh", "-c", f'"$0" -c \'{WRITERS}\' "$1" "$2" & wait', PY,
                                                  str(folder), str(ready)])
    child = int(wait_for(lambda: ready.exists() and ready.read_text(), 10, "the writer's threads to run"))
    running.stop()  # SIGTERM: the shell dies, the writer ignores it; then SIGKILL to the group
    assert threads_alive(child) == [], "stop() returned while threads of a child left in the group ran"
    running.finish()
