"""Lock checks on literal histories: what counts as a structured LOCK_HELD error, release, and bounded waits."""
import dataclasses
import json

import pytest

from clirace.checks import lock_excludes, lock_release, lock_structured, lock_wait
from clirace.checks.lockerror import find_error
from clirace.history import Alone, LockConflict, LockRelease, LockWait, NotRun, ServerOp, Watched
from clirace.history.vocab import EventKind, HoldMode, Way

from .histories import event, history, inv

ENVELOPE = json.dumps({"ok": False, "data": None, "error": {
    "code": "LOCK_HELD", "message": "Another run is active (pid 42, started 3s ago)", "retryable": True,
    "retry_after_ms": 250}}, indent=2)


def conflict(contender, while_held="exited", holder_alive=True, retries=()):
    events = [event(EventKind.HELD, 0.0)]
    if while_held == "reached":
        events.append(event(EventKind.REACHED_STATE, 0.01, "contender"))
    if while_held == "waiting":
        events.append(event(EventKind.RELEASED, 0.01))
    if not holder_alive:
        events.append(event(EventKind.HOLDER_GONE, 0.06))
    return LockConflict(invocations=(contender, *retries),
                        events=tuple(events), prompt=5.0, hold=HoldMode.PARK, retry_wait_ms=250)


@pytest.mark.parametrize("stdout,stderr", [
    (ENVELOPE, ""),
    ("", "Error: " + ENVELOPE),
    ('{"code": "LOCK_HELD", "retry_after_ms": 0}', ""),
    ("progress line\n" + ENVELOPE + "\ntrailing", ""),
])
def test_structured_error_shapes_are_recognised(stdout, stderr):
    printed = find_error(stdout, stderr)
    assert printed.says_lock_held and printed.structured


@pytest.mark.parametrize("error,code", [
    ({"code": "LOCK_HELD"}, "CR204"),
    ({"code": "LOCK_HELD", "retry_after_ms": "250"}, "CR205"),
    ({"code": "LOCK_HELD", "retry_after_ms": -1}, "CR205"),
    ({"code": "LOCK_HELD", "retry_after_ms": 2.5}, "CR205"),
    ({"code": "LOCK_HELD", "retry_after_ms": True}, "CR205"),
    ({"code": "BUSY", "retry_after_ms": 100}, "CR206"),
])
def test_malformed_lock_errors_fail_with_their_rule(error, code):
    v = lock_structured.check(history(conflict(inv("contender", 1, stdout=json.dumps({"error": error})))))
    assert v.status == "fail"
    assert code in [f.code for f in v.findings]


def test_envelope_passes_without_advisories():
    v = lock_structured.check(history(conflict(inv("contender", 4, stdout=ENVELOPE))))
    assert v.status == "pass"
    assert [f.code for f in v.findings] == []


def test_bare_error_passes_with_advisories_that_do_not_fail():
    v = lock_structured.check(history(conflict(inv("contender", 1, stdout='{"code": "LOCK_HELD", "retry_after_ms": 5}'))))
    assert v.status == "pass"
    assert sorted(f.code for f in v.findings) == ["CR901", "CR902", "CR903", "CR904"]
    assert all(f.advisory for f in v.findings)


def test_plain_text_error_is_unstructured_but_excludes():
    h = history(conflict(inv("contender", 1, stderr="Error: lock file exists")))
    assert [f.code for f in lock_structured.check(h).findings] == ["CR202"]
    assert lock_excludes.check(h).status == "pass"


def test_lock_held_with_exit_zero():
    v = lock_structured.check(history(conflict(inv("contender", 0, stdout=ENVELOPE))))
    assert v.status == "fail" and v.findings[0].code == "CR203"


def test_contender_that_ran_is_not_excluded():
    h = history(conflict(inv("contender", 0)))
    assert lock_excludes.check(h).findings[0].code == "CR201"


