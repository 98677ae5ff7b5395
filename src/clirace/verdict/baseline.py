"""A run compared with a baseline: `clirace check SPEC --baseline OLD` and `clirace diff OLD NEW`.

Regression-testing a concurrency fix means: the run that found the bug, the run after the fix, and for each
finding code and each criterion whether it is fixed, new, still there, or undecided now, with the detection
bound that makes "fixed" believable ("failed 3 of 3 rounds before; 0 of 44 now: a race showing in 10% of rounds
or more would have shown with probability >= 99%"). OLD and NEW are saved JSON results (`--format json`) or
histories (`--history`, judged again here). Only the JSON result's documented fields are read.

A regression (a new finding that is not advisory, a lower score, a criterion that went from pass to fail)
fails the gate (verdict/gate.py).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clirace.checks._common import CONFIDENCE, detection_bound
from clirace.checks.catalogue import rules
from clirace.errors import UsageError

FIXED, NEW, STILL, UNDECIDED = "fixed", "new", "still", "undecided"
MAX_ROUNDS = 1000  # what --confidence/--rate may ask for; beyond it a run takes hours


def rounds_for(confidence: float, rate: float) -> int:
    """The rounds after which a race showing in `rate` of rounds would have shown at least once with probability
    >= `confidence`: 1 - (1 - rate)**n >= confidence, n = ceil(ln(1 - confidence) / ln(1 - rate))."""
    if not 0 < confidence < 1 or not 0 < rate < 1:
        raise UsageError(f"--confidence {confidence:g} --rate {rate:g}: both must be between 0 and 1 exclusive.",
                         hint="e.g. --confidence 0.99 --rate 0.1 (44 rounds).")
    # less 1e-9: a quotient that is a whole number (0.75 at 0.5: 2) must not gain a round from rounding error
    n = math.ceil(math.log1p(-confidence) / math.log1p(-rate) - 1e-9)
    if n > MAX_ROUNDS:
        raise UsageError(f"--confidence {confidence:g} --rate {rate:g} needs {n} rounds per workload, more than "
                         f"{MAX_ROUNDS}.", hint="Ask for a larger --rate or a smaller --confidence.")
    return max(n, 1)


@dataclass(frozen=True)
class Snapshot:
    """What a comparison reads of one run."""
    source: str  # the file it came from, or "this run"
    spec: str
    score: int
    criteria: dict[str, str]  # id -> pass, fail, not tested, undecided
    checks: dict[str, dict[str, Any]]  # check id -> its JSON (status, summary, rates, findings)
    confidence: float = CONFIDENCE
    rate: float | None = None

    def codes(self) -> dict[str, tuple[str, str, str]]:
        """code -> (rule name, severity, check id), for every finding of the run."""
        out: dict[str, tuple[str, str, str]] = {}
        for check_id, check in self.checks.items():
            for f in check.get("findings") or ():
                out.setdefault(f["code"], (f.get("name", ""), f.get("severity", ""), check_id))
        return out


def snapshot(data: dict[str, Any], source: str) -> Snapshot:
    """A JSON result (as_dict) read into a Snapshot; UsageError naming `source` when it is not one."""
    try:
        criteria = {c["id"]: ("undecided" if c.get("indeterminate") else c["status"].replace("_", " "))
                    for c in data["criteria"]}
        options = data.get("options") or {}
        return Snapshot(source, str(data.get("spec", "")), int(data["score"]), criteria, dict(data["checks"]),
                        float(options.get("confidence") or CONFIDENCE), options.get("rate"))
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise UsageError(f"{source}: not a clirace JSON result ({type(exc).__name__}: {exc}).",
                         hint="Give a file written by `clirace check --format json -o FILE` or `--history FILE`.") from None


@dataclass(frozen=True)
class Change:
    subject: str  # a finding code, a criterion id, or "score"
    name: str  # the rule's name; "criterion"; "score"
    status: str  # FIXED, NEW, STILL, UNDECIDED
    detail: str
    regression: bool = False

    def said(self) -> str:
        """`score 1 -> 0`, `CR111 lost-key: not seen before`, `lock-excludes criterion: pass -> fail`."""
        return f"{self.subject} {self.detail}" if self.name == "score" else f"{self.subject} {self.name}: {self.detail}"


@dataclass
class Comparison:
    old: Snapshot
    new: Snapshot
    changes: list[Change] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def regressions(self) -> list[str]:
        return [c.said() for c in self.changes if c.regression]

    def findings(self) -> list[Change]:
        return [c for c in self.changes if c.name not in ("criterion", "score")]

    def criteria(self) -> list[Change]:
        return [c for c in self.changes if c.name == "criterion"]

    def to_dict(self) -> dict[str, Any]:
        return {"baseline": self.old.source, "score_before": self.old.score, "score_now": self.new.score,
                "confidence": self.new.confidence, "regression": bool(self.regressions()),
                "findings": [_change_dict(c) for c in self.findings()],
                "criteria": [_change_dict(c) for c in self.criteria()], "notes": self.notes}


def _change_dict(c: Change) -> dict[str, Any]:
    return {"id": c.subject, "name": c.name, "status": c.status, "detail": c.detail, "regression": c.regression}


def percent(x: float) -> str:
    return f"{x:.0%}" if x >= 0.1 else f"{x:.1%}" if x >= 0.01 else f"{x:.2%}"


def _rounds(check: dict[str, Any] | None) -> tuple[int, int] | None:
    rates = (check or {}).get("rates") or {}
    if "rounds" not in rates:
        return None
    return int(rates["rounds"]), int(rates.get("failed_rounds", 0))


def _racing(check: dict[str, Any] | None) -> int | None:
    """The rounds of a check that could race (results from before racing_rounds: all its rounds)."""
    rates = (check or {}).get("rates") or {}
    return int(rates.get("racing_rounds", rates["rounds"])) if "rounds" in rates else None


def _fixed_detail(old: Snapshot, new: Snapshot, code: str, check_id: str) -> tuple[str, str]:
    """(status, detail) of a finding code seen before and not now: fixed only when the check looked for it in
    rounds that raced."""
    now = new.checks.get(check_id) or {}
    status = now.get("status", "")
    if status not in ("pass", "fail"):
        return UNDECIDED, f"not seen now, but {check_id} did not decide: {now.get('summary') or 'it did not run'}"
    if code in (now.get("not_examined") or {}):
        return UNDECIDED, f"not seen now, but {check_id} did not examine it: {now['not_examined'][code]}"
    before, after = _rounds(old.checks.get(check_id)), _rounds(now)
    # "still" only when it failed before too: a check that went from pass to fail is a regression elsewhere
    fails = "still fails" if (old.checks.get(check_id) or {}).get("status") == "fail" else "now fails"
    if after is None:
        return FIXED, f"seen before; not now ({check_id} {'passed' if status == 'pass' else fails})"
    rounds, racing = after[0], _racing(now) or 0
    said = f"failed {before[1]} of {before[0]} rounds before; " if before else ""
    said += f"0 of {rounds} now" + (f", {racing} of which raced" if racing != rounds else "")
    if status == "fail":
        return FIXED, said + f" ({check_id} {fails} with other findings)"
    bound = detection_bound(racing, 0, new.confidence) if racing else None
    if bound is None:
        return UNDECIDED, said + ": no round that raced was judged"
    return FIXED, said + (f": a race showing in {percent(bound)} of rounds or more would have shown with "
                          f"probability >= {percent(new.confidence)}")


def compare(old: Snapshot, new: Snapshot) -> Comparison:
    out = Comparison(old, new)
    old_codes, new_codes = old.codes(), new.codes()
    for code in sorted(old_codes.keys() | new_codes.keys()):
        name, severity, check_id = new_codes.get(code) or old_codes[code]
        advisory = severity in ("advisory", "info")
        if code in old_codes and code in new_codes:
            before, now = _rounds(old.checks.get(check_id)), _rounds(new.checks.get(check_id))
            said = (f"failed {before[1]} of {before[0]} rounds before; {now[1]} of {now[0]} now" if before and now
                    else "seen before and now")
            out.changes.append(Change(code, name, STILL, said))
        elif code in new_codes:
            out.changes.append(Change(code, name, NEW, "not seen before" + (" (advisory)" if advisory else ""),
                                      regression=not advisory))
        else:
            status, detail = _fixed_detail(old, new, code, check_id)
            out.changes.append(Change(code, name, status, detail))
    listed = {c.subject for c in out.changes}
    for check_id, check in new.checks.items():  # a code looked for in neither run is not "absent" either
        for code, why in sorted((check.get("not_examined") or {}).items()):
            if code not in listed:
                out.changes.append(Change(code, rules().get(code, {}).get("name", ""), UNDECIDED,
                                          f"{check_id} did not examine it now: {why}"))
    for criterion in list(dict.fromkeys([*new.criteria, *old.criteria])):
        was, is_ = old.criteria.get(criterion, "absent"), new.criteria.get(criterion, "absent")
        detail = f"{was} -> {is_}" if was != is_ else f"{is_}, as before"
        if is_ in ("not tested", "undecided", "absent"):
            status = UNDECIDED
        elif is_ == "fail":
            status = STILL if was == "fail" else NEW
        else:
            status = FIXED if was == "fail" else STILL
        out.changes.append(Change(criterion, "criterion", status, detail, regression=was == "pass" and is_ == "fail"))
    if new.score != old.score:
        out.changes.append(Change("score", "score", FIXED if new.score > old.score else NEW,
                                  f"{old.score} -> {new.score}", regression=new.score < old.score))
    if Path(old.spec).name != Path(new.spec).name:
        out.notes.append(f"the two runs checked different specs ({old.spec or '?'} and {new.spec or '?'})")
    if new.rate is not None:
        for check_id, check in new.checks.items():
            racing = _racing(check)
            if check.get("status") != "pass" or not racing:
                continue
            bound = detection_bound(racing, 0, new.confidence)
            if bound is not None and bound > new.rate + 1e-12:
                out.notes.append(f"{check_id}: its bound ({percent(bound)}) is above the --rate asked for "
                                 f"({percent(new.rate)}): some rounds could not be judged or could not race")
    return out
