"""What judging a history gives: the verdicts of every check, the criteria and score they make, the notes a
reader needs, and (once a command evaluated them) the CI gate and the comparison with a baseline.

cli/pipeline.py makes it (`run`, `judge`); every report renders it. It lives here, with the verdict stage,
so that the report stage below the entry points can name its type.
"""
from __future__ import annotations

import shlex
from dataclasses import dataclass, field

from clirace.checks.findings import FAIL, UNKNOWN, Finding, Verdict
from clirace.history import History
from clirace.verdict.baseline import Comparison
from clirace.verdict.gate import Gate
from clirace.verdict.rubric import Criterion, Score


@dataclass
class Result:
    spec_path: str
    seed: int
    score: Score
    criteria: list[Criterion]
    verdicts: dict[str, Verdict]
    history: History
    seconds: float = 0.0
    interrupted: bool = False
    kept: str | None = None
    notes: list[str] = field(default_factory=list)
    observed_lines: list[str] = field(default_factory=list)
    gate: Gate | None = None  # once a command evaluated it with the user's options (reports show it)
    comparison: Comparison | None = None  # when the run was compared with a baseline
    unfinished: list[str] = field(default_factory=list)  # planned experiments without all their records, and why

    def clirace_failed(self) -> dict[str, str]:
        """check -> what it raised, for each check that itself failed: a bug in clirace, so the run exits 3 once
        the report of what the other checks decided is out (an exception in a config reader included)."""
        return {check: v.clirace_failed for check, v in self.verdicts.items() if v.clirace_failed}

    def replay(self, check: str | None = None) -> str:
        """The command that runs this check again with every choice the same (seed and options)."""
        opts = self.history.options
        parts = ["clirace", "check", shlex.quote(self.spec_path), "--seed", str(self.seed)]
        if opts.rounds is not None:
            parts += ["--rounds", str(opts.rounds)]
        if opts.parallel is not None:
            parts += ["--parallel", str(opts.parallel)]
        if opts.budget is not None:
            parts += ["--budget", f"{opts.budget:g}"]
        if not opts.strace:
            parts.append("--no-strace")
        if opts.allow_outside_sandbox:
            parts.append("--allow-outside-sandbox")
        if opts.shard:
            parts += ["--shard", opts.shard]
        for name in (check,) if check else opts.only:
            parts += ["--only", name]
        return " ".join(parts)

    def observed(self) -> list[str]:
        """How the tool was seen to lock and write, from every traced round (empty without strace)."""
        return self.observed_lines

    def missing_evidence(self) -> list[dict[str, str]]:
        """The criteria the score stops at for want of evidence (not tested or undecided, not failed): which,
        why, and the spec change that decides each. Reports lead with these, so a score never rests silently
        on evidence that was not gathered."""
        return [{"criterion": c.id, "status": "undecided" if c.status == UNKNOWN else "not tested",
                 "why": c.evidence, "to_decide": c.to_test}
                for c in self.score.blocked_by if c.status != FAIL]

    def findings(self) -> list[Finding]:
        return [f for v in self.verdicts.values() for f in v.findings]