def test_contender_reaching_parked_state_is_not_excluded():
    h = history(conflict(inv("contender", None, timed_out=True), while_held="reached"))
    assert lock_excludes.check(h).status == "fail"
    assert lock_structured.check(h).status == "fail"


def test_waiting_contender_excludes_but_is_not_structured():
    h = history(conflict(inv("contender", 0), while_held="waiting"))
    assert lock_excludes.check(h).status == "pass"
    assert lock_structured.check(h).findings[0].code == "CR207"


def test_a_contender_that_does_not_finish_alone_makes_lock_checks_unknown():
    alone = Alone(name="contender", command="contender", invocations=(inv("alone", None, timed_out=True),))
    h = history(alone, conflict(inv("contender", 1)))
    assert lock_excludes.check(h).status == "unknown"
    assert lock_structured.check(h).status == "unknown"


def test_no_lock_section_is_not_tested():
    skipped = [NotRun(experiment=e, why="the spec has no lock section") for e in ("lock-conflict", "lock-release", "lock-wait")]
    for check in (lock_excludes, lock_release, lock_wait):
        v = check.check(history(*skipped))
        assert v.status == "not_tested" and v.summary == "the spec has no lock section"


def test_a_contender_past_the_lock_after_the_holder_died_is_undecided():
    h = history(conflict(inv("contender", 0), holder_alive=False))
    assert lock_excludes.check(h).status == "unknown"


@pytest.mark.parametrize("contender", [inv("contender", 0), inv("contender", 1, stderr="busy")], ids=["ran", "refused"])
def test_no_lock_criterion_judges_a_contender_that_ran_after_the_holder_quit(contender):
    """Issue 25 item 7: the holder exited on its own before the contender finished; no lock was provably held."""
    declared = NotRun(experiment="lock-wait", why="never waits", declared="never-waits")
    h = history(conflict(contender, holder_alive=False), declared)
    for check in (lock_structured, lock_wait):
        v = check.check(h)
        assert v.status == "unknown" and not v.findings, (check.ID, v)
        assert "holder had exited on its own" in v.summary


@pytest.mark.parametrize("contender", [inv("contender", 1, stdout="timed out", ended=1.2),
                                       inv("contender", None, ended=4.0, timed_out=True)], ids=["refused", "hung"])
def test_a_lock_wait_whose_holder_quit_during_the_wait_is_undecided(contender):
    """Issue 25 item 7: the lock-wait experiment's contender, once the holder exited on its own."""
    trial = dataclasses.replace(waited(1, 1200), events=(event(EventKind.HELD, 0.0), event(EventKind.HOLDER_GONE, 1.3)),
                                invocations=(inv("alone", 0, ended=0.0), contender))
    v = lock_wait.check(history(trial))
    assert v.status == "unknown" and not v.findings, v


def test_a_contender_that_cannot_finish_alone_leaves_release_undecided_not_failed():
    """Issue 25 item 7: each way's next invocation is the contender, which hangs even alone."""
    alone = Alone(name="contender", command="contender", invocations=(inv("alone", None, timed_out=True),))
    hung = LockRelease(name="normal", way=Way.NORMAL, invocations=(inv("holder", 0), inv("next", None, timed_out=True)))
    v = lock_release.check(history(alone, hung))
    assert v.status == "unknown" and not [f for f in v.findings if not f.advisory], v



def release(way, holder_exit, next_exit, signal=None, timed_out=False):
    return LockRelease(name=way, way=Way(way), invocations=(
        inv("holder", holder_exit, signal=signal, timed_out=timed_out), inv("next", next_exit, stderr="lock file exists")))


def all_released():
    return [release("normal", 0, 0), release("error", 3, 0), release("sigint", None, 0, signal=2),
            release("sigterm", None, 0, signal=15), release("sigkill", None, 0, signal=9)]


def test_release_passes_on_every_way():
    v = lock_release.check(history(*all_released()))
    assert v.status == "pass"
    assert [f.code for f in v.findings] == ["CR906"]


