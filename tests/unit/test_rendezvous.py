"""run/rendezvous.py and run/stopper.py on literal data: the detection bound, the strace command lines, and trace files
as strace writes them (no process is started here; tests/e2e/test_rendezvous.py runs real ones)."""
import math
import os
from types import SimpleNamespace

import pytest

from clirace.checks._common import detection_bound
from clirace.history import CounterRound
from clirace.run import observe, stopper
from clirace.run.rendezvous import OVERALL, cap_for, commit_point_prefix
from clirace.run.stopper import STOPPED, StopLog, hold_prefix, is_lock_call, path_forms, stop_prefix
from clirace.scenarios.workloads import _slowest_alone

from .histories import inv

# --- the detection bound --------------------------------------------------------------------------------

@pytest.mark.parametrize("rounds", [1, 3, 20, 59, 1000])
def test_bound_is_the_rate_caught_with_the_asked_confidence(rounds):
    p = detection_bound(rounds, 0)
    assert 1 - (1 - p) ** rounds == pytest.approx(0.99)  # a race failing a fraction p of rounds shows w.p. 99%


def test_bound_known_values():
    assert detection_bound(1, 0) == pytest.approx(0.99)
    assert detection_bound(20, 0) == pytest.approx(0.2057, abs=1e-4)
    assert detection_bound(459, 0) == pytest.approx(0.01, rel=1e-2)  # the rule of three's 99% cousin: ~4.6/n
    assert detection_bound(20, 0, confidence=0.95) == pytest.approx(1 - 0.05 ** (1 / 20))


def test_bound_shrinks_with_more_rounds_and_grows_with_confidence():
    assert detection_bound(10, 0) > detection_bound(11, 0)
    assert detection_bound(10, 0, 0.999) > detection_bound(10, 0, 0.99)


def test_bound_is_exact_where_the_naive_formula_loses_digits():
    assert detection_bound(10**9, 0) == pytest.approx(-math.log(0.01) / 10**9, rel=1e-6)


@pytest.mark.parametrize("rounds, failed", [(5, 1), (5, 5), (0, 0)])
def test_no_bound_when_the_race_showed_or_nothing_ran(rounds, failed):
    assert detection_bound(rounds, failed) is None


@pytest.mark.parametrize("rounds, failed, confidence", [(-1, 0, 0.99), (3, 4, 0.99), (3, -1, 0.99),
                                                        (3, 0, 1.0), (3, 0, 0.0)])
def test_bound_rejects_impossible_inputs(rounds, failed, confidence):
    with pytest.raises(ValueError):
        detection_bound(rounds, failed, confidence)


# --- how long a rendezvous waits at most ------------------------------------------------------------------

CPUS = len(os.sched_getaffinity(0))


def test_the_cap_stays_at_ten_seconds_for_a_usual_round_and_without_a_reference_run():
    assert cap_for(8, None) == cap_for(256, None) == OVERALL
    assert cap_for(8, 0.15) == OVERALL  # the level-3 tool's slowest serial run, eight wide, even on one CPU


def test_the_cap_grows_with_the_width_and_the_tools_own_time_once_the_start_ups_need_longer():
    wide = cap_for(256, 0.15)  # the level-3 tool, 256 wide: 13 s of traced start-ups on two cores
    assert wide >= 0.15 * 256 / CPUS  # at least the CPU time they need alone, spread over every CPU here
    assert cap_for(512, 0.15) > wide and cap_for(256, 0.3) > wide


def test_the_cap_is_sized_from_the_workloads_slowest_serial_run_that_answered():
    def serial(name, *durations, error=None, superseded=False, timed_out=()):
        invs = [inv(f"run-{i}", ended=d, timed_out=i in timed_out) for i, d in enumerate(durations)]
        return CounterRound(name=name, invocations=tuple(invs), workload=name, serial=True, error=error,
                             superseded=superseded)

    parallel = CounterRound(name="counter#0", invocations=(inv("inc-0", ended=9.0),), workload="counter#0")
    ctx = SimpleNamespace(earlier=[serial("counter#0", 0.1, 0.3), serial("keys#1", 2.0), parallel],
                          trials=[serial("counter#0", 0.2, 5.0, timed_out=(1,)),
                                  serial("counter#0", 4.0, superseded=True),
                                  serial("counter#0", 3.0, error="it failed alone")])
    assert _slowest_alone(ctx, "counter#0") == pytest.approx(0.3)  # not the parallel round's, another workload's,
    # an invocation killed at its deadline, a superseded pass or a failed one
    assert _slowest_alone(ctx, "claim#2") is None


