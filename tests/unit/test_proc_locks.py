"""One reader of /proc/locks (issue 25 item 10): procfs.proc_locks, read by the stopper, the rendezvous and the
leftover search alike; checked against real processes holding and waiting for a flock."""
import fcntl
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from clirace.run import procfs, stopper
from clirace.scenarios import outlived

SRC = Path(__file__).resolve().parents[2] / "src" / "clirace"
FLOCK = ("import fcntl, sys\nf = open(sys.argv[1], 'a')\nfcntl.flock(f, fcntl.LOCK_EX)\nprint('held', flush=True)\n"
         "sys.stdin.read()\n")


def test_only_procfs_reads_proc_locks():
    readers = sorted(str(p.relative_to(SRC)) for p in SRC.rglob("*.py") if "/proc/locks\")" in p.read_text())
    assert readers == ["run/procfs.py"], readers


@pytest.mark.timeout(30)
def test_a_held_flock_and_its_waiter_are_read_from_one_reader(tmp_path):
    path = tmp_path / "lock"
    path.touch()
    holder = subprocess.Popen([sys.executable, "-c", FLOCK, str(path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True)
    waiter = None
    try:
        assert holder.stdout.readline() == "held\n"  # readiness: the flock is taken
        waiter = subprocess.Popen([sys.executable, "-c", FLOCK, str(path)], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 20
        while waiter.pid not in procfs.lock_waiters():  # the kernel lists it once it blocks in flock()
            assert time.monotonic() < deadline and waiter.poll() is None, "the waiter never blocked on the flock"
            time.sleep(0.01)
        st = os.stat(path)
        mine = [lock for lock in procfs.proc_locks() if lock.on(st)]
        assert [(lock.kind, lock.mode, lock.pid, lock.waiting) for lock in mine if not lock.waiting] == \
            [("FLOCK", "WRITE", holder.pid, False)]
        assert any(lock.waiting and lock.pid == waiter.pid for lock in mine)
        assert stopper.lock_held(str(path), "flock")
        assert waiter.pid in procfs.lock_waiters() and outlived.held_locks(holder.pid) == (f"FLOCK WRITE {path}",)
    finally:
        for proc in (holder, waiter):
            if proc is not None:
                proc.kill()
                proc.wait()
    assert not stopper.lock_held(str(path), "flock")


@pytest.mark.timeout(30)
def test_a_flock_is_the_leftovers_when_the_pid_proc_locks_names_lives_without_the_file_open(tmp_path):
    """/proc/locks names a flock's taker by its pid, which may since belong to another process (pids wrap at 32768
    on a busy machine) or have closed its copy: a living pid is then no holder. Here the taker (this test) closes
    its copy while a child keeps the inherited one: the child holds the flock, and a leftover that holds it is
    ended and its refused command run again, where one thought to hold nothing was left running (the workload
    undecided)."""
    path = tmp_path / "lock"
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    child = None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], pass_fds=(fd,),
                                 stdin=subprocess.PIPE)
        assert outlived.held_locks(child.pid) == ()  # the taker is alive with the file open: the lock is its own
        os.close(fd)
        fd = -1
        assert outlived.held_locks(child.pid) == (f"FLOCK WRITE {path}",)
    finally:
        if fd >= 0:
            os.close(fd)
        if child is not None:
            child.kill()
            child.wait()


@pytest.mark.timeout(30)
def test_a_process_a_tracer_stopped_at_a_lock_calls_entry_is_not_blocked_on_the_lock(tmp_path):
    """strace stops a traced process at each lock call's entry, a LOCK_NB try included: /proc/PID/syscall then shows
    flock although nothing holds the lock, and the state is "t". That is no evidence of a lock wait (it made the
    polling level-3 contender read as "blocked in flock" now and then)."""
    import shutil
    if not shutil.which("strace"):
        pytest.skip("strace is not installed")
    path = tmp_path / "lock"
    path.touch()
    tries = "import fcntl, sys\nf = open(sys.argv[1], 'a')\nfcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)\n"
    traced = subprocess.Popen(["strace", "-f", "-qq", "-o", "/dev/null", "-e", "trace=flock",
                               "-e", "inject=flock:delay_enter=20000000", sys.executable, "-c", tries, str(path)])
    try:
        deadline, pid = time.monotonic() + 20, None
        while pid is None:  # readiness: the traced python is stopped at its flock's entry
            assert time.monotonic() < deadline and traced.poll() is None, "the traced process never reached flock"
            children = [int(p) for p in Path(f"/proc/{traced.pid}/task/{traced.pid}/children").read_text().split()]
            pid = next((c for c in children if procfs.blocked_in(c)[0] == "flock"), None)
            time.sleep(0.01)
        assert procfs.stat_fields(pid)[0] == "t"
        assert procfs.waits_for_lock(pid) == ""
    finally:
        traced.kill()
        traced.wait()