def test_lock_left_after_sigterm_fails():
    trials = all_released()
    trials[3] = release("sigterm", None, 1, signal=15)
    v = lock_release.check(history(*trials))
    assert v.status == "fail" and "CR304" in [f.code for f in v.findings]


def test_lock_left_after_sigkill_is_only_advice():
    trials = all_released()
    trials[4] = release("sigkill", None, 1, signal=9)
    v = lock_release.check(history(*trials))
    assert v.status == "pass" and [f.code for f in v.findings] == ["CR905"]


def test_untestable_error_way_is_not_tested_not_passed():
    trials = all_released()
    trials[1] = NotRun(experiment="lock-release/error", why="no lock.error_command")
    v = lock_release.check(history(*trials))
    assert v.status == "not_tested" and "no lock.error_command" in v.summary


def test_holder_ignoring_sigterm_fails():
    trials = all_released()
    trials[3] = release("sigterm", None, 0, signal=9, timed_out=True)
    assert "CR305" in [f.code for f in lock_release.check(history(*trials)).findings]


POLLING = Watched(seconds=0.2, cpu_seconds=0.004, states=("S",), sleeping_in=("hrtimer_nanosleep",), wakes=14,
                  blocked="process 7 kept {sandbox}/lock open, which another process held locked, and woke 14 times "
                          "meanwhile: retrying the lock")


def waited(exit_code, ms, stdout=ENVELOPE, timed_out=False, watched=POLLING, server_ops=()):
    return LockWait(invocations=(inv("alone", 0, ended=0.0), inv("contender", exit_code, stdout=stdout, ended=ms / 1000,
                                                                   timed_out=timed_out)),
                    option="--lock-timeout 1000", wait_ms=1000, margin_ms=1000, limit_s=4.0, watched=watched,
                    server_ops=server_ops)


@pytest.mark.parametrize("case,status,code", [
    (waited(4, 1050), "pass", None),
    (waited(None, 4000, timed_out=True), "fail", "CR401"),
    (waited(1, 1050, stdout="timed out"), "fail", "CR402"),
    (waited(4, 30), "fail", "CR403"),
    (waited(4, 2500), "fail", "CR404"),
    (waited(0, 1050, stdout="done"), "fail", "CR201"),
])
def test_lock_wait(case, status, code):
    v = lock_wait.check(history(case))
    assert v.status == status
    assert [f.code for f in v.findings] == ([code] if code else [])


def test_a_lock_wait_answer_passes_only_with_evidence_that_the_contender_was_blocked_on_the_lock():
    """Issue 25 item 1: LOCK_HELD after the right time is what a tool that sleeps its wait prints too."""
    v = lock_wait.check(history(waited(4, 1050)))
    assert v.status == "pass" and "while it waited, process 7 kept {sandbox}/lock open" in v.summary, v
    slept = Watched(seconds=1.0, cpu_seconds=0.002, states=("S",), sleeping_in=("hrtimer_nanosleep",), wakes=1)
    for watched in (slept, None):  # idle without proof, or not watched at all (older histories)
        v = lock_wait.check(history(waited(4, 1050, watched=watched)))
        assert v.status == "unknown" and not v.findings, v
        assert "nothing showed it blocked on the held lock" in v.summary and "What would decide it" in v.hint
    assert "asleep in hrtimer_nanosleep" in lock_wait.check(history(waited(4, 1050, watched=slept))).summary
    # A server that saw the contender ask for the lock again and again is proof enough.
    tries = tuple(ServerOp("redis", f"127.0.0.1:{port}", at, ("SET", "lock", who, "NX", "PX", "30000"))
                  for port, at, who in ((1, 0.1, "clirace-1"), (2, 0.3, "me"), (2, 0.6, "me")))
    v = lock_wait.check(history(waited(4, 1050, watched=slept, server_ops=tries)))
    assert v.status == "pass" and "asked the server for the lock 2 times" in v.summary, v
    # Without proof, a wrong answer still fails: the evidence is needed to pass, not to fail.
    assert [f.code for f in lock_wait.check(history(waited(4, 30, watched=None))).findings] == ["CR403"]


