"""Specs for real tools (docs/examples/*): what clirace says about a program nobody wrote for it."""
import shutil

import pytest

from clirace import observe

from ..conftest import ROOT, check_json


@pytest.mark.e2e
@pytest.mark.timeout(120)
@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_git_config_gets_1_for_its_unstructured_lock_error():
    # git takes ~/.gitconfig.lock with O_EXCL and renames the new file into place: nothing is lost or torn,
    # but a second writer gets "error: could not lock config file ...: File exists" and exit 255.
    result = check_json(ROOT / "docs/examples/git-config.clirace.yaml", "--seed", "3")
    statuses = {c["id"]: c["status"] for c in result["criteria"]}
    assert result["score"] == 1, statuses
    assert statuses["no-silent-corruption"] == "pass" and statuses["lock-excludes"] == "pass", statuses
    assert statuses["lock-error-structured"] == "fail", statuses
    assert statuses["atomic-config-writes"] == ("pass" if observe.available()[0] else "not_tested"), statuses
    (unstructured,) = [f for f in result["findings"] if f["code"] == "CR202"]
    (contender,) = unstructured["evidence"]["invocations"]
    assert contender["outcome"] == "exit 255", contender
    assert "could not lock config file {sandbox}/home/.gitconfig" in contender["printed"], contender
