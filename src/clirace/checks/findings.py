"""Findings and verdicts: plain data with stable rule codes. Text is rendered only when reporting.

A check returns one `Verdict` (pass / fail / not_tested / unknown / not_applicable) with the findings behind
it. `unknown` means the experiment could not decide (the target crashed for another reason, a holder never
became ready); it never counts as a pass. The rule catalogue (rubric/rules.yaml) maps each code to its name,
severity, message template and fix; codes are never renumbered or reused.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from enum import Enum
from typing import Any

from clirace.checks.catalogue import lifecycle, rule, template_fields
from clirace.errors import VerdictWithoutEvidence as VerdictWithoutEvidence  # raised here; tests import it from here


class Status(str, Enum):
    """A verdict's or a criterion's status. A str, so that JSON and comparisons with "pass" keep working."""

    PASS = "pass"
    FAIL = "fail"
    NOT_TESTED = "not_tested"
    UNKNOWN = "unknown"  # the experiment ran but could not decide
    NOT_APPLICABLE = "not_applicable"  # the spec has nothing this check judges (e.g. no counter workload)

    def __str__(self) -> str:
        return self.value


PASS, FAIL, NOT_TESTED, UNKNOWN, NOT_APPLICABLE = (Status.PASS, Status.FAIL, Status.NOT_TESTED, Status.UNKNOWN,
                                                    Status.NOT_APPLICABLE)


@dataclass
class Evidence:
    trial: str = ""
    invocations: list[dict[str, str]] = field(default_factory=list)  # label, command, outcome, printed
    expected: str = ""
    found: str = ""
    observed: str = ""  # what a trace showed the invocations doing to files, when one was taken
    replay: str = ""


@dataclass
class Finding:
    code: str
    args: dict[str, Any] = field(default_factory=dict)
    evidence: Evidence = field(default_factory=Evidence)

    def __post_init__(self) -> None:
        """A finding is checked against its catalogue entry when it is made, so that a code that does not exist
        or was removed, or arguments its message template cannot be formatted with, fail in the check's tests
        and not when a report renders."""
        try:
            removed = lifecycle(self.code) == "removed"
        except KeyError:
            raise ValueError(f"finding code {self.code} is not in the rule catalogue (rubric/rules.yaml)") from None
        if removed:
            raise ValueError(f"finding code {self.code} was removed from the rule catalogue; it is never reported")
        missing = template_fields(self.code) - self.args.keys()
        if missing:
            raise ValueError(f"finding {self.code} lacks {', '.join(sorted(missing))}, which its message template "
                             f"formats (rubric/rules.yaml)")

    @property
    def rule(self) -> dict[str, Any]:
        return rule(self.code)

    @property
    def severity(self) -> str:
        severity: str = self.rule["severity"]
        return severity

    @property
    def advisory(self) -> bool:
        return self.severity in ("advisory", "info")

    def message(self) -> str:
        template: str = self.rule["message"]
        try:
            return template.format(**self.args)
        except (KeyError, IndexError) as exc:  # a template/argument mismatch must not hide the finding
            return f"{template} (arguments {self.args}; missing {exc})"

    def to_dict(self) -> dict[str, Any]:
        return {"code": self.code, "name": self.rule["name"], "severity": self.severity, "message": self.message(),
                "args": self.args, "evidence": asdict(self.evidence), "fix": self.rule.get("fix", "")}


@dataclass
class Verdict:
    check: str
    status: Status
    summary: str
    findings: list[Finding] = field(default_factory=list)
    hint: str = ""
    rates: dict[str, Any] = field(default_factory=dict)
    clirace_failed: str = ""  # the check itself raised (a bug in clirace): unknown, and the run exits 3
    read: tuple[str, ...] = ()  # the records a pass rests on ("lock-conflict: NAME (round 1)"), one at least
    # Finding codes this check can emit that it did not examine in this run, each with why (a config that did not
    # parse was never looked into for lost keys): their absence proves nothing, and `diff` says undecided.
    unexamined: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        """One owner per failure, checked: no FAIL without a non-advisory finding that carries its evidence (the
        trial it was seen in), no PASS without the records it read. A check that builds either is a bug in
        clirace; judge_all reports it as such (undecided, exit 3), never as the verdict it tried to give."""
        if self.status == FAIL and not any(not f.advisory and f.evidence.trial for f in self.findings):
            raise VerdictWithoutEvidence(f"{self.check}: a failure without a finding that says where it was seen "
                                         f"({self.summary[:120]!r})")
        if self.status == PASS and not self.read:
            raise VerdictWithoutEvidence(f"{self.check}: a pass that names no record it read ({self.summary[:120]!r})")

    def to_dict(self) -> dict[str, Any]:
        return {"check": self.check, "status": self.status.value, "summary": self.summary, "hint": self.hint,
                "rates": self.rates, "read": list(self.read), "findings": [f.to_dict() for f in self.findings],
                "not_examined": dict(self.unexamined)}


def not_tested(check: str, why: str, hint: str = "") -> Verdict:
    return Verdict(check, NOT_TESTED, why, hint=hint)


def not_applicable(check: str, why: str) -> Verdict:
    return Verdict(check, NOT_APPLICABLE, why)


def unknown(check: str, why: str, hint: str = "", findings: list[Finding] | None = None) -> Verdict:
    return Verdict(check, UNKNOWN, why, findings or [], hint=hint)
