"""The CI gate: whether a run lets a pipeline go on, and why. It decides the exit status of `check` and
`judge`, and every report shows it (JSON `gate`, a GitHub `::error`, a JUnit testcase, the first line of the
text and Markdown reports).

It fails on any silent-corruption finding (whatever --min-score says), on a score below --min-score, and, with
a baseline, on a regression: a new finding that is not advisory, a lower score, a criterion that went from
pass to fail. It never claims what was not decided: when no-silent-corruption is undecided or was not tested
(a spec with only a lock section), the gate line says so and the gate fails, unless `--allow-undecided`. `--exit-zero` (named as ruff, flake8 and pylint name theirs) keeps the gate's verdict in the
reports but does not enforce it: the exit status is 0 unless clirace itself could not run.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from clirace.checks.findings import FAIL, NOT_TESTED, PASS, Finding
from clirace.errors import EXIT_BELOW_MIN_SCORE, EXIT_OK
from clirace.verdict.baseline import Comparison
from clirace.verdict.rubric import Criterion, Score

EXIT_GATE_FAILED = EXIT_BELOW_MIN_SCORE  # one exit status for every reason the gate fails (README, Exit codes)


@dataclass(frozen=True)
class Gate:
    threshold: int  # --min-score
    passed: bool
    why: str
    enforced: bool = True  # False with --exit-zero: reported, never failing the exit status

    @property
    def exit_code(self) -> int:
        return EXIT_OK if self.passed or not self.enforced else EXIT_GATE_FAILED

    @property
    def fails(self) -> bool:
        """The gate failed and is enforced: the run's exit status is 1."""
        return self.exit_code != EXIT_OK

    def word(self) -> str:
        return "passed" if self.passed else "failed" if self.enforced else "failed, not enforced (--exit-zero)"

    def line(self) -> str:
        """One line for the top of a report: `clirace gate failed: silent corruption: CR111 lost-key`."""
        return f"clirace gate {self.word()}: {self.why}"

    def to_dict(self) -> dict[str, Any]:
        return {"threshold": self.threshold, "passed": self.passed, "enforced": self.enforced, "why": self.why}


CORRUPTION = "no-silent-corruption"


class SpecItem(Protocol):
    """A spec in a list of several: a run (Judged), or report/_failed.Failed when it could not be checked."""
    @property
    def spec_path(self) -> str: ...


@runtime_checkable
class Judged(SpecItem, Protocol):
    """What the gate reads of a run (verdict/result.Result, which names this module's Gate: hence a protocol)."""
    @property
    def score(self) -> Score: ...
    @property
    def criteria(self) -> list[Criterion]: ...
    @property
    def gate(self) -> Gate | None: ...
    def findings(self) -> list[Finding]: ...


def evaluate(result: Judged, min_score: int = 0, exit_zero: bool = False, comparison: Comparison | None = None,
             allow_undecided: bool = False) -> Gate:
    """The gate for `result` (a verdict.result.Result) under the user's options and an optional baseline comparison."""
    score = result.score.score
    failures: list[str] = []
    corrupt = sorted({f"{f.code} {f.rule['name']}" for f in result.findings() if f.severity == "corruption"})
    if corrupt:
        failures.append(f"silent corruption was found ({', '.join(corrupt)})")
    undecided = "" if corrupt else _undecided(result)
    if undecided and not allow_undecided:
        failures.append(undecided)
    if score < min_score:
        failures.append(f"score {score} is below --min-score {min_score}")
    if comparison is not None and comparison.regressions():
        failures.append(f"regression against the baseline: {'; '.join(comparison.regressions())}")
    if failures:
        return Gate(min_score, False, "; ".join(failures), not exit_zero)
    passed = [f"{undecided} (allowed by --allow-undecided)" if undecided else "no silent corruption",
              f"score {score} >= --min-score {min_score}"]
    if comparison is not None:
        passed.append("no regression against the baseline")
    return Gate(min_score, True, "; ".join(passed), not exit_zero)


def _undecided(result: Judged) -> str:
    """What the gate says when no-silent-corruption was neither passed nor failed, else ""."""
    criterion = next((c for c in result.criteria if c.id == CORRUPTION), None)
    if criterion is None or criterion.status in (PASS, FAIL):
        return ""
    how = "was not tested" if criterion.status == NOT_TESTED else "is undecided"
    return f"{CORRUPTION} {how}, so silent corruption was not ruled out ({criterion.evidence})"


def of(result: Judged) -> Gate:
    """The gate a report shows: the one the command evaluated, else the default (corruption fails, min 0)."""
    return result.gate or evaluate(result)


def overall(items: Sequence[Judged | SpecItem]) -> Gate | None:
    """With several specs, the one gate over all of them (the first line of the text and Markdown reports):
    failed when any spec's gate fails or any spec could not be checked; None for a single spec, whose own gate
    line says it all."""
    if len(items) < 2:
        return None
    from clirace.spec._paths import shown_path

    gates = [(item, of(item) if isinstance(item, Judged) else None) for item in items]
    failing = [(item, g) for item, g in gates if g is None or not g.passed]
    if not failing:
        return Gate(0, True, f"all {len(items)} specs passed")
    names = ", ".join(shown_path(item.spec_path) or "spec" for item, _ in failing)
    enforced = any(g is None or g.enforced for _, g in failing)
    return Gate(0, False, f"{len(failing)} of {len(items)} specs failed ({names})", enforced)