# --- command lines --------------------------------------------------------------------------------------

def test_stop_prefix_injects_sigstop_on_the_paths_and_keeps_the_stop_line(tmp_path):
    state = tmp_path / "counter"
    state.write_text("0\n")
    argv = stop_prefix(tmp_path / "t", [str(state)], "read,pread64", when=2)
    assert os.path.basename(argv[0]) == "strace" and argv[-1] == "--"
    assert "inject=read,pread64:signal=SIGSTOP:when=2" in argv
    assert argv[argv.index("-P") + 1] == str(state.resolve())
    assert "signal=SIGSTOP" in argv  # the "stopped by" line is the arrival signal
    assert "--seccomp-bpf" not in argv  # strace 6.1 injects nothing under it


def test_commit_point_stops_at_every_read_by_default(tmp_path):
    # Every one, not the first of each thread (strace counts when=N per thread): the rendezvous counts the ends
    # of reads itself, over every thread, and continues those before its arrival.
    argv = commit_point_prefix(tmp_path / "t", [str(tmp_path / "s")])
    assert f"inject={stopper.READ_CALLS}:signal=SIGSTOP:when=1+" in argv


def test_hold_prefix_stops_at_the_lock_call_and_the_calls_after_it(tmp_path):
    argv = hold_prefix(tmp_path / "t", str(tmp_path / "lock"), "flock")
    inject = next(a for a in argv if a.startswith("inject="))
    assert inject.startswith("inject=flock,write,") and "close" in inject


def test_path_forms_existing_file_is_its_real_path(tmp_path):
    (tmp_path / "real").mkdir()
    (tmp_path / "real" / "state").write_text("")
    (tmp_path / "link").symlink_to(tmp_path / "real")
    assert path_forms([str(tmp_path / "link" / "state")]) == [str((tmp_path / "real" / "state").resolve())]


def test_path_forms_missing_lock_file_also_matches_relative_names(tmp_path):
    forms = path_forms([str(tmp_path / "dir" / "config.lock")], cwd=str(tmp_path))
    assert str(tmp_path / "dir" / "config.lock") in forms and "dir/config.lock" in forms


# --- reading the trace ----------------------------------------------------------------------------------

READ = 'read(3</s/counter>, "0\\n", 32)          = 2'
OPEN_EXCL = ('openat(AT_FDCWD</s>, "/s/config.lock", O_WRONLY|O_CREAT|O_EXCL|O_CLOEXEC, 0644) = 3</s/config.lock>')


def test_stoplog_reports_a_stop_with_the_call_it_follows(tmp_path):
    (tmp_path / "inc-0.41").write_text(f"{READ}\n--- SIGSTOP {{si_signo=SIGSTOP, si_code=SI_KERNEL}} ---\n{STOPPED}\n")
    (tmp_path / "inc-0.40").write_text("")  # strace itself was there first; a file exists per traced process
    log = StopLog(tmp_path / "inc-0")
    stops = log.poll()
    assert [(s.pid, s.call) for s in stops] == [(41, READ)]
    assert log.pids() == [40, 41]
    assert log.poll() == []  # seen once


def test_stoplog_waits_for_a_whole_line(tmp_path):
    trace = tmp_path / "x.7"
    trace.write_text(f"{READ}\n--- stopped by SIG")
    log = StopLog(tmp_path / "x")
    assert log.poll() == []  # a half-written line is not a stop yet
    with open(trace, "a") as handle:
        handle.write("STOP ---\n")
    assert [s.pid for s in log.poll()] == [7]


