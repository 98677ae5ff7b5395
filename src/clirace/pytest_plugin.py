"""pytest plugin (registered through the `pytest11` entry point).

Two ways in:

* Spec files: every `*.clirace.yaml` pytest walks is collected as one item per criterion plus one for the
  score. The check runs once per file, when its first item runs; the other items read the same result.
  A criterion not tested is skipped with the reason; a failed one shows its findings. Under pytest-xdist
  the first worker to reach a file runs it and saves the history; the others judge that saved history, so
  `-n 2` reports exactly what one process would. The score item fails below `clirace_min_score` (ini) or
  `--clirace-min-score`.

* The `clirace` fixture: call it with a spec path (relative paths are resolved against the test file's
  directory) and get an outcome with `.score` (int), `.result` (the Result), `.criterion(id)` (its status
  string: "pass", "fail" or "not_tested") and `.assert_score(n)`, which fails with the Markdown report when
  the score is below n. Two tests on one spec with the same options share one check.

    def test_concurrency(clirace):
        clirace("tool.clirace.yaml").assert_score(2)
"""
from __future__ import annotations

import fcntl
import hashlib
import os
from pathlib import Path

import pytest

SUFFIX = ".clirace.yaml"


def pytest_addoption(parser):
    group = parser.getgroup("clirace")
    group.addoption("--clirace-min-score", type=int, default=None,
                    help="Fail a *.clirace.yaml file's score item below this (default: ini clirace_min_score, 0).")
    group.addoption("--clirace-rounds", type=int, default=None,
                    help="Parallel rounds per workload for collected *.clirace.yaml files (default: the spec's).")
    parser.addini("clirace_min_score", "Minimum score for collected *.clirace.yaml files.", default="0")


def pytest_configure(config):
    config.addinivalue_line("markers", "clirace: an item collected from a *.clirace.yaml spec file")


def pytest_collect_file(file_path: Path, parent):
    if file_path.name.endswith(SUFFIX):
        return SpecFile.from_parent(parent, path=file_path)
    return None


# ------------------------------------------------------------------------------------------ one run per spec

_RESULTS: dict = {}  # (spec path, options) -> Result or SpecError, for this process


def _with_location(exc):
    """A SpecError whose str() names file:line:col (pytest shows str(), not the paragraph)."""
    from .errors import CliraceError
    if isinstance(exc, CliraceError) and exc.args and exc.args[0] == exc.message:
        exc.args = (exc.paragraph(),)
    return exc


def _shared_dir(config) -> Path:
    """A directory every xdist worker of this session sees (the parent of the workers' own basetemps)."""
    base = config._tmp_path_factory.getbasetemp()
    return base.parent if hasattr(config, "workerinput") else base


def _run_once(config, spec_path: Path, **options):
    """The Result of checking `spec_path`, computed once per pytest session across xdist workers."""
    from . import check
    from .errors import CliraceError
    from .history import History
    from .pipeline import judge

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
    def collect(self):
        from .rubric import load_section
        for level in load_section("s15")["levels"]:
            for c in level.get("criteria", []):
                yield CriterionItem.from_parent(self, name=c["id"], criterion=c["id"])
        yield ScoreItem.from_parent(self, name="score")

    def result(self):
        rounds = self.config.getoption("clirace_rounds")
        return _run_once(self.config, self.path.resolve(), **({"rounds": rounds} if rounds else {}))


class _SpecItem(pytest.Item):
    def __init__(self, *, criterion=None, **kwargs):
        super().__init__(**kwargs)
        self.criterion = criterion
        self.add_marker("clirace")

    def reportinfo(self):
        return self.path, 0, self.name

    def repr_failure(self, excinfo):
        from .errors import CliraceError
        if isinstance(excinfo.value, (CliraceError, CriterionFailed)):
            return str(excinfo.value)
        return super().repr_failure(excinfo)


class CriterionFailed(AssertionError):
    """A criterion of a collected spec failed; the message holds its findings."""


class CriterionItem(_SpecItem):
    def runtest(self):
        from .report._safe import status_value
        result = self.parent.result()
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
    def runtest(self):
        result = self.parent.result()
        option = self.config.getoption("clirace_min_score")
        minimum = option if option is not None else int(self.config.getini("clirace_min_score") or 0)
        if result.score.score < minimum:
            blocked = "; ".join(f"{c.id} is {getattr(c.status, 'value', c.status)}" for c in result.score.blocked_by)
            raise CriterionFailed(f"clirace score {result.score.score} < {minimum}: {result.score.line}"
                                  + (f"\nnot higher: {blocked}" if blocked else "")
                                  + f"\nreplay: {_clean(result, result.replay())}")


def _clean(result, text) -> str:
    from .report._safe import clean, spec_dir_of
    return clean(text, spec_dir_of(result))


def _failure_text(result, crit) -> str:
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
            lines.append(f"    replay: {_clean(result, f.evidence.replay)}")
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------------- fixture

class _Outcome:
    def __init__(self, result):
        self.result = result
        self.score = result.score.score

    def criterion(self, criterion_id: str) -> str:
        """The criterion's status as a plain string: "pass", "fail", "not_tested" or "unknown"."""
        status = next(c.status for c in self.result.criteria if c.id == criterion_id)
        return getattr(status, "value", status)

    def assert_score(self, minimum: int) -> None:
        if self.score < minimum:
            from .report import to_markdown
            raise AssertionError(f"clirace score {self.score} < {minimum}\n\n{to_markdown(self.result)}")


@pytest.fixture
def clirace(request):
    """Call with a spec path (relative to the test file's directory) and options of `clirace.check`."""
    from .errors import CliraceError
    here = Path(request.path).parent

    def run(spec_path, **options) -> _Outcome:
        path = Path(spec_path)
        path = path if path.is_absolute() else here / path
        try:
            return _Outcome(_run_once(request.config, path.resolve(), **options))
        except CliraceError as exc:
            raise _with_location(exc)
    return run
