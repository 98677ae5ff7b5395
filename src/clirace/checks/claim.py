"""Claim: N parallel claims on a queue of N items: no item claimed twice, none lost. A claim whose outcome is
unknown may have taken an item without saying so: as many items as such claims may be unaccounted for."""
from __future__ import annotations

from collections import defaultdict

from clirace.checks import reference
from clirace.checks._common import (
    finding,
    ok_count,
    parallel_rounds,
    unknown_count,
    verdict_over_rounds,
)
from clirace.checks._read import claimed_item, remaining
from clirace.checks.findings import Finding, Verdict
from clirace.checks.lockerror import succeeded
from clirace.errors import Undecided
from clirace.history import ClaimRound, History

ID = "claim"


def judge_one(trial: ClaimRound) -> list[Finding]:
    failed_adds = [inv for inv in trial.labelled("add-") if not inv.ok]
    if failed_adds:
        inv = failed_adds[0]
        raise Undecided(f"adding a queue item failed: {inv.command()!r} ({inv.ending()}; {inv.printed()})",
                        "Check the claim workload's add command: run alone, it must succeed.")
    by_item = defaultdict(list)
    for inv in trial.labelled("claim-"):
        if succeeded(inv):
            item = claimed_item(inv.stdout, trial.pattern)
            if item is not None:
                by_item[item].append(inv.label)
    out = [finding("CR121", trial, labels, "each item claimed once", f"claimed {len(labels)} times",
                   item=item, count=len(labels), labels=", ".join(labels))
           for item, labels in by_item.items() if len(labels) > 1]
    left = remaining(trial)
    claims = trial.labelled("claim-")
    if left is not None or all(succeeded(inv) for inv in claims):
        lost = [item for item in trial.items if item not in by_item and item not in (left or [])]
        if len(lost) > unknown_count(trial, "claim-"):
            out.append(finding("CR122", trial, [], "every item claimed or still queued",
                               f"{len(lost)} missing", count=len(lost), items=", ".join(lost)))
    return out


def check(history: History) -> Verdict:
    return verdict_over_rounds(ID, parallel_rounds(history, ClaimRound), judge_one, lambda ts: (
        f"{sum(ok_count(t, 'claim-') for t in ts)} successful claims over {len(ts)} rounds: no double claim, no lost item"),
        tally=_tally, prefix="claim-", undecided=reference.undecided_kind(history, ClaimRound),
        ran_again=reference.ran_again(history, ClaimRound))


def _tally(findings: list[Finding]) -> str:
    """Totals over the failed rounds (see keys._tally)."""
    doubled = sum(1 for f in findings if f.code == "CR121")
    lost = sum(f.args["count"] for f in findings if f.code == "CR122")
    parts = [f"{doubled} item(s) claimed more than once"] if doubled else []
    parts += [f"{lost} item(s) neither claimed nor left in the queue"] if lost else []
    return "; ".join(parts) or findings[0].message()