def test_a_sigstop_without_the_group_stop_line_is_no_arrival(tmp_path):
    # Continuing before "stopped by" can be swallowed (see stopper's docstring), so only that line counts.
    (tmp_path / "x.9").write_text(f"{READ}\n--- SIGSTOP {{si_signo=SIGSTOP, si_code=SI_KERNEL}} ---\n")
    assert StopLog(tmp_path / "x").poll() == []


@pytest.mark.parametrize("line, kind, expected", [
    (OPEN_EXCL, "exclusive-create", True),
    (OPEN_EXCL.replace("= 3</s/config.lock>", "= -1 EEXIST (File exists)"), "exclusive-create", False),
    ('openat(AT_FDCWD</s>, "/s/lock", O_RDWR|O_CREAT|O_CLOEXEC, 0644) = 3</s/lock>', "exclusive-create", False),
    ("flock(3</s/lock>, LOCK_EX|LOCK_NB)       = 0", "flock", True),
    ("flock(3</s/lock>, LOCK_EX|LOCK_NB)       = -1 EAGAIN (Resource temporarily unavailable)", "flock", False),
    ("flock(3</s/lock>, LOCK_UN)               = 0", "flock", False),
    ("fcntl(3</s/lock>, F_SETLKW, {l_type=F_WRLCK, l_whence=SEEK_SET, l_start=0, l_len=0}) = 0", "fcntl", True),
    ("fcntl(3</s/lock>, F_SETLK, {l_type=F_UNLCK, l_whence=SEEK_SET, l_start=0, l_len=0}) = 0", "fcntl", False),
    ("fcntl(3</s/lock>, F_GETFD)              = 0x1 (flags FD_CLOEXEC)", "fcntl", False),
    ('write(3</s/lock>, "123\\n", 4)          = 4', "exclusive-create", False),
])
def test_lock_calls_are_recognised_from_their_trace_line(line, kind, expected):
    assert is_lock_call(line, kind) is expected


def test_without_strace_it_says_not_available(monkeypatch):
    monkeypatch.setenv("CLIRACE_NO_STRACE", "1")
    observe.available.cache_clear()
    try:
        with pytest.raises(stopper.NotAvailable, match="not available: strace disabled"):
            stopper.require()
    finally:
        monkeypatch.delenv("CLIRACE_NO_STRACE")
        observe.available.cache_clear()


# --- where the rendezvous aims, and when an invocation has arrived -----------------------------------------

def _traced_round(*traces):
    from clirace.history import KeysRound
    from clirace.run.observe import parse_line
    return KeysRound(sandbox="/sb", amplified=True, traces={
        f"set-{n}": tuple(parse_line(line, "/sb", pid) for pid, line in trace) for n, trace in enumerate(traces)})


C = "/sb/home/c.json"
OPEN, CLOSE = (f'openat(AT_FDCWD</sb>, "{C}", O_RDONLY|O_CLOEXEC) = {{fd}}<{C}>', f"close({{fd}}<{C}>) = 0")
WRITE = (f'openat(AT_FDCWD</sb>, "{C}", O_WRONLY|O_CREAT|O_TRUNC|O_CLOEXEC, 0600) = 5<{C}>', f'write(5<{C}>, "{{}}", 2) = 2')
LOCK = ('openat(AT_FDCWD</sb>, "/sb/home/c.lock", O_WRONLY|O_CREAT|O_EXCL|O_CLOEXEC, 0600) = 6</sb/home/c.lock>',
        'unlink("/sb/home/c.lock") = 0')


def test_a_tool_reading_twice_is_stopped_after_its_second_read():
    from clirace.scenarios.aim import aim
    twice = [(1, OPEN.format(fd=3)), (1, CLOSE.format(fd=3)), (1, OPEN.format(fd=3)), (1, CLOSE.format(fd=3)),
             *((1, line) for line in WRITE)]
    met = aim(_traced_round(twice, twice))
    assert (met.ends, met.count) == ("close", 2)


