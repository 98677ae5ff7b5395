"""A descriptor closed just before a Ctrl-C or SIGTERM is acted on is never closed again: by then its number may be
another's (a thread opened a pipe and was given it), and a second close would close that one under its owner.

Each test has a real SIGTERM (handled as clirace's handler does: Terminated) land just after the close, where Python
most often acts on a signal, and the number just freed given at once to another descriptor, as another thread's
open would be; that descriptor must still be open once the interrupt has gone by. (The same windows in real runs:
tests/e2e/test_interrupt_after_close.py.)"""
from __future__ import annotations

import os
import signal
import sys
from collections.abc import Iterator

import pytest

from clirace import errors
from clirace.run import safefs
from clirace.scenarios.lock import Stdin

pytestmark = pytest.mark.timeout(10)


class _AfterClose:
    """os.close, with SIGTERM raised just after the first close that `where` (a function's qualified name) makes;
    the number then goes to `victim`, an fd on /dev/null."""

    def __init__(self, where: str) -> None:
        self.where = where
        self.victim: int | None = None
        self._close = os.close

    def __call__(self, fd: int) -> None:
        caller = sys._getframe(1).f_code.co_qualname
        self._close(fd)
        if caller == self.where and self.victim is None:
            null = os.open(os.devnull, os.O_RDONLY)  # given the number just freed, if it is the lowest free one
            if null != fd:
                os.dup2(null, fd)
                self._close(null)
            self.victim = fd  # the number just freed, now someone else's
            signal.raise_signal(signal.SIGTERM)

    def victim_still_open(self) -> bool:
        assert self.victim is not None, f"{self.where} closed nothing"
        try:
            return os.path.samestat(os.fstat(self.victim), os.stat(os.devnull))
        except OSError:
            return False


@pytest.fixture
def after_close(monkeypatch) -> Iterator[_AfterClose]:
    def terminate(signum, frame):
        raise errors.Terminated()

    before = signal.signal(signal.SIGTERM, terminate)
    wrapper = _AfterClose("")
    monkeypatch.setattr(os, "close", wrapper)
    try:
        yield wrapper
    finally:
        monkeypatch.undo()
        signal.signal(signal.SIGTERM, before)
        if wrapper.victim is not None and wrapper.victim_still_open():
            os.close(wrapper.victim)


def test_a_walk_interrupted_after_closing_a_folder_on_its_way_closes_nothing_more(after_close, tmp_path):
    after_close.where = "_parent"
    with pytest.raises(errors.Terminated):
        safefs.mkdirs(tmp_path, "a/b")  # (the walk from tmp_path to a, closing tmp_path's fd)
    assert after_close.victim_still_open(), "the walk's clean-up closed a descriptor that was no longer its own"


def test_a_contenders_stdin_ended_twice_across_an_interrupt_closes_its_pipe_once(after_close):
    stdin = Stdin()
    stdin.started()
    after_close.where = "Stdin.end"
    with pytest.raises(errors.Terminated):
        stdin.end()  # as a contender that read its stdin without a word is given the end of input
    stdin.end()  # as _contend's `finally` then ends it on the way out
    assert after_close.victim_still_open(), "the second end closed a descriptor that was no longer the pipe's"
