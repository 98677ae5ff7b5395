"""Builders for literal histories: the smallest records a check needs, written out in the test."""
from __future__ import annotations

from clirace.history import History, Invocation, Trial


def inv(label, exit_code=0, stdout="", stderr="", started=0.0, ended=0.05, timed_out=False, signal=None):
    return Invocation(label=label, argv=["tool", label], exit_code=exit_code, stdout=stdout, stderr=stderr,
                      started=started, ended=ended, timed_out=timed_out, signal=signal)


def history(*trials, spec=None, strace=True) -> History:
    return History(spec_path="tool.yaml", seed=1, trials=list(trials), spec=spec or {},
                   environment={"strace": strace, "strace_note": "" if strace else "strace is not installed"})


def trial(scenario, name="t", round_=0, invocations=(), **facts) -> Trial:
    return Trial(scenario, name, round_, list(invocations), dict(facts))
