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
