"""Output: each parallel run's output holds its own input's content, never another run's."""
from __future__ import annotations

from ..findings import Finding, Verdict
from ..history import History, OutputRound, OutputRun, Trial
from ..lockerror import succeeded
from ._common import Undecided, finding, ok_count, one_line, verdict_over_rounds

ID = "output"


def output_findings(trial: Trial, runs: dict[str, OutputRun]) -> list[Finding]:
    """Findings for runs whose invocation exited 0.

    Raises Undecided when no output holds any input's text: the command transforms its input (compresses,
    encodes), so whose result each output is cannot be told, which is not evidence of clobbering.
    """
    markers = {run.marker: label for label, run in runs.items()}
    succeeded_runs = [(label, run) for label, run in runs.items()
                      if (inv := trial.invocation(label)) is not None and succeeded(inv)]
    outputs = [(label, run.produced) for label, run in succeeded_runs if run.produced]
    if outputs and not any(marker in text for _, text in outputs for marker in markers):
        label, text = outputs[0]
        raise Undecided(f"no output holds any input's text, so whose result each is cannot be told (e.g. {label} "
                        f"wrote {one_line(text, 60)!r} for an input holding {runs[label].marker!r})",
                        "The output workload needs a command whose {output} contains its {input}'s text as it is.")
    out = []
    for label, run in succeeded_runs:
        produced = run.produced
        if not produced:
            out.append(finding("CR132", trial, [label], "its own result", "nothing", label=label, path=run.output))
        elif run.marker not in produced:
            others = [other for marker, other in markers.items() if marker in produced and other != label]
            what = f"{others[0]}'s result" if others else "no input's content at all"
            out.append(finding("CR131", trial, [label, *others[:1]], run.marker, produced[:120],
                               label=label, found=what))
    return out


def judge_one(trial: OutputRound) -> list[Finding]:
    return output_findings(trial, trial.runs)


def check(history: History) -> Verdict:
    return verdict_over_rounds(ID, history.of(OutputRound), judge_one, lambda ts: (
        f"all {sum(ok_count(t, 'out-') for t in ts)} successful runs over {len(ts)} rounds produced their own output"),
        tally=_tally, prefix="out-")


def _tally(findings: list[Finding]) -> str:
    """Totals over the failed rounds (see keys._tally)."""
    wrong = sum(1 for f in findings if f.code == "CR131")
    missing = sum(1 for f in findings if f.code == "CR132")
    parts = [f"{wrong} successful run(s) ended with another run's output or none of its own input"] if wrong else []
    parts += [f"{missing} successful run(s) left no output"] if missing else []
    return "; ".join(parts) or findings[0].message()