def test_retry_hint_that_never_gets_through_fails():
    t = conflict(inv("contender", 4, stdout=ENVELOPE), retries=[inv(f"retry-{n}", 4, stdout=ENVELOPE) for n in (1, 2, 3)])
    v = lock_structured.check(history(t))
    assert v.status == "fail" and v.findings[0].code == "CR208"


def test_retry_hint_that_gets_through_passes():
    t = conflict(inv("contender", 4, stdout=ENVELOPE), retries=[inv("retry-1", 0)])
    v = lock_structured.check(history(t))
    assert v.status == "pass" and "got through on try 1" in v.summary


def test_a_json_error_with_the_wrong_code_is_reported_as_the_wrong_code_only():
    v = lock_structured.check(history(conflict(inv("contender", 1, stdout='{"code": "BUSY"}'))))
    assert [f.code for f in v.findings] == ["CR206"], v.findings


def test_a_lock_wait_error_whose_retry_after_ms_is_a_string_says_so():
    v = lock_wait.check(history(waited(4, 1050, stdout='{"code": "LOCK_HELD", "retry_after_ms": "250"}')))
    assert [f.code for f in v.findings] == ["CR402"] and "retry_after_ms" in v.findings[0].args["printed"]


def test_a_tool_that_never_waits_is_judged_on_its_prompt_answer():
    declared = NotRun(experiment="lock-wait", why="never waits", declared="never-waits")
    v = lock_wait.check(history(conflict(inv("contender", 4, stdout=ENVELOPE)), declared))
    assert v.status == "pass" and "never waits" in v.summary
    v = lock_wait.check(history(conflict(inv("contender", 1, stderr="busy")), declared))
    assert [f.code for f in v.findings] == ["CR402"]


# --- time judged against the tool itself -------------------------------------------------------------------

def timed(contender, *, waiting=False, cpu=0.0, states=("S",), round_=0, blocked=""):
    """A conflict whose contender had 5 s + 0.5 s alone to answer, then 2.5 s more, watched when still running."""
    trial = conflict(contender, while_held="waiting" if waiting else "exited")
    watched = Watched(seconds=2.5, cpu_seconds=cpu, states=states, sleeping_in=("do_nanosleep",),
                      blocked=blocked) if waiting else None
    return dataclasses.replace(trial, round=round_, alone=0.5, window=5.5, follow=2.5, watched=watched,
                               events=tuple(dataclasses.replace(e, at=8.0) if e.kind is EventKind.RELEASED else e
                                            for e in trial.events))


def test_a_contender_still_running_is_waiting_only_when_shown_blocked_on_the_lock():
    blocked = history(timed(inv("contender", 0, ended=8.3), waiting=True, cpu=0.01,
                            blocked="process 7 was blocked in flock, waiting for the lock"))
    v = lock_excludes.check(blocked)
    assert v.status == "pass" and "5.5 s and 2.5 s more" in v.summary and "blocked in flock" in v.summary
    assert "asleep in do_nanosleep" in v.summary
    # Idle is no proof of blocking: a sleep (a backoff, a network call) is idle too.
    idle = history(timed(inv("contender", 0, ended=8.3), waiting=True, cpu=0.01))
    v = lock_excludes.check(idle)
    assert v.status == "unknown" and "nothing showed it blocked on the lock" in v.summary, v
    assert "/proc/locks" in v.hint
    assert [f.code for f in lock_structured.check(idle).findings] == ["CR207"]
    assert [f.code for f in lock_structured.check(blocked).findings] == ["CR207"]
    busy = history(timed(inv("contender", 0, ended=8.3), waiting=True, cpu=2.0, states=("R",)))
    v = lock_excludes.check(busy)
    assert v.status == "unknown" and "working, not waiting" in v.summary


