"""The reference fixtures, end to end: real processes, real races, and the score each level must get."""
import pytest

from ..conftest import FIXTURES, check_json

EXPECTED = {
    0: {"no-silent-corruption": "fail", "lock-excludes": "fail", "lock-error-structured": "fail",
        "lock-released-on-exit": "not_tested", "atomic-config-writes": "fail"},
    1: {"no-silent-corruption": "pass", "lock-excludes": "pass", "lock-error-structured": "fail",
        "lock-released-on-exit": "fail", "atomic-config-writes": "fail"},
    2: {"no-silent-corruption": "pass", "lock-excludes": "pass", "lock-error-structured": "pass",
        "lock-released-on-exit": "pass", "session-isolation": "not_tested", "atomic-config-writes": "fail",
        "lock-wait-timeout": "not_tested"},
    3: {"no-silent-corruption": "pass", "lock-excludes": "pass", "lock-error-structured": "pass",
        "lock-released-on-exit": "pass", "session-isolation": "pass", "atomic-config-writes": "pass",
        "lock-wait-timeout": "pass"},
}


@pytest.mark.e2e
@pytest.mark.timeout(180)
@pytest.mark.parametrize("level", sorted(EXPECTED))
def test_reference_fixture_gets_its_level(level):
    result = check_json(FIXTURES / f"level{level}" / "clirace.yaml", "--seed", "7")
    statuses = {c["id"]: c["status"] for c in result["criteria"]}
    assert result["score"] == level, statuses
    for criterion, status in EXPECTED[level].items():
        assert statuses[criterion] == status, (criterion, result["criteria"])
    for c in result["criteria"]:
        assert c["evidence"], c
        if c["status"] == "not_tested":
            assert c["to_test"], c
    for finding in result["findings"]:
        assert finding["evidence"]["replay"].startswith("clirace check ")
        if finding["severity"] != "info":
            assert finding["evidence"]["trial"]
