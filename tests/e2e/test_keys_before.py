"""Keys that existed before the round (issue 18): a store that wipes every key when it reads its file during
another's rewrite gets a corruption finding naming them, whether the keys are read back from the config file
or one by one with a get command (fixtures/keys-before; its test hook makes the wipe happen in every round)."""
import pytest

from ..conftest import FIXTURES, check_json

SPECS = FIXTURES / "keys-before"


def wiped(spec):
    result = check_json(SPECS / spec, "--seed", "1", "--only", "keys")
    verdict = result["checks"]["keys"]
    assert result["score"] == 0 and result["corruption"], verdict
    return {f["evidence"]["trial"]: f["args"]["keys"] for f in verdict["findings"] if f["code"] == "CR114"}


@pytest.mark.timeout(120)
def test_the_setup_keys_and_the_key_written_before_the_round_are_named_from_the_config_file():
    found = wiped("clirace.yaml")
    first, second = (found[trial] for trial in sorted(found))  # round 1, round 2 (amplified where strace runs)
    assert first == "editor, theme" and second == "cliracek4, editor, theme"


@pytest.mark.timeout(120)
def test_the_key_written_before_the_round_is_read_back_with_the_get_command():
    assert list(wiped("read.clirace.yaml").values()) == ["cliracek4"]
