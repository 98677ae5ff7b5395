"""pytest plugin (registered through the `pytest11` entry point).

Fixture `clirace`: call it with a spec path to run a check and get the Result; `.assert_score(n)` fails the
test with the whole report when the score is below n:

    def test_concurrency(clirace):
        clirace("tool.clirace.yaml").assert_score(2)
"""
from __future__ import annotations

import pytest


class _Outcome:
    def __init__(self, result):
        self.result = result
        self.score = result.score.score

    def criterion(self, criterion_id: str) -> str:
        return next(c.status for c in self.result.criteria if c.id == criterion_id)

    def assert_score(self, minimum: int) -> None:
        if self.score < minimum:
            from .report import to_markdown
            raise AssertionError(f"clirace score {self.score} < {minimum}\n\n{to_markdown(self.result)}")


@pytest.fixture
def clirace():
    from . import check

    def run(spec_path, **options) -> _Outcome:
        return _Outcome(check(spec_path, **options))
    return run
