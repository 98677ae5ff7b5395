"""Keys: every distinct key written by a run that exited 0 is readable afterwards, holding its value. A key
whose writer's outcome is unknown may be present or absent, but if present it holds its own value."""
from __future__ import annotations

from ..findings import Finding, Verdict
from ..history import History, KeysRound
from ..lockerror import succeeded
from ..vocab import Outcome
from . import reference
from ._common import Undecided, finding, ok_count, parallel_rounds, verdict_over_rounds
from ._read import found_values, unread

ID = "keys"


def judge_one(trial: KeysRound) -> list[Finding]:
    found, unparseable = found_values(trial)
    if unparseable:
        return [unparseable]
    written, maybe = [], []
    for label, (key, value) in trial.keys.items():
        inv = trial.invocation(label)
        if inv is not None and succeeded(inv):
            written.append((label, key, value))
        elif inv is not None and inv.outcome is Outcome.UNKNOWN:
            maybe.append((label, key, value))
    unknown = unread(trial)  # read back without an answer: neither present nor lost
    lost = [(label, key) for label, key, value in written if found.get(key) is None and key not in unknown]
    out = []
    if lost:
        out.append(finding("CR111", trial, [label for label, _ in lost], f"{len(written)} keys present",
                           f"{len(written) - len(lost)} present", lost=len(lost), ok=len(written),
                           keys=", ".join(key for _, key in lost)))
    values = [v for _, v in trial.keys.values()]
    for label, key, value in written + maybe:
        # Contained, not equal: a spec may write the value wrapped (npm: "https://{value}.example/"). But only
        # its own value: one that also holds another run's (two writes run together) is not this writer's.
        held = found.get(key)
        if held is not None and (value not in held or any(v != value and v in held for v in values)):
            out.append(finding("CR112", trial, [label], value, held, key=key, found=held, wanted=value))
    if unknown and not out:
        key, why = next(iter(unknown.items()))
        raise Undecided(f"{len(unknown)} key(s) could not be read back, so whether they are there is unknown "
                        f"(e.g. {key}: {why})", "Check the keys workload's read command: run alone, it must answer.")
    return out


def check(history: History) -> Verdict:
    return verdict_over_rounds(ID, parallel_rounds(history, KeysRound), judge_one, lambda ts: (
        f"all {sum(ok_count(t, 'set-') for t in ts)} keys written by successful runs over {len(ts)} rounds were present"),
        tally=_tally, prefix="set-", undecided=reference.undecided_kind(history, KeysRound))


def _tally(findings: list[Finding]) -> str:
    """Totals over the failed rounds, so that "in 3 of 3 rounds" does not read as the first round's figure."""
    lost = [f for f in findings if f.code == "CR111"]
    stale = sum(1 for f in findings if f.code == "CR112")
    parts = [f"lost {sum(f.args['lost'] for f in lost)} of {sum(f.args['ok'] for f in lost)} keys written by "
             f"invocations that exited 0"] if lost else []
    parts += [f"{stale} key(s) holding another value than their writer's"] if stale else []
    return "; ".join(parts) or findings[0].message()
