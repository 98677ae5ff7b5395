"""A command killed at its deadline says how its time went: on a CPU, or queued for one (a loaded machine: seen as
pg-jobs' psycopg commands killed at 10 s after 0.4-0.5 s on a CPU, the rest waiting for one), and neither for a
command that was blocked (a hung tool)."""
import os
import subprocess
import sys
import time

import pytest

from clirace.run.launch import Launcher

PY = sys.executable
needs_schedstat = pytest.mark.skipif(not os.path.exists("/proc/self/schedstat"),
                                     reason="this kernel keeps no /proc/PID/schedstat (CONFIG_SCHED_INFO)")
SPIN = "import os; os.sched_setaffinity(0, {{{cpu}}}); print('spinning', flush=True)\nwhile True: pass"


def launcher(tmp_path, timeout):
    return Launcher(dict(os.environ), str(tmp_path), {}, timeout)


@needs_schedstat
@pytest.mark.timeout(60)
def test_a_command_starved_of_cpu_says_it_waited_for_one(tmp_path):
    """The command spins on one CPU beside another spinner pinned to it, each in a session of its own (Linux's
    autogroups share the CPU out by session): each runs at most about half the time, so over a 2 s deadline it
    waits about a second for the CPU (more on a loaded machine, never much less)."""
    cpu = min(os.sched_getaffinity(0))
    rival = subprocess.Popen([PY, "-S", "-c", SPIN.format(cpu=cpu)], stdout=subprocess.PIPE, stdin=subprocess.DEVNULL,
                             start_new_session=True)
    try:
        assert rival.stdout.readline() == b"spinning\n"  # pinned and spinning before the command starts
        (result,) = launcher(tmp_path, 2.0).run_together([("j", [PY, "-S", "-c", SPIN.format(cpu=cpu)], None)])
    finally:
        rival.kill()
        rival.wait()
    assert result.timed_out and result.stdout == "spinning\n"
    assert result.cpu_wait is not None and result.cpu_wait > 0.5, result
    assert result.cpu_used is not None and result.cpu_used + result.cpu_wait <= result.duration + 0.1, result
    assert f"{result.cpu_wait:.1f}s waiting for one" in result.ending(), result.ending()


@needs_schedstat
@pytest.mark.timeout(60)
def test_a_blocked_command_neither_ran_nor_waited_for_a_cpu_and_says_where_it_slept(tmp_path):
    """`sleep` sleeps in the kernel's hrtimer_nanosleep (what /proc/PID/wchan says of another sleep here: "" where
    the kernel hides it)."""
    (result,) = launcher(tmp_path, 2.0).run_together([("j", ["sleep", "60"], None)])
    probe = subprocess.Popen(["sleep", "60"])
    try:
        where = ""
        for _ in range(300):  # until it sleeps (wchan reads "0" while it runs, and always where the kernel hides it)
            with open(f"/proc/{probe.pid}/wchan") as handle:
                where = handle.read().strip()
            if where not in ("", "0"):
                break
            time.sleep(0.01)
        where = "" if where == "0" else where
    finally:
        probe.kill()
        probe.wait()
    assert result.timed_out and result.cpu_used is not None and result.cpu_wait is not None, result
    assert result.cpu_used < 0.5 and result.cpu_wait < 1.0, result  # (its start alone, queued on a loaded machine)
    assert result.asleep_in == where, (result.asleep_in, where)
    assert result.ending().startswith("killed at its deadline after 2.") and "waiting for one" in result.ending()
    assert not where or result.ending().endswith(f"; asleep in {where})"), result.ending()


def test_a_command_that_answered_has_no_cpu_account(tmp_path):
    (result,) = launcher(tmp_path, 10.0).run_together([("j", ["true"], None)])
    assert result.exit_code == 0 and result.cpu_used is None and result.cpu_wait is None
    assert result.ending() == "exit 0" and result.asleep_in == ""


WORK = ("import os, time; os.sched_setaffinity(0, {{{cpu}}})\n"
        "while time.process_time() < {seconds}: pass\nprint('done', flush=True)")


@needs_schedstat
@pytest.mark.timeout(60)
def test_a_command_starved_of_cpu_gets_its_queued_time_back_and_answers(tmp_path):
    """The command needs 0.8 s of CPU and gets about half of one (a rival spinner pinned to the same CPU, in a
    session of its own): about 1.6 s of wall, more on a loaded machine. With a 1 s deadline it was killed before;
    the time it waited for the CPU is given back (up to 3 s in all), and it answers. A hung command is still
    killed at its deadline (test_hostile, test_launcher: a command asleep is never queued)."""
    cpu = min(os.sched_getaffinity(0))
    rival = subprocess.Popen([PY, "-S", "-c", SPIN.format(cpu=cpu)], stdout=subprocess.PIPE, stdin=subprocess.DEVNULL,
                             start_new_session=True)
    try:
        assert rival.stdout.readline() == b"spinning\n"
        (result,) = launcher(tmp_path, 1.0).run_together([("j", [PY, "-S", "-c", WORK.format(cpu=cpu, seconds=0.8)],
                                                            None)])
    finally:
        rival.kill()
        rival.wait()
    # Past its nominal deadline either way: it answered, or (a machine so loaded that even 3 s gave it less than
    # 0.8 s of CPU) it was killed at the stretch's cap, having waited for the CPU most of that time.
    if result.timed_out:
        assert result.duration >= 2.9 and result.cpu_wait > 1.5, result.ending()
    else:
        assert result.exit_code == 0 and result.stdout == "done\n" and result.duration > 1.0, result
