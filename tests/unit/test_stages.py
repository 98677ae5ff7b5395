"""The run's order: the lock experiments run side by side, and their records keep a fixed order."""
import threading
from pathlib import Path

import pytest

from clirace.cli.pipeline import _stages
from clirace.scenarios import SCENARIOS, Context


def test_the_waiting_lock_experiments_form_one_stage():
    assert _stages(set(SCENARIOS)) == [("reference",), ("workloads",), ("lock-conflict", "lock-release", "lock-wait"),
                                       ("session",), ("atomic-config",)]
    assert _stages({"reference", "lock-wait"}) == [("reference",), ("lock-wait",)]


@pytest.mark.timeout(10)
def test_side_by_side_records_join_in_the_order_given_not_the_order_they_ended():
    ctx = Context(spec=None, seed=1, workdir=Path("/nonexistent"), rounds=1, parallel=1)  # type: ignore[arg-type]
    second_done = threading.Event()

    def first(c: Context) -> None:
        assert second_done.wait(5)  # ends last
        c.not_run("first", "ran first in the list")

    def second(c: Context) -> None:
        c.not_run("second", "ended first")
        second_done.set()

    ctx.side_by_side(first, second)
    assert [t.name for t in ctx.trials] == ["first", "second"]


@pytest.mark.timeout(20)
def test_an_interrupt_waits_for_every_experiment_beside_it_to_end_before_it_is_raised():
    """Ctrl-C reaches the waiting thread; the experiments beside it stop at their next step. The run's cleanup
    (after side_by_side raises) must not begin while one still ends its trial: a Thread.join that the interrupt
    cut short marked a thread ended while it still ran (CPython 3.11), and that cleanup found a sandbox not
    empty (test_signal_steps in CI)."""
    import os
    import signal
    import time

    ctx = Context(spec=None, seed=1, workdir=Path("/nonexistent"), rounds=1, parallel=1)  # type: ignore[arg-type]
    running, ended = threading.Event(), threading.Event()

    def slow_to_stop(c: Context) -> None:
        running.set()
        assert c.halt.wait(10), "never told to stop"
        time.sleep(0.5)  # the rest of its trial: its record, its sandbox's removal
        ended.set()

    def interrupter(c: Context) -> None:
        assert running.wait(10)
        time.sleep(0.2)  # the caller's thread is then waiting for both
        os.kill(os.getpid(), signal.SIGINT)

    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            ctx.side_by_side(slow_to_stop, interrupter)
    finally:
        signal.signal(signal.SIGINT, previous)
    assert ended.is_set(), "side_by_side raised while an experiment beside it was still ending its trial"


@pytest.mark.timeout(30)
def test_a_sigterm_while_the_experiments_start_waits_until_all_have_started(monkeypatch):
    """A SIGTERM that arrived while side_by_side started its threads was raised inside Thread.start(): before the
    thread ran (its experiment never began, and the stop waited HALT_GIVE_UP for it), or inside start()'s own
    Condition (CPython 3.11: "RuntimeError: release unlocked lock", and the check wrote no partial result). Both
    were seen in test_signal_steps at the step where the lock experiments start. Here the SIGTERM comes during the
    second start: it must be raised once all three run, as Terminated, each experiment told to stop and ended."""
    import os
    import signal

    from clirace.errors import Terminated

    ctx = Context(spec=None, seed=1, workdir=Path("/nonexistent"), rounds=1, parallel=1)  # type: ignore[arg-type]
    ended: list[str] = []
    real_start = threading.Thread.start
    starts: list[threading.Thread] = []

    def start(thread: threading.Thread) -> None:
        real_start(thread)
        starts.append(thread)
        if len(starts) == 2:
            os.kill(os.getpid(), signal.SIGTERM)  # its handler runs in this (the main) thread, at once

    def experiment(name: str):
        def run(c: Context) -> None:
            assert c.halt.wait(10), "never told to stop"
            ended.append(name)
        return run

    def terminate(_signum, _frame):
        raise Terminated()

    monkeypatch.setattr(threading.Thread, "start", start)
    previous = signal.signal(signal.SIGTERM, terminate)
    try:
        with pytest.raises(Terminated):
            ctx.side_by_side(experiment("first"), experiment("second"), experiment("third"))
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert sorted(ended) == ["first", "second", "third"]