def test_a_contender_a_server_made_wait_or_that_retried_a_server_lock_was_blocked_and_one_that_asked_once_not():
    def waiting(*ops):
        trial = timed(inv("contender", 0, ended=8.3), waiting=True, cpu=0.01)
        return lock_excludes.check(history(dataclasses.replace(trial, server_ops=ops)))

    clirace = ServerOp("redis", "127.0.0.1:1", 0.1, ("SET", "lock", "clirace-1", "NX", "PX", "30000"))
    retry = ServerOp("redis", "127.0.0.1:2", 0.5, ("SET", "lock", "me", "NX", "PX", "30000"))
    v = waiting(clirace, retry, dataclasses.replace(retry, at=0.6))
    assert v.status == "pass" and "asked the server for the lock 2 times" in v.summary, v
    assert waiting(clirace, retry).status == "unknown"  # asked once, then slept: a backoff, not a wait
    advisory = ServerOp("postgres", "41", 0.1, sql="SELECT pg_advisory_lock(7)")
    v = waiting(advisory, dataclasses.replace(advisory, client="42", at=0.5))
    assert v.status == "pass" and "made client 42 wait" in v.summary, v


def test_a_slow_contender_answering_within_its_own_time_is_prompt_and_an_unlocked_one_is_caught():
    slow_but_locked = history(timed(inv("contender", 4, stdout=ENVELOPE, ended=5.2)))  # > prompt, < prompt + alone
    assert lock_excludes.check(slow_but_locked).status == "pass"
    assert lock_structured.check(slow_but_locked).status == "pass"
    slow_unlocked = history(timed(inv("contender", 0, ended=5.2)))
    assert [f.code for f in lock_excludes.check(slow_unlocked).findings] == ["CR201"]


def test_an_answer_after_its_window_is_recorded_and_named_late():
    late = history(timed(inv("contender", 1, stderr="Error: database is locked", ended=6.1)),
                   timed(inv("contender", 1, stderr="Error: database is locked", ended=6.2), round_=1))
    assert lock_excludes.check(late).status == "pass"
    v = lock_structured.check(late)
    assert [f.code for f in v.findings] == ["CR213"]
    assert "answered only after 6.1s (exit 1: stderr: Error: database is locked)" in v.summary
    assert "past the 5.5s it had to answer (prompt 5s plus 0.5s, its time alone)" in v.summary
    assert "the same in a second run" in v.findings[0].evidence.found


def test_two_runs_that_disagree_on_a_timing_outcome_are_flaky_not_a_verdict():
    flaky = history(timed(inv("contender", 1, stderr="locked", ended=6.1)),
                    timed(inv("contender", 1, stderr="locked", ended=1.0), round_=1))
    for check in (lock_excludes, lock_structured):
        v = check.check(flaky)
        assert v.status == "unknown" and v.summary.startswith("flaky: the contender answered only after"), v


def close(ended, round_=0, exit_code=4, stdout=ENVELOPE):
    """A conflict whose contender answered LOCK_HELD after `ended` s, with 5.5 s to answer (prompt 5 s plus its
    slowest run alone, 0.5 s) and 5.1 s with its fastest (0.1 s): after 5.1 s and by 5.5 s is too close to tell."""
    return dataclasses.replace(timed(inv("contender", exit_code, stdout=stdout, ended=ended), round_=round_),
                               close_from=5.1)


