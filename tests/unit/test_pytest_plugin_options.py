"""The pytest plugin's options and messages, through pytester in-process on literal histories (no target is
launched): bad values stop the session at configure time, an unknown criterion names the nearest, and a failing
assert_score is short, shown at the test's own line."""
import pytest

from clirace.cli.pipeline import judge
from clirace.pytest_plugin import UnknownCriterion, _Outcome

from .histories import saveable
from .test_gate_and_baseline import keys_history

pytest_plugins = ["pytester"]


@pytest.mark.parametrize("ini,args,message", [
    ("clirace_min_score = two", (), "clirace_min_score = 'two' (in *): expected an integer from 0 to 3."),
    ("", ("--clirace-min-score", "5"), "--clirace-min-score 5: expected 0 to 3."),
    ("", ("--clirace-rounds", "0"), "--clirace-rounds 0: expected 1 to 100."),
])
def test_a_bad_value_stops_the_session_before_any_check(pytester, ini, args, message):
    pytester.makeini(f"[pytest]\n{ini}\n")
    pytester.makefile(".clirace.yaml", tool="version: 1\n")  # would be checked, were the options good
    result = pytester.runpytest(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*{message}"])


def test_an_unknown_criterion_names_the_nearest():
    outcome = _Outcome(judge(keys_history(0, 1)))
    assert outcome.criterion("no-silent-corruption") == "pass"
    with pytest.raises(UnknownCriterion, match="'lock-exclude' is not a clirace criterion; did you mean "
                                               "'lock-excludes'?"):
        outcome.criterion("lock-exclude")


def test_a_failing_assert_score_is_short_and_points_at_the_test(pytester, tmp_path):
    saved = tmp_path / "h.json"
    saveable(keys_history(1, 3)).save(saved)
    pytester.makepyfile(f"""
        from clirace.history import History
        from clirace.cli.pipeline import judge
        from clirace.pytest_plugin import _Outcome

        def test_gate():
            _Outcome(judge(History.load({str(saved)!r}))).assert_score(2)
    """)
    result = pytester.runpytest()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*AssertionError: clirace score 0 < 2 for tool.yaml",
                                 "*score 0/3: level 1 needs no-silent-corruption (failed: CR111 lost-key*",
                                 "*replay: clirace check tool.yaml --seed 1*"])
    printed = result.stdout.str()
    assert "pytest_plugin.py" not in printed and "<details>" not in printed and "## clirace" not in printed
