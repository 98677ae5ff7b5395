"""Builders for literal histories: the smallest records a check needs, written out in the test."""
from __future__ import annotations

from clirace.checks.catalogue import template_fields
from clirace.history import Environment, Event, History, Invocation, RunOptions, Trial
from clirace.history.vocab import EventKind


def inv(label, exit_code=0, stdout="", stderr="", started=0.0, ended=0.05, timed_out=False, signal=None):
    return Invocation(label=label, argv=("tool", label), exit_code=exit_code, stdout=stdout, stderr=stderr,
                      started=started, ended=ended, timed_out=timed_out, signal=signal)


def event(kind: EventKind, at: float, label: str = "holder", detail: str = "") -> Event:
    return Event(at, kind, label, detail)


def saveable(h: History) -> History:
    """`h` with a plan, as every saved history has (History.from_json refuses one without): an empty one, which
    asks for nothing, so that the records alone are judged as in memory."""
    if h.plan is None:
        h.plan = ()
    return h


def history(*trials: Trial, strace: bool = True, only: tuple[str, ...] = ()) -> History:
    return History(spec_path="tool.yaml", options=RunOptions(seed=1, only=only),
                   environment=Environment(strace=strace, strace_note="" if strace else "strace is not installed"),
                   trials=list(trials))


def filled(code: str) -> dict[str, str]:
    """Arguments for every field the code's message template formats (a finding is checked when it is made)."""
    return {name: "x" for name in template_fields(code)}