def test_an_answer_too_close_to_its_time_to_tell_decides_nothing_the_clock_decides_and_the_other_run_does():
    """A helper's run at load 13 called late-answer's 2.98 s answer in time: its window (prompt plus its slowest run
    alone, stretched by the load) ended at 3.0 s. An answer between the prompt plus its fastest run alone and plus
    its slowest is too close to call: run twice, the other run decides; twice close decides nothing on the clock."""
    twice_close = history(close(5.3), close(5.4, round_=1))
    v = lock_structured.check(twice_close)
    assert v.status == "unknown" and "too close to its time to answer to tell" in v.summary, v
    assert "the same in a second run" in v.summary and "less loaded machine" in v.hint, v
    assert lock_excludes.check(twice_close).status == "pass"  # refused all the same: the clock does not matter here
    close_then_late = history(close(5.3), close(6.1, round_=1))
    v = lock_structured.check(close_then_late)
    assert [f.code for f in v.findings] == ["CR213"] and "answered only after 6.1s" in v.summary, v
    assert "in the first run the contender answered too close" in v.findings[0].evidence.found, v.findings[0]
    late_then_close = history(close(6.1), close(5.3, round_=1))
    v = lock_structured.check(late_then_close)
    assert [f.code for f in v.findings] == ["CR213"] and "answered only after 6.1s" in v.summary, v
    assert "in the second run the contender answered too close" in v.findings[0].evidence.found, v.findings[0]
    close_then_prompt = history(close(5.3), close(1.0, round_=1))
    assert lock_structured.check(close_then_prompt).status == "pass"
    for runs in (twice_close, close_then_late, close_then_prompt):
        assert lock_excludes.check(runs).status == "pass"
    # Before the prompt plus its fastest run alone, an answer is in time, as it always was; one run is enough.
    assert lock_structured.check(history(close(5.05))).status == "pass"
    # A contender that ran (exit 0) is not excluded, whenever it answered.
    ran = history(close(5.3, exit_code=0, stdout="saved"), close(5.4, round_=1, exit_code=0, stdout="saved"))
    assert [f.code for f in lock_excludes.check(ran).findings] == ["CR201"]
    # Nor did it fail with a structured error, whenever it answered: the lock was held all through its window, so its
    # exit 0 fails lock-error-structured on the evidence, not on the clock (it was left undecided).
    v = lock_structured.check(ran)
    assert v.status == "fail" and [f.code for f in v.findings] == ["CR201"], v


def test_every_run_twice_outcome_that_disagrees_says_flaky_in_its_data():
    """Issue 25 item 10: one helper and one word (rates["flaky"]) for the three outcomes the clock decides: the
    conflict's answer, the lock wait's bounds, the holder's signal wait."""
    conflict_runs = history(timed(inv("contender", 1, stderr="locked", ended=6.1)),
                            timed(inv("contender", 1, stderr="locked", ended=1.0), round_=1))
    wait_runs = history(waited(4, 2500), dataclasses.replace(waited(4, 1050), round=1))
    stuck = release("sigterm", None, 0, signal=9, timed_out=True)
    release_runs = history(*[t for t in all_released() if t.way is not Way.SIGTERM], stuck,
                           dataclasses.replace(release("sigterm", None, 0, signal=15), round=1))
    for check, h in ((lock_excludes, conflict_runs), (lock_structured, conflict_runs), (lock_wait, wait_runs),
                     (lock_release, release_runs)):
        v = check.check(h)
        assert v.status == "unknown" and v.rates.get("flaky") is True and "flaky: " in v.summary, (check.ID, v)
        assert "reported only when two runs agree" in v.summary


def test_release_passes_only_on_a_record_of_every_way_the_holder_must_end():
    only_kill = [t for t in all_released() if t.way is Way.SIGKILL]
    v = lock_release.check(history(*only_kill))
    assert v.status == "unknown" and "no record of the holder ending by normal, error, sigint, sigterm" in v.summary


def test_a_holder_outliving_its_signal_wait_once_in_two_runs_is_flaky():
    stuck = release("sigterm", None, 0, signal=9, timed_out=True)
    ended = release("sigterm", None, 0, signal=15)
    trials = [t for t in all_released() if t.way is not Way.SIGTERM]
    v = lock_release.check(history(*trials, stuck, dataclasses.replace(ended, round=1)))
    assert v.status == "unknown" and "sigterm: flaky" in v.summary
    v = lock_release.check(history(*trials, stuck, dataclasses.replace(stuck, round=1)))
    (stuck_twice,) = [f for f in v.findings if not f.advisory]
    assert stuck_twice.code == "CR305" and "second run" in stuck_twice.evidence.found