def test_a_log_of_its_own_written_first_is_not_state_where_the_state_is_shared():
    # npm writes a debug log named by the time it started before it reads package.json twice: written, so a
    # state file, it closed each window before the first read and the aim fell back to the first read.
    from clirace.scenarios.aim import aim

    def npm(n):
        log = f"/sb/home/.npm/_logs/T{n}-debug-0.log"
        return [(1, f'openat(AT_FDCWD</sb>, "{log}", O_WRONLY|O_CREAT|O_APPEND, 0666) = 4<{log}>'),
                (1, f'write(4<{log}>, "0 verbose cli\\n", 14) = 14'), (1, OPEN.format(fd=3)), (1, CLOSE.format(fd=3)),
                (1, OPEN.format(fd=3)), (1, CLOSE.format(fd=3)), *((1, line) for line in WRITE)]
    met = aim(_traced_round(npm(0), npm(1)))
    assert (met.paths, met.ends, met.count) == (("home/c.json",), "close", 2)
    # Refused by the lock before they open anything, the others touch nothing: the one writer's files all stay.
    alone = aim(_traced_round(npm(0), [(1, LOCK[0].replace("= 6</sb/home/c.lock>", "= -1 EEXIST (File exists)"))]))
    assert alone is not None and "home/c.json" in alone.paths and len(alone.paths) == 2


def test_go_reading_on_two_threads_then_locking_is_stopped_after_both_reads_not_the_reread_under_the_lock():
    # Two goroutines read the config at start-up (threads 11 and 12, fds 3 and 4, interleaved); then the lock,
    # a third read under it (fd 3 again), and the rewrite. The window closes at the lock: 2 reads in it.
    from clirace.scenarios.aim import aim
    go = [(11, OPEN.format(fd=3)), (12, OPEN.format(fd=4)), (12, CLOSE.format(fd=3)), (11, CLOSE.format(fd=4)),
          (11, LOCK[0]), (12, OPEN.format(fd=3)), (12, CLOSE.format(fd=3)), *((11, line) for line in WRITE),
          (11, LOCK[1])]
    refused = [(21, OPEN.format(fd=3)), (21, CLOSE.format(fd=3)), (22, OPEN.format(fd=3)), (22, CLOSE.format(fd=3)),
               (21, LOCK[0].replace("= 6</sb/home/c.lock>", "= -1 EEXIST (File exists)"))]
    met = aim(_traced_round(go, go, refused))
    assert (met.ends, met.count, met.locks) == ("close", 2, ("home/c.lock",))
    first_run = [(1, f'openat(AT_FDCWD</sb>, "{C}", O_RDONLY|O_CLOEXEC) = -1 ENOENT (No such file or directory)')] * 2
    assert aim(_traced_round(go, [*first_run, (1, LOCK[0]), *((1, line) for line in WRITE)])).count == 2


def test_two_threads_given_the_same_fd_number_in_turn_are_two_reads_whichever_call_began_first():
    # Threads merged in the order their calls began: thread 12's open began before thread 11's close of fd 3
    # ended, and was given fd 3 once it had (seen in a full run at load 3: a Go tool aimed at its "read", not its
    # second read).
    from clirace.scenarios.aim import aim
    reused = [(11, OPEN.format(fd=3)), (12, OPEN.format(fd=3)), (11, CLOSE.format(fd=3)), (12, CLOSE.format(fd=3)),
              (11, LOCK[0]), *((11, line) for line in WRITE), (11, LOCK[1])]
    assert aim(_traced_round(reused, reused)).count == 2


def test_a_tool_locking_before_it_reads_is_stopped_at_its_first_read():
    from clirace.run.stopper import READ_CALLS
    from clirace.scenarios.aim import aim
    locked_first = [(1, LOCK[0]), (1, OPEN.format(fd=3)), (1, CLOSE.format(fd=3)), *((1, line) for line in WRITE),
                    (1, LOCK[1])]
    met = aim(_traced_round(locked_first, locked_first))
    assert (met.ends, met.calls, met.count) == ("read", READ_CALLS, 1)


