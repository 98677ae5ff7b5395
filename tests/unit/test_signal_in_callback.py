"""A Ctrl-C or SIGTERM that Python acts on inside a callback it cannot raise from (a weakref's, run by garbage
collection) printed "Exception ignored in ... Traceback ... Terminated" on stderr (sys.unraisablehook): seen once
in a CI run of tests/e2e/test_signal_steps.py. The signal is noted all the same; nothing of it is reported."""
import gc
import signal
import sys
import weakref

import pytest

from clirace.cli._checking import Signals


class _Thing:
    pass


@pytest.fixture
def reported(monkeypatch):
    """What reaches the unraisable hook in place when clirace's handlers are installed (Python's prints it)."""
    seen = []
    monkeypatch.setattr(sys, "unraisablehook", lambda unraisable: seen.append(type(unraisable.exc_value)))
    return seen


def collected(callback):
    thing = _Thing()
    ref = weakref.ref(thing, callback)
    del thing
    gc.collect()
    assert ref() is None


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_acted_on_inside_a_weakref_callback_is_noted_and_not_reported(sig, reported):
    with Signals() as signals:
        collected(lambda _ref: signal.raise_signal(sig))  # its handler runs inside this callback
    assert signals.received == sig
    assert reported == []


def test_another_exception_a_callback_cannot_raise_is_still_reported(reported):
    with Signals():
        collected(lambda _ref: 1 / 0)
    assert reported == [ZeroDivisionError]
