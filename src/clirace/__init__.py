"""clirace: launch a command-line tool's mutating commands in parallel and score how it copes.

What's here, in pipeline order (each stage a plain function of the previous one's value):
  spec.py          YAML spec -> Spec (validated against spec_schema.json, errors with file:line:column)
  scenarios/       plan and launch: experiments in fresh sandboxes (sandbox.py, launch.py, observe.py)
  history.py       what happened: invocations and observed facts, saved and re-judged as JSON
  checks/          one module per check: history -> Verdict with findings (findings.py)
  rubric.py        rubric/*.yaml applied to verdicts -> criteria, score and the headline
  gate.py          whether the run lets CI go on (corruption, --min-score, a regression against baseline.py)
  report/          text, JSON, Markdown, GitHub, JUnit and SARIF renderings (_outputs.py writes them)
  pipeline.py      the stages wired together; cli.py and pytest_plugin.py are the two front doors
  validate.py, starter.py, explain.py   `clirace validate`, `clirace init`, `clirace explain`
Public API: `check`, `judge_history`, `load_spec`, `Result`, `SpecError`, `CliraceError`.
"""
from __future__ import annotations

__version__ = "0.1.0"
__all__ = ["check", "judge_history", "load_spec", "Result", "SpecError", "CliraceError"]


def check(spec_path, *, seed=None, rounds=None, parallel=None, only=(), strace=True, allow_outside_sandbox=False):
    """Run clirace on a spec and return the Result (`.score.score`, `.criteria`, `.findings()`)."""
    from .pipeline import Options, run
    from .spec import load_spec as _load
    spec = _load(spec_path, allow_outside_sandbox=allow_outside_sandbox)
    from .registry import resolve
    checks = tuple(resolve(name) or name for name in only)
    return run(spec, Options(seed=seed, rounds=rounds, parallel=parallel, only=checks, strace=strace,
                             allow_outside_sandbox=allow_outside_sandbox))


def judge_history(path):
    """Re-judge a history saved with `clirace check --history FILE`."""
    from .history import History
    from .pipeline import judge
    return judge(History.load(path))


def __getattr__(name):
    if name == "load_spec":
        from .spec import load_spec
        return load_spec
    if name == "Result":
        from .pipeline import Result
        return Result
    if name in ("SpecError", "CliraceError"):
        from . import errors
        return getattr(errors, name)
    raise AttributeError(name)
