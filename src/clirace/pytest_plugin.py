"""pytest plugin (registered through the `pytest11` entry point).

Two ways in:

* Spec files: every `*.clirace.yaml` pytest walks is collected as one item per criterion plus one for the
  score. The check runs once per file, when its first item runs; the other items read the same result.
  A criterion not tested is skipped with the reason; a failed one shows its findings. Under pytest-xdist
  the first worker to reach a file runs it and saves the history; the others judge that saved history, so
  `-n 2` reports exactly what one process would. The score item is the CLI's gate: it fails on silent
  corruption whatever the minimum, and below `clirace_min_score` (ini) or `--clirace-min-score`;
  `--clirace-score-only` (ini `clirace_score_only = true`) makes it check the score alone, as before.

* The `clirace` fixture: call it with a spec path (relative paths are resolved against the test file's
  directory) and get an outcome with `.score` (int), `.result` (the Result), `.criterion(id)` (its status
  string: "pass", "fail", "not_tested" or "unknown"; an id that is no criterion is an error naming the nearest)
  and `.assert_score(n)`, which fails with a short message (the headline and the replay) when the score is
  below n. Two tests on one spec with the same options share one check. `--clirace-seed N` fixes the seed of
  every check the plugin runs (a call's own `seed=` wins).

    def test_concurrency(clirace):
        clirace("tool.clirace.yaml").assert_score(2)
"""
from __future__ import annotations

import fcntl
import hashlib
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from clirace.errors import CriterionFailed as CriterionFailed  # what a failed item raises (public)

if TYPE_CHECKING:
    from _pytest._code.code import TerminalRepr, TracebackStyle  # repr_failure's own types (no public name)

    from clirace.errors import CliraceError
    from clirace.verdict.result import Result
    from clirace.verdict.rubric import Criterion

SUFFIX = ".clirace.yaml"


MIN_SCORE_HELP = "Fail a *.clirace.yaml file's score item below this, 0-3 (default: ini clirace_min_score, 0)."
ROUNDS_HELP = "Parallel rounds per workload for collected *.clirace.yaml files, 1-100 (default: the spec's)."
SCORE_ONLY_HELP = ("The score item checks the score against the minimum only, not the gate (which also fails "
                   "on silent corruption, as `clirace check` does).")
SEED_HELP = "Seed of every check the plugin runs, for a run that repeats (default: a fresh one, printed on failure)."


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("clirace")
    group.addoption("--clirace-min-score", type=int, default=None, help=MIN_SCORE_HELP)
    group.addoption("--clirace-rounds", type=int, default=None, help=ROUNDS_HELP)
    group.addoption("--clirace-seed", type=int, default=None, help=SEED_HELP)
    group.addoption("--clirace-score-only", action="store_true", default=False, help=SCORE_ONLY_HELP)
    parser.addini("clirace_min_score", MIN_SCORE_HELP, default="0")
    parser.addini("clirace_score_only", SCORE_ONLY_HELP, type="bool", default=False)


def pytest_configure(config: pytest.Config) -> None:
    """Bad values stop the session here, before any check runs (a check can take a minute)."""
    config.addinivalue_line("markers", "clirace: an item collected from a *.clirace.yaml spec file")
    _min_score(config)
    for option, low, high in (("clirace_rounds", 1, 100), ("clirace_seed", 0, 2**63 - 1)):
        value = config.getoption(option)
        if value is not None and not low <= value <= high:
            raise pytest.UsageError(f"--{option.replace('_', '-')} {value}: expected {low} to {high}.")


def _min_score(config: pytest.Config) -> int:
    option: int | None = config.getoption("clirace_min_score")
    if option is not None:
        if not 0 <= option <= 3:
            raise pytest.UsageError(f"--clirace-min-score {option}: expected 0 to 3.")
        return option
    raw = config.getini("clirace_min_score")
    try:
        value = int(str(raw).strip() or 0)
    except ValueError:
        value = -1
    if not 0 <= value <= 3:
        where = f" (in {config.inipath})" if getattr(config, "inipath", None) else ""
        raise pytest.UsageError(f"clirace_min_score = {raw!r}{where}: expected an integer from 0 to 3.")
    return value


