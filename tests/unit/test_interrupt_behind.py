"""A Ctrl-C or SIGTERM whose clean-up fails on the way out (EBADF from a descriptor closed twice) must still stop the
run: a fresh-clone CI run saw a SIGTERM during "atomic config: sampling the config" turn into "clirace failed while
running this experiment (OSError: [Errno 9] Bad file descriptor)", and the run went on to its end."""
from __future__ import annotations

import os

import pytest

from clirace import errors
from clirace.cli import pipeline
from clirace.history import NotRun


def _stopped_then_cleanup_fails(stop: BaseException) -> None:
    fd = os.open(os.devnull, os.O_RDONLY)
    os.close(fd)
    try:
        raise stop
    finally:
        os.close(fd)  # closed already: OSError EBADF, raised while the stop is handled


@pytest.mark.parametrize("stop", [KeyboardInterrupt(), errors.Terminated()], ids=["ctrl-c", "sigterm"])
def test_the_interrupt_behind_a_failed_clean_up_is_found(stop):
    with pytest.raises(OSError) as raised:
        _stopped_then_cleanup_fails(stop)
    assert errors.interrupt_behind(raised.value) is stop


def test_a_plain_failure_has_no_interrupt_behind_it():
    try:
        try:
            raise ValueError("the experiment's own")
        finally:
            os.close(-1)
    except OSError as exc:
        assert errors.interrupt_behind(exc) is None


class _Context:
    def __init__(self) -> None:
        self.trials: list = []


@pytest.mark.parametrize("stop", [KeyboardInterrupt(), errors.Terminated()], ids=["ctrl-c", "sigterm"])
def test_an_experiment_whose_clean_up_fails_after_an_interrupt_stops_the_run(stop, monkeypatch):
    monkeypatch.setitem(pipeline.SCENARIOS, "session", lambda ctx: _stopped_then_cleanup_fails(stop))
    ctx = _Context()
    with pytest.raises(type(stop)):
        pipeline._guarded("session")(ctx)
    assert not [t for t in ctx.trials if isinstance(t, NotRun)], ctx.trials  # no "bug in clirace" record


def test_an_experiments_own_failure_is_still_recorded_and_the_run_goes_on(monkeypatch):
    def fails(ctx):
        raise OSError(9, "Bad file descriptor")
    monkeypatch.setitem(pipeline.SCENARIOS, "session", fails)
    ctx = _Context()
    pipeline._guarded("session")(ctx)
    (record,) = ctx.trials
    assert isinstance(record, NotRun) and "OSError" in record.error


@pytest.mark.parametrize("stop", [KeyboardInterrupt(), errors.Terminated()], ids=["ctrl-c", "sigterm"])
def test_a_run_whose_stop_comes_out_as_another_exception_stops_as_that_interrupt(stop, monkeypatch):
    """Outside any experiment's guard (side_by_side waiting for its threads, the run's own clean-up), an interrupt
    that comes out as an Exception of its own must still reach check_each as the interrupt, which writes the
    partial result; the history says what stopped it. (Seen: "RuntimeError: release unlocked lock" with the
    Terminated behind it, stdout empty, in test_signal_steps.)"""
    from clirace.history import RunOptions
    from clirace.spec import load_spec

    from ..conftest import FIXTURES

    monkeypatch.setattr(pipeline, "_launch", lambda *args: _stopped_then_cleanup_fails(stop))
    seen = []
    with pytest.raises(type(stop)):
        pipeline.run(load_spec(FIXTURES / "level3" / "clirace.yaml"), RunOptions(seed=1), on_history=seen.append)
    assert seen[0].stopped.startswith(("interrupted (Ctrl-C)", "terminated (SIGTERM)")), seen[0].stopped
