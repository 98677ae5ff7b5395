"""The pytest plugin as a maintainer uses it: a `clirace` fixture, and a failure that shows the report."""
import pytest

from ..conftest import FIXTURES

pytest_plugins = ["pytester"]

TEST_FILE = """
def test_gate(clirace):
    outcome = clirace({spec!r}, only=("lock-excludes", "lock-error-structured"))
    assert outcome.result.seed == 3  # from --clirace-seed
    assert outcome.criterion("lock-excludes") == "pass"
    outcome.assert_score({minimum})
"""


@pytest.mark.e2e
@pytest.mark.timeout(120)
@pytest.mark.parametrize("minimum,passes", [(0, True), (2, False)])
def test_fixture_gates_on_score(pytester, minimum, passes):
    pytester.makepyfile(TEST_FILE.format(spec=str(FIXTURES / "level1" / "clirace.yaml"), minimum=minimum))
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--clirace-seed", "3")
    if passes:
        result.assert_outcomes(passed=1)
    else:
        result.assert_outcomes(failed=1)
        result.stdout.fnmatch_lines(["*AssertionError: clirace score 0 < 2 for *level1/clirace.yaml",
                                     "*score 0/3: level 1 needs no-silent-corruption (not tested: run without --only*",
                                     "*replay: clirace check *level1/clirace.yaml --seed 3 --only lock-excludes*"])
        assert "<details>" not in result.stdout.str() and "pytest_plugin.py" not in result.stdout.str()