def _options(config: pytest.Config, names: tuple[str, ...] = ("seed",), **given: Any) -> dict[str, Any]:
    """A call's options, with the session's --clirace-seed (and for collected files --clirace-rounds) where the
    call gives none."""
    for name in names:
        value = config.getoption(f"clirace_{name}")
        if value is not None and given.get(name) is None:
            given[name] = value
    return given


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> SpecFile | None:
    if file_path.name.endswith(SUFFIX):
        return SpecFile.from_parent(parent, path=file_path)
    return None


# ------------------------------------------------------------------------------------------ one run per spec

_RESULTS: dict[tuple[str, tuple[tuple[str, Any], ...]], Result | CliraceError] = {}  # for this process


def _with_location(exc: CliraceError) -> CliraceError:
    """A SpecError whose str() names file:line:col (pytest shows str(), not the paragraph)."""
    if exc.args and exc.args[0] == exc.message:
        exc.args = (exc.paragraph(),)
    return exc


def _shared_dir(config: pytest.Config) -> Path:
    """A directory every xdist worker of this session sees (the parent of the workers' own basetemps)."""
    base: Path = config._tmp_path_factory.getbasetemp()  # type: ignore[attr-defined]  # set by pytest's tmp_path plugin
    return base.parent if hasattr(config, "workerinput") else base


def _run_once(config: pytest.Config, spec_path: Path, **options: Any) -> Result:
    """The Result of checking `spec_path`, computed once per pytest session across xdist workers."""
    from clirace import check
    from clirace.cli.pipeline import judge
    from clirace.errors import CliraceError
    from clirace.history import History

    key = (str(spec_path), tuple(sorted(options.items())))
    if key in _RESULTS:
        cached = _RESULTS[key]
        if isinstance(cached, BaseException):
            raise cached
        return cached
    name = hashlib.sha256(repr(key).encode()).hexdigest()[:16]
    shared = _shared_dir(config)
    saved = shared / f"clirace-{name}.history.json"
    try:
        with open(shared / f"clirace-{name}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # the first worker runs the check; the others wait, then judge
            if saved.exists():
                result = judge(History.load(saved))  # the history keeps the run's options
            else:
                result = check(spec_path, **options)
                tmp = saved.with_suffix(f".{os.getpid()}.tmp")
                result.history.save(tmp)
                os.replace(tmp, saved)
    except CliraceError as exc:
        _RESULTS[key] = _with_location(exc)
        raise
    _RESULTS[key] = result
    return result


class SpecFile(pytest.File):
    def collect(self) -> Iterator[pytest.Item]:
        from clirace.verdict.rubric import load_section
        for level in load_section("s15")["levels"]:
            for c in level.get("criteria", []):
                yield CriterionItem.from_parent(self, name=c["id"], criterion=c["id"])
        yield ScoreItem.from_parent(self, name="score")

    def result(self) -> Result:
        return _run_once(self.config, self.path.resolve(), **_options(self.config, ("seed", "rounds")))


class _SpecItem(pytest.Item):
    def __init__(self, *, criterion: str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.criterion = criterion
        self.add_marker("clirace")

    def reportinfo(self) -> tuple[Path, int, str]:
        return self.path, 0, self.name

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException],
                     style: TracebackStyle | None = None) -> str | TerminalRepr:
        from clirace.errors import CliraceError
        if isinstance(excinfo.value, (CliraceError, CriterionFailed)):
            return str(excinfo.value)
        return super().repr_failure(excinfo, style)

    def spec_file(self) -> SpecFile:
        """The file this item was collected from (its parent, always: SpecFile.collect makes every item)."""
        assert isinstance(self.parent, SpecFile)
        return self.parent


class CriterionItem(_SpecItem):
    def runtest(self) -> None:
        from clirace.report._safe import status_value
        result = self.spec_file().result()
        crit = next(c for c in result.criteria if c.id == self.criterion)
        status = status_value(crit.status)
        if status == "pass":
            return
        if status == "fail":
            raise CriterionFailed(_failure_text(result, crit))
        reason = ("indeterminate: " if status == "unknown" else "not tested: ") + _clean(result, crit.evidence)
        if crit.to_test:
            reason += f"; to test: {_clean(result, crit.to_test)}"
        try:  # shown at the spec file, not at this line of the plugin
            raise pytest.skip.Exception(reason, _use_item_location=True)
        except TypeError:  # a pytest without that keyword
            pytest.skip(reason)


