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