def test_a_server_lock_statement_that_does_not_wait_proves_no_wait_and_setnx_retries_are_a_retry_loop():
    """The lock-wait proof reads server lock calls with the one server-lock reader (run/services/ops.py): a
    FOR UPDATE NOWAIT, SKIP LOCKED or pg_try_advisory_lock is answered at once, so it shows no wait; a second
    SETNX of the lock is a retry like a second SET NX."""
    def waiting(*ops):
        trial = timed(inv("contender", 0, ended=8.3), waiting=True, cpu=0.01)
        return lock_excludes.check(history(dataclasses.replace(trial, server_ops=ops)))

    holder = ServerOp("postgres", "41", 0.1, sql="SELECT n FROM c WHERE id = 1 FOR UPDATE")
    for statement in ("SELECT n FROM c WHERE id = 1 FOR UPDATE NOWAIT", "SELECT n FROM c FOR UPDATE SKIP LOCKED",
                      "SELECT pg_try_advisory_lock(7)"):
        v = waiting(holder, ServerOp("postgres", "42", 0.5, sql=statement))
        assert v.status == "unknown" and "made client 42 wait" not in v.summary, (statement, v)
    v = waiting(holder, ServerOp("postgres", "42", 0.5, sql="SELECT n FROM c WHERE id = 1 FOR NO KEY UPDATE"))
    assert v.status == "pass" and "made client 42 wait" in v.summary, v
    clirace = ServerOp("redis", "127.0.0.1:1", 0.1, ("SET", "lock", "clirace-1", "NX", "PX", "30000"))
    setnx = ServerOp("redis", "127.0.0.1:2", 0.5, ("SETNX", "lock", "me"))
    v = waiting(clirace, setnx, dataclasses.replace(setnx, at=0.6))
    assert v.status == "pass" and "asked the server for the lock 2 times" in v.summary, v
    assert waiting(clirace, setnx).status == "unknown"


def test_a_never_waits_tool_whose_answers_were_both_too_close_to_tell_leaves_its_lock_wait_undecided():
    """lock-wait-timeout judges a tool that never waits on the conflict's answer, by the clock: two answers too
    close to their time to answer decide nothing, neither a prompt answer (a pass) nor a late one (CR405); the
    other run decides when only one was close, and a contender that ran fails whenever it answered."""
    declared = NotRun(experiment="lock-wait", why="never waits", declared="never-waits")
    twice_close = history(close(5.3), close(5.4, round_=1), declared)
    v = lock_wait.check(twice_close)
    assert v.status == "unknown" and not v.findings, v
    assert v.summary.startswith("could not decide: the contender answered too close to its time to answer to tell"), v
    assert "5.5 s to answer, 5.1 s with its fastest run alone" in v.summary, v
    assert "the same in a second run" in v.summary and "less loaded machine" in v.hint, v
    structured = lock_structured.check(twice_close)
    assert (v.summary, v.hint) == (structured.summary, structured.hint)  # one wording for both checks
    assert [f.code for f in lock_wait.check(history(close(5.3), close(6.1, round_=1), declared)).findings] == ["CR405"]
    assert lock_wait.check(history(close(5.3), close(1.0, round_=1), declared)).status == "pass"
    ran = history(close(5.3, exit_code=0, stdout="saved"), close(5.4, round_=1, exit_code=0, stdout="saved"), declared)
    assert [f.code for f in lock_wait.check(ran).findings] == ["CR405"]


def test_a_conflict_record_without_its_contender_is_undecided_not_a_crash():
    """A history edited after clirace saved it (tests/e2e/test_fuzz_history.py found one: a label renamed) may hold a
    lock-conflict record with no contender invocation; the checks asserted it was there and failed themselves."""
    renamed = dataclasses.replace(timed(inv("renamed", 4, stdout=ENVELOPE, ended=1.0)), close_from=5.1)
    for check in (lock_excludes.check, lock_structured.check):
        v = check(history(renamed))
        assert v.status == "unknown" and "has no record of the contender's invocation" in v.summary, v