class ScoreItem(_SpecItem):
    def runtest(self) -> None:
        from clirace.verdict import gate
        result = self.spec_file().result()
        minimum = _min_score(self.config)
        if self.config.getoption("clirace_score_only") or self.config.getini("clirace_score_only"):
            if result.score.score < minimum:
                raise CriterionFailed(_below(result, minimum))
            return
        verdict = gate.evaluate(result, minimum)
        if not verdict.passed:
            raise CriterionFailed(f"{verdict.line()}\n{_below(result, minimum, head=False)}")


def _below(result: Result, minimum: int, head: bool = True) -> str:
    """The short failure of a score below `minimum`: the headline (what stops the next level, and the change that
    would move it) and the command that replays the run."""
    from clirace.report._locate import display_path
    from clirace.report._safe import replay
    return ((f"clirace score {result.score.score} < {minimum} for {display_path(result.spec_path)}\n" if head else "")
            + f"{_clean(result, result.score.headline())}\nreplay: {replay(result, result.replay())}")


def _clean(result: Result, text: object) -> str:
    from clirace.report._safe import clean, spec_dir_of
    return clean(text, spec_dir_of(result))


def _failure_text(result: Result, crit: Criterion) -> str:
    lines = [f"{crit.id} failed: {_clean(result, crit.evidence)}"]
    for f in crit.findings:
        lines.append(f"{f.code} {f.rule['name']} [{f.severity}] {_clean(result, f.message())}")
        for inv in f.evidence.invocations[:4]:
            lines.append(f"    {_clean(result, inv['label'])}: {_clean(result, inv['command'])} -> "
                         f"{_clean(result, inv['outcome'])}; {_clean(result, inv['printed'])}")
        if f.evidence.expected or f.evidence.found:
            lines.append(f"    expected: {_clean(result, f.evidence.expected)}; found: {_clean(result, f.evidence.found)}")
        if f.rule.get("fix"):
            lines.append(f"    fix: {f.rule['fix']}")
        if f.evidence.replay:
            from clirace.report._safe import replay
            lines.append(f"    replay: {replay(result, f.evidence.replay)}")
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------------- fixture

class _Outcome:
    def __init__(self, result: Result) -> None:
        self.result = result
        self.score = result.score.score

    def criterion(self, criterion_id: str) -> str:
        """The criterion's status as a plain string: "pass", "fail", "not_tested" or "unknown"."""
        __tracebackhide__ = True
        found = next((c for c in self.result.criteria if c.id == criterion_id), None)
        if found is None:
            raise UnknownCriterion(criterion_id, [c.id for c in self.result.criteria])
        from clirace.report._safe import status_value
        return status_value(found.status)

    def assert_score(self, minimum: int) -> None:
        """Fail the calling test, shortly (the headline and the replay), when the score is below `minimum`."""
        __tracebackhide__ = True
        if self.score < minimum:
            raise AssertionError(_below(self.result, minimum))


class UnknownCriterion(LookupError):
    """`outcome.criterion(id)` with an id that is no criterion of the rubric."""

    def __init__(self, given: str, ids: list[str]) -> None:
        from clirace.errors import did_you_mean
        guess = did_you_mean(given, ids)
        super().__init__(f"{given!r} is not a clirace criterion" + (f"; did you mean {guess}?" if guess else ".")
                         + f" Criteria: {', '.join(ids)}.")


@pytest.fixture
def clirace(request: pytest.FixtureRequest) -> Callable[..., _Outcome]:
    """Call with a spec path (relative to the test file's directory) and options of `clirace.check`."""
    from clirace.errors import CliraceError
    here = Path(request.path).parent

    def run(spec_path: str | Path, **options: Any) -> _Outcome:
        path = Path(spec_path)
        path = path if path.is_absolute() else here / path
        try:
            return _Outcome(_run_once(request.config, path.resolve(), **_options(request.config, **options)))
        except CliraceError as exc:
            raise _with_location(exc)  # noqa: B904 - the same error, re-raised with its location in str()
    return run
