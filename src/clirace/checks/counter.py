"""Counter: after N parallel increments the counter equals start + the number of runs that exited 0."""
from ._common import finding, ok_count, verdict_over_rounds

ID = "counter"


def judge_one(trial):
    start, final = trial.facts["start"], trial.facts["final"]
    ok = ok_count(trial, "inc-")
    expected = start + ok
    labels = [i.label for i in trial.labelled("inc-")]
    found = f"counter {final}"
    if final < expected:
        return [finding("CR101", trial, labels, f"counter {expected}", found, lost=expected - final, ok=ok,
                        start=start, final=final, target=expected)]
    if final > expected:
        return [finding("CR102", trial, labels, f"counter {expected}", found, ok=ok, start=start, final=final,
                        target=expected)]
    return []


def check(history):
    trials = history.of("counter")
    return verdict_over_rounds(ID, trials, judge_one, lambda ts: (
        f"{sum(ok_count(t, 'inc-') for t in ts)} successful increments over {len(ts)} rounds, none lost"), tally=_tally, prefix="inc-")


def _tally(findings):
    lost = [f for f in findings if f.code == "CR101"]
    if not lost:
        return findings[0].message()
    return (f"lost {sum(f.args['lost'] for f in lost)} of {sum(f.args['ok'] for f in lost)} increments "
            f"that exited 0")