def _log(tmp_path, per_thread):
    """A StopLog over trace files written as strace writes them: {tid: [line or STOPPED, ...]}."""
    for tid, lines in per_thread.items():
        (tmp_path / f"inv.{tid}").write_text("".join(f"{line}\n" for line in lines))
    log = StopLog(tmp_path / "inv")
    log.poll()
    return log


def test_arrival_counts_the_ends_of_reads_over_every_thread(tmp_path):
    from clirace.run.rendezvous import Arrival
    arrival = Arrival.of([C], "close", 2)
    one = _log(tmp_path, {11: [OPEN.format(fd=3), CLOSE.format(fd=3), STOPPED], 12: [STOPPED]})
    assert arrival.reached(one) is None  # one read ended: not there yet
    (tmp_path / "inv.12").write_text(f"{STOPPED}\n{OPEN.format(fd=4)}\n{CLOSE.format(fd=4)}\n{STOPPED}\n")
    both = _log(tmp_path, {})
    assert both.stopped == {11: 1, 12: 2}
    arrived = arrival.reached(both)
    assert arrived is not None and arrived.pid == 12 and "close(4" in arrived.call
    # a close of an fd it never opened on the state (stdout, now bearing the state's name) ends no read
    (tmp_path / "other").mkdir()
    stray = _log(tmp_path / "other", {7: [OPEN.format(fd=3), CLOSE.format(fd=3), f"close(1<{C}>) = 0", STOPPED]})
    assert Arrival.of([C], "close", 2).reached(stray) is None


@pytest.mark.parametrize("line", [
    f'read(3<{C}>, "{{\\"name\\": \\"example\\", \\"version\\": \\"1.0.0\\"}}", 39) = 39',  # npm: the size, no EOF read
    f'read(3<{C}>, "/etc/passwd\\n", 4096) = 12',  # data that looks like a path
    f'pread64(3<{C}>, "SQLite format 3\\0", 100, 0) = 100',
    f'readv(3<{C}>, [{{iov_base="ab", iov_len=2}}], 1) = 2',
    f"mmap(NULL, 4096, PROT_READ, MAP_SHARED, 3<{C}>, 0) = 0x7f5a1b2c3000",
])
def test_a_read_that_returned_data_is_an_arrival_at_the_first_read(tmp_path, line):
    # What a read call prints after its fd is the data it read: the call is on the fd's file, whatever the data
    # (it once read as a path under the fd's, so only a read of nothing, "", arrived: npm's and jq's rendezvous
    # rounds released with most of their invocations never stopped, and raced on luck).
    from clirace.run.rendezvous import Arrival
    op = observe.parse_line(line, "/elsewhere")
    assert op is not None and op.paths == (C,) and op.fd == 3 and not op.writes
    arrived = Arrival.of([C], "read").reached(_log(tmp_path, {21: [OPEN.format(fd=3), line, STOPPED]}))
    assert arrived is not None and arrived.call == line


def test_an_exec_line_gives_its_argv():
    assert stopper.exec_argv('execve("/usr/bin/python3", ["/usr/bin/python3", "t \\"x\\".py", "a"], 0x55 /* 38 vars */)'
                             ' = 0') == ["/usr/bin/python3", 't "x".py', "a"]
    assert stopper.exec_argv("close(3) = 0") is None


def test_a_group_stop_of_many_threads_is_continued_once(tmp_path, monkeypatch):
    # Every thread of a stopped process writes its own STOPPED line; one SIGCONT continues them all, and a second
    # would continue the process's next stop too. Two threads of this test process stand in for the tracee's.
    import threading
    ready, done = threading.Event(), threading.Event()
    other = {}

    def park():
        other["tid"] = threading.get_native_id()
        ready.set()
        done.wait(5)

    thread = threading.Thread(target=park)
    thread.start()
    ready.wait(5)
    sent = []
    monkeypatch.setattr(stopper, "resume", sent.append)
    try:
        log = _log(tmp_path, {os.getpid(): [READ, STOPPED], other["tid"]: [STOPPED]})
        assert len(log.pending) == 2
        log.continue_pending()
    finally:
        done.set()
        thread.join()
    assert sent == [os.getpid()]
