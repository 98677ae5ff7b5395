"""clirace: launch a command-line tool's mutating commands in parallel and score how it copes.

What's here, in pipeline order (each stage a plain function of the previous one's value):
  spec/__init__.py          YAML spec -> Spec (validated against spec_schema.json, errors with file:line:column)
  scenarios/       plan and launch: experiments in fresh sandboxes (run/sandbox.py, run/launch.py, run/observe.py)
  history/__init__.py       what happened: invocations and observed facts, saved and re-judged as JSON
  checks/          one module per check: history -> Verdict with findings (checks/findings.py)
  verdict/rubric.py        rubric/*.yaml applied to verdicts -> criteria, score and the headline
  verdict/result.py        the Result: verdicts, criteria, score and notes, which every report renders
  verdict/gate.py          whether the run lets CI go on (corruption, --min-score, a regression against verdict/baseline.py)
  report/          text, JSON, Markdown, GitHub, JUnit and SARIF renderings (cli/_outputs.py writes them)
  cli/pipeline.py      the stages wired together; cli/__init__.py and pytest_plugin.py are the two front doors
  cli/validate.py, spec/starter.py, report/explain.py   `clirace validate`, `clirace init`, `clirace explain`
Public API: `check`, `judge_history`, `load_spec`, `Result`, `SpecError`, `CliraceError`.
"""
from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # what __getattr__ gives, for type checkers (imported on first use, not at start-up)
    from clirace.errors import CliraceError as CliraceError
    from clirace.errors import SpecError as SpecError
    from clirace.spec import load_spec as load_spec
    from clirace.verdict.result import Result

__all__ = ["check", "judge_history", "load_spec", "Result", "SpecError", "CliraceError"]


def check(spec_path: str | Path, *, seed: int | None = None, rounds: int | None = None, parallel: int | None = None,
          only: Iterable[str] = (), strace: bool = True, allow_outside_sandbox: bool = False) -> Result:
    """Run clirace on a spec and return the Result (`.score.score`, `.criteria`, `.findings()`)."""
    from clirace.cli.pipeline import run
    from clirace.history import RunOptions, new_seed
    from clirace.spec import load_spec as _load
    spec = _load(spec_path, allow_outside_sandbox=allow_outside_sandbox)
    from clirace.checks.registry import resolve
    checks = tuple(resolve(name) or name for name in only)
    return run(spec, RunOptions(seed=seed if seed is not None else new_seed(), rounds=rounds, parallel=parallel,
                                only=checks, strace=strace, allow_outside_sandbox=allow_outside_sandbox))


def judge_history(path: str | Path) -> Result:
    """Re-judge a history saved with `clirace check --history FILE`."""
    from clirace.cli.pipeline import judge
    from clirace.history import History
    return judge(History.load(path))


def __getattr__(name: str) -> object:
    # Each name on first use, so that `import clirace.cli` for `clirace --help` does not load the history package:
    # its version module is a leaf, but importing it runs history/__init__.py first (the records, ~30 dataclasses).
    if name == "__version__":
        from clirace.history.version import __version__
        return __version__
    if name == "load_spec":
        from clirace.spec import load_spec
        return load_spec
    if name == "Result":
        from clirace.verdict.result import Result
        return Result
    if name in ("SpecError", "CliraceError"):
        from clirace import errors
        return getattr(errors, name)
    raise AttributeError(name)
