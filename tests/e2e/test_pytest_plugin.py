"""The pytest plugin as a maintainer uses it: a `clirace` fixture, and a failure that shows the report."""
import pytest

from ..conftest import FIXTURES

pytest_plugins = ["pytester"]

# Two gates on one check: the plugin checks a spec once per session (with the same options) and judges each gate
# on that result, so one session shows both outcomes for the cost of one check.
TEST_FILE = """
def gate(clirace, minimum):
    outcome = clirace({spec!r}, only=("lock-excludes", "lock-error-structured"))
    assert outcome.result.seed == 3  # from --clirace-seed
    assert outcome.criterion("lock-excludes") == "pass"
    outcome.assert_score(minimum)


def test_gate_0(clirace):
    gate(clirace, 0)


def test_gate_2(clirace):
    gate(clirace, 2)
"""


@pytest.mark.e2e
@pytest.mark.timeout(120)
def test_fixture_gates_on_score(pytester):
    pytester.makepyfile(TEST_FILE.format(spec=str(FIXTURES / "level1" / "clirace.yaml")))
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--clirace-seed", "3")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*AssertionError: clirace score 0 < 2 for *level1/clirace.yaml",
                                 "*score 0/3: level 1 needs no-silent-corruption (not tested: run without --only*",
                                 "*replay: clirace check *level1/clirace.yaml --seed 3 --only lock-excludes*"])
    result.stdout.fnmatch_lines(["FAILED *::test_gate_2 - *"])  # the failing gate is the one asking for 2
    assert "<details>" not in result.stdout.str() and "pytest_plugin.py" not in result.stdout.str()
