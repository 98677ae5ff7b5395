"""The fast subset (`-m "not e2e"`) does not import tests/e2e, and every other `-m` still collects it; `-n auto` gives
the fast subset one xdist worker per core and a suite with e2e tests two."""
import os
from types import SimpleNamespace

import pytest

from ..conftest import E2E, may_select_e2e, pytest_ignore_collect, pytest_xdist_auto_num_workers


@pytest.mark.parametrize("markexpr", [
    "", "e2e", "not not e2e", "e2e or slow", "not e2e or slow", "slow or not e2e", "not (e2e and slow)",
    "e2e and not slow", "not e2e or e2e", "e2e(kind='lock')", "not e2e(kind='lock')", "not e2e or e2e(kind='lock')",
    "(not e2e or a) and (not e2e or not a) or b", "not e2e or (a and not b and c)",
])
def test_an_expression_that_can_select_an_e2e_test_collects_tests_e2e(markexpr):
    assert may_select_e2e(markexpr)
    assert pytest_ignore_collect(E2E, SimpleNamespace(option=SimpleNamespace(markexpr=markexpr))) is None


@pytest.mark.parametrize("markexpr", [
    "not e2e", "not e2e and slow", "slow and not e2e", "not (e2e or slow)", "e2e and not e2e",
    "not e2e and (a or not a)", "(not e2e or a) and (not e2e or not a)", "not e2e and e2e(kind='lock')",
])
def test_an_expression_that_deselects_every_e2e_test_skips_tests_e2e(markexpr):
    assert not may_select_e2e(markexpr)
    assert pytest_ignore_collect(E2E, SimpleNamespace(option=SimpleNamespace(markexpr=markexpr))) is True


def test_only_tests_e2e_itself_is_skipped():
    config = SimpleNamespace(option=SimpleNamespace(markexpr="not e2e"))
    assert pytest_ignore_collect(E2E.parent / "unit", config) is None
    assert pytest_ignore_collect(E2E / "test_killed.py", config) is None  # inside, never reached once E2E is skipped


def test_an_expression_pytest_cannot_parse_collects_everything():
    assert may_select_e2e("not (e2e")  # pytest then reports the expression itself


@pytest.mark.parametrize(("cores", "markexpr", "workers"), [
    (1, "", 2), (2, "", 4), (3, "", 4), (8, "", 4), (2, "e2e", 4), (2, "not e2e or slow", 4),
    (1, "not e2e", 1), (2, "not e2e", 2), (8, "not e2e", 4),
])
def test_auto_workers_are_two_per_core_with_e2e_tests_and_one_per_core_without(monkeypatch, cores, markexpr, workers):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(cores)))
    assert pytest_xdist_auto_num_workers(SimpleNamespace(option=SimpleNamespace(markexpr=markexpr))) == workers
