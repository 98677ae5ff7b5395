"""Claim: N parallel claims on a queue of N items: no item claimed twice, none lost."""
import re
from collections import defaultdict

from ..lockerror import succeeded
from ._common import finding, ok_count, verdict_over_rounds

ID = "claim"


def claimed_item(stdout: str, pattern: str | None) -> str | None:
    if not pattern:
        return stdout.strip() or None
    match = re.search(pattern, stdout, re.MULTILINE)
    if not match:
        return None
    return match.group(1) if match.groups() else match.group(0)


def judge_one(trial):
    items = trial.facts["items"]
    by_item = defaultdict(list)
    for inv in trial.labelled("claim-"):
        if succeeded(inv):
            item = claimed_item(inv.stdout, trial.facts.get("pattern"))
            if item is not None:
                by_item[item].append(inv.label)
    out = [finding("CR121", trial, labels, "each item claimed once", f"claimed {len(labels)} times",
                   item=item, count=len(labels), labels=", ".join(labels))
           for item, labels in by_item.items() if len(labels) > 1]
    remaining = trial.facts.get("remaining")
    if remaining is not None or all(succeeded(inv) for inv in trial.labelled("claim-")):
        lost = [item for item in items if item not in by_item and item not in (remaining or [])]
        if lost:
            out.append(finding("CR122", trial, [], "every item claimed or still queued",
                               f"{len(lost)} missing", count=len(lost), items=", ".join(lost)))
    return out


def check(history):
    return verdict_over_rounds(ID, history.of("claim"), judge_one, lambda ts: (
        f"{sum(ok_count(t, 'claim-') for t in ts)} successful claims over {len(ts)} rounds: no double claim, no lost item"),
        tally=_tally, prefix="claim-")


def _tally(findings):
    """Totals over the failed rounds (see keys._tally)."""
    doubled = sum(1 for f in findings if f.code == "CR121")
    lost = sum(f.args["count"] for f in findings if f.code == "CR122")
    parts = [f"{doubled} item(s) claimed more than once"] if doubled else []
    parts += [f"{lost} item(s) neither claimed nor left in the queue"] if lost else []
    return "; ".join(parts) or findings[0].message()
