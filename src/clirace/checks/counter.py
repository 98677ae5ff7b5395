"""Counter: after N parallel increments the counter is start + the increments that exited 0, plus at most
those whose outcome is unknown (killed at their deadline: they may or may not have counted)."""
from __future__ import annotations

from clirace.checks import reference
from clirace.checks._common import (
    finding,
    ok_count,
    parallel_rounds,
    unknown_count,
    verdict_over_rounds,
)
from clirace.checks._read import read_counter
from clirace.checks.findings import Finding, Verdict
from clirace.history import CounterRound, History

ID = "counter"


def judge_one(trial: CounterRound) -> list[Finding]:
    start = trial.start if trial.start is not None else read_counter(trial, "read-before")
    final = read_counter(trial, "read-after")
    ok, unknown = ok_count(trial, "inc-"), unknown_count(trial, "inc-")
    low, high = start + ok, start + ok + unknown
    labels = [i.label for i in trial.labelled("inc-")]
    found = f"counter {final}"
    expected = f"counter {low}" if low == high else f"counter between {low} and {high}"
    if final < low:
        return [finding("CR101", trial, labels, expected, found, lost=low - final, ok=ok,
                        start=start, final=final, target=low)]
    if final > high:
        return [finding("CR102", trial, labels, expected, found, ok=ok, start=start, final=final,
                        target=high)]
    return []


def check(history: History) -> Verdict:
    return verdict_over_rounds(ID, parallel_rounds(history, CounterRound), judge_one, lambda ts: (
        f"{sum(ok_count(t, 'inc-') for t in ts)} successful increments over {len(ts)} rounds, none lost"),
        tally=_tally, prefix="inc-", undecided=reference.undecided_kind(history, CounterRound),
        ran_again=reference.ran_again(history, CounterRound))


def _tally(findings: list[Finding]) -> str:
    lost = [f for f in findings if f.code == "CR101"]
    if not lost:
        return findings[0].message()
    return (f"lost {sum(f.args['lost'] for f in lost)} of {sum(f.args['ok'] for f in lost)} increments "
            f"that exited 0")
