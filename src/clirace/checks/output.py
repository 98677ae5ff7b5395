"""Output: each parallel run produces what its own input produced when the tool ran alone, never another
run's result. The expected result comes from the serial reference runs (checks/reference.py), with what
varies between two runs of the same input masked; without them, an output must hold its own input's text."""
from __future__ import annotations

from clirace.checks import reference
from clirace.checks._common import (
    finding,
    ok_count,
    one_line,
    parallel_rounds,
    verdict_over_rounds,
)
from clirace.checks.findings import Finding, Verdict
from clirace.checks.lockerror import succeeded
from clirace.errors import Undecided
from clirace.history import History, OutputRound, OutputRun, Trial

ID = "output"


def output_findings(trial: Trial, runs: dict[str, OutputRun],
                    expected: dict[str, reference.Template] | None = None) -> list[Finding]:
    """Findings for runs whose invocation exited 0 (an unknown outcome may have written anything or nothing).

    With `expected` (label -> template from the serial runs), an output must match its own template; one
    that matches another run's is that run's result. Without, it must hold its own input's text, and when no
    output holds any input's text at all the command transforms its input: Undecided, not clobbering.
    """
    succeeded_runs = [(label, run) for label, run in runs.items()
                      if (inv := trial.invocation(label)) is not None and succeeded(inv)]
    out = []
    for label, run in succeeded_runs:
        if not run.produced:
            out.append(finding("CR132", trial, [label], "its own result", "nothing", label=label, path=run.output))
    produced = [(label, run) for label, run in succeeded_runs if run.produced]
    if expected is not None:
        for label, run in produced:
            text = reference.normalised(trial, run.produced or "")
            mine = expected.get(label)
            if mine is None or mine.matches(text):
                continue
            others = [other for other, mask in expected.items() if other != label and mask.matches(text)]
            what = f"{others[0]}'s result" if others else "neither its own input's result nor any other run's"
            out.append(finding("CR131", trial, [label, *others[:1]], one_line(mine.masked(), 120), text[:120],
                               label=label, found=what))
        return out
    markers = {run.marker: label for label, run in runs.items()}
    if produced and not any(marker in (run.produced or "") for _, run in produced for marker in markers):
        label, run = produced[0]
        raise Undecided(f"no output holds any input's text, so whose result each is cannot be told (e.g. {label} "
                        f"wrote {one_line(run.produced, 60)!r} for an input holding {run.marker!r})",
                        "Without reference runs, the output workload needs a command whose {output} contains its "
                        "{input}'s text as it is.")
    for label, run in produced:
        if run.marker not in (run.produced or ""):
            others = [other for marker, other in markers.items() if marker in (run.produced or "") and other != label]
            what = f"{others[0]}'s result" if others else "no input's content at all"
            out.append(finding("CR131", trial, [label, *others[:1]], run.marker, (run.produced or "")[:120],
                               label=label, found=what))
    return out


def check(history: History) -> Verdict:
    rounds = parallel_rounds(history, OutputRound)
    expected = {name: reference.templates(history, name) for name in dict.fromkeys(t.workload for t in rounds)}
    return verdict_over_rounds(ID, rounds, lambda t: output_findings(t, t.runs, expected.get(t.workload)), lambda ts: (
        f"all {sum(ok_count(t, 'out-') for t in ts)} successful runs over {len(ts)} rounds produced what their input "
        "produced alone"), tally=_tally, prefix="out-", undecided=reference.undecided_kind(history, OutputRound),
        ran_again=reference.ran_again(history, OutputRound))


def _tally(findings: list[Finding]) -> str:
    """Totals over the failed rounds (see keys._tally)."""
    wrong = sum(1 for f in findings if f.code == "CR131")
    missing = sum(1 for f in findings if f.code == "CR132")
    parts = [f"{wrong} successful run(s) ended with another run's output or none of its own input"] if wrong else []
    parts += [f"{missing} successful run(s) left no output"] if missing else []
    return "; ".join(parts) or findings[0].message()
