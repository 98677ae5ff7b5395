"""Specs for real tools (docs/examples/*): what clirace says about a program nobody wrote for it."""
import shutil

import pytest

from clirace.run import observe
from clirace.run.services.postgres import binaries as postgres_binaries

from ..conftest import ROOT, check_json
from .conftest import shared_group

EXAMPLES = ROOT / "docs" / "examples"
OPTIONS = ("--seed", "3")
# The examples whose whole check test_init_probe compares its probed spec's score with: that check is made once for
# both (shared_check), in one xdist worker (their group).
SHARED = ("flock-counter", "git-config", "sqlite3")


def check_example(name: str, *args: str, timeout: float = 120, shared_check=None):
    """(JSON result, {criterion: status}) of `clirace check docs/examples/NAME.clirace.yaml --seed 3 ARGS`, made
    once per session through `shared_check` when the test passes it."""
    spec = EXAMPLES / f"{name}.clirace.yaml"
    result = (shared_check(spec, *OPTIONS, *args, timeout=timeout).result if shared_check is not None
              else check_json(spec, *OPTIONS, *args, timeout=timeout))
    return result, {c["id"]: c["status"] for c in result["criteria"]}


def shared_example(name: str) -> pytest.MarkDecorator:
    return shared_group(f"examples/{name}")


# For a tool that loses keys, only the keys check runs: its corruption finding alone holds the score at 0, whatever
# the other checks would say, and the assertions read nothing else. The rest of a whole check is much of its cost
# (pip: the atomic-config kills were 36 s of an 81 s check, npm config 19 of 43 s).
KEYS_ONLY = ("--only", "keys")


@pytest.mark.e2e
@pytest.mark.timeout(120)
@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
@shared_example("git-config")
def test_git_config_gets_1_for_its_unstructured_lock_error(shared_check):
    # git takes ~/.gitconfig.lock with O_EXCL and renames the new file into place: nothing is lost or torn,
    # but a second writer gets "error: could not lock config file ...: File exists" and exit 255.
    result, statuses = check_example("git-config", shared_check=shared_check)
    assert result["score"] == 1, statuses
    assert statuses["no-silent-corruption"] == "pass" and statuses["lock-excludes"] == "pass", statuses
    assert statuses["lock-error-structured"] == "fail", statuses
    assert statuses["atomic-config-writes"] == ("pass" if observe.available()[0] else "not_tested"), statuses
    # No hook and no FIFO: strace holds a real `git config` just after it created config.lock (issue 11).
    assert statuses["lock-released-on-exit"] == ("pass" if observe.available()[0] else "not_tested"), statuses
    (unstructured,) = [f for f in result["findings"] if f["code"] == "CR202"]
    (contender,) = unstructured["evidence"]["invocations"]
    assert contender["outcome"] == "exit 255", contender
    assert "could not lock config file {sandbox}/home/.gitconfig" in contender["printed"], contender


@pytest.mark.e2e
@pytest.mark.timeout(180)
def test_pip_config_gets_0_for_lost_keys():
    # `pip config --user set` reads pip.conf at start-up and rewrites it in place at the end, with no lock:
    # parallel calls with distinct keys lose most of them.
    result, statuses = check_example("pip-config", *KEYS_ONLY, timeout=170)
    assert result["score"] == 0 and result["corruption"] is True, statuses
    assert statuses["no-silent-corruption"] == "fail" and statuses["lock-excludes"] == "not_tested", statuses
    lost = [f for f in result["findings"] if f["code"] == "CR111"]
    assert lost and all(i["outcome"] == "exit 0" for f in lost for i in f["evidence"]["invocations"]), lost


@pytest.mark.e2e
@pytest.mark.timeout(120)
@pytest.mark.skipif(shutil.which("sqlite3") is None, reason="the sqlite3 shell is not installed")
@shared_example("sqlite3")
def test_sqlite3_gets_1_with_a_lock_that_is_always_released(shared_check):
    result, statuses = check_example("sqlite3", shared_check=shared_check)
    assert result["score"] == 1, statuses
    assert statuses["no-silent-corruption"] == "pass" and statuses["lock-released-on-exit"] == "pass", statuses
    assert statuses["lock-error-structured"] == "fail" and statuses["lock-wait-timeout"] == "fail", statuses
    (waited,) = [f for f in result["findings"] if f["code"] == "CR402"]  # waited, then failed unstructured
    assert "database is locked" in waited["message"], waited


@pytest.mark.e2e
@pytest.mark.timeout(180)
@pytest.mark.skipif(shutil.which("npm") is None, reason="npm is not installed")
def test_npm_config_gets_0_for_lost_keys_in_a_sectionless_ini():
    # ~/.npmrc has no [section] and its keys hold a colon (@scope:registry): the keys that survive must be read
    # as present with their (wrapped) values, not as a torn file or stale values.
    result, _statuses = check_example("npm-config", *KEYS_ONLY, timeout=170)
    codes = {f["code"] for f in result["findings"]}
    assert result["score"] == 0 and "CR111" in codes, codes
    assert not codes & {"CR112", "CR113"}, codes


@pytest.mark.e2e
@pytest.mark.timeout(120)
@pytest.mark.skipif(shutil.which("jq") is None, reason="jq is not installed")
def test_a_jq_one_liner_through_a_fixed_temp_file_gets_0_and_the_shared_path_is_named():
    result, statuses = check_example("jq-script", *KEYS_ONLY)
    assert result["score"] == 0 and result["corruption"] is True, statuses
    assert statuses["no-silent-corruption"] == "fail", statuses
    if observe.available()[0]:
        # One fixed path, whichever round lost keys (that is a race too: a traced round may lose none)...
        assert "rewrites {sandbox}/home/settings.json.tmp in place (O_TRUNC)" in result["observed"], result["observed"]
        # ...and a traced round that lost keys says that every invocation of it wrote that path.
        traced = [f["evidence"]["observed"] for f in result["findings"] if "invocations wrote" in f["evidence"]["observed"]]
        assert all("all 8 invocations wrote {sandbox}/home/settings.json.tmp" in seen for seen in traced), traced


@pytest.mark.e2e
@pytest.mark.timeout(120)
@pytest.mark.skipif(shutil.which("flock") is None, reason="flock(1) is not installed")
@shared_example("flock-counter")
def test_a_shell_counter_under_flock_gets_1_and_its_files_are_named_from_its_own_directory(shared_check):
    result, statuses = check_example("flock-counter", shared_check=shared_check)
    assert result["score"] == 1, statuses
    assert statuses["lock-excludes"] == "pass" and statuses["lock-error-structured"] == "fail", statuses
    (waited,) = [f for f in result["findings"] if f["code"] == "CR402"]  # flock -w 1: waited, then exit 1, silent
    assert "printed nothing" in waited["message"], waited
    if observe.available()[0]:  # the script runs `cd ~` first: its files are in {sandbox}/home
        assert "locks with flock on {sandbox}/home/.counter.lock" in result["observed"], result["observed"]
        assert "replaces {sandbox}/home/counter by rename (atomic)" in result["observed"], result["observed"]


@pytest.mark.e2e
@pytest.mark.timeout(120)
@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_parallel_git_commits_lose_nothing_and_get_1_for_the_index_lock_message():
    result, statuses = check_example("git-commit")
    assert result["score"] == 1, statuses
    assert statuses["no-silent-corruption"] == "pass" and statuses["lock-excludes"] == "pass", statuses
    (unstructured,) = [f for f in result["findings"] if f["code"] == "CR202"]
    assert "Unable to create '{sandbox}/home/repo/.git/index.lock': File exists" in unstructured["message"], unstructured


@pytest.mark.e2e
@pytest.mark.timeout(120)
def test_sed_in_place_is_atomic_but_loses_updates():
    result, statuses = check_example("sed-inplace")
    assert result["score"] == 0 and statuses["no-silent-corruption"] == "fail", statuses
    assert "CR111" in {f["code"] for f in result["findings"]}
    assert statuses["atomic-config-writes"] == ("pass" if observe.available()[0] else "not_tested"), statuses


@pytest.mark.e2e
@pytest.mark.timeout(120)
@pytest.mark.skipif(shutil.which("psql") is None or None in postgres_binaries(),
                    reason="PostgreSQL (psql, initdb, postgres) is not installed: apt-get install postgresql")
def test_psql_gets_1_waiting_without_end_on_a_row_lock():
    # Established by hand: one UPDATE ... SET n = n + 1 per call loses nothing; psql waits for a locked row
    # without end, and with lock_timeout fails "canceling statement due to lock timeout", unstructured.
    result, statuses = check_example("psql-counter")
    assert result["score"] == 1, statuses
    assert statuses["no-silent-corruption"] == "pass" and statuses["lock-excludes"] == "pass", statuses
    assert statuses["lock-error-structured"] == "fail" and statuses["lock-wait-timeout"] == "fail", statuses
    assert statuses["lock-released-on-exit"] == "not_tested", statuses  # clirace holds the row itself (take)
    (timed_out,) = [f for f in result["findings"] if f["code"] == "CR402"]
    assert "canceling statement due to lock timeout" in timed_out["message"], timed_out


# Four more real tools, in four languages, their truth established by hand before the spec was written (each
# spec's header says how): Go, C, Node and C++.

@pytest.mark.e2e
@pytest.mark.timeout(240)
@pytest.mark.skipif(shutil.which("rclone") is None, reason="rclone is not installed")
def test_rclone_config_create_in_go_gets_0_for_lost_remotes():
    result, statuses = check_example("rclone-config", *KEYS_ONLY, timeout=230)
    assert result["score"] == 0 and result["corruption"] is True, statuses
    lost = [f for f in result["findings"] if f["code"] == "CR111"]
    assert lost and all(i["outcome"] == "exit 0" for f in lost for i in f["evidence"]["invocations"]), lost


@pytest.mark.e2e
@pytest.mark.timeout(240)
@pytest.mark.skipif(shutil.which("htpasswd") is None, reason="htpasswd (apache2-utils) is not installed")
def test_htpasswd_in_c_gets_0_and_loses_even_the_users_from_before_the_round():
    result, statuses = check_example("htpasswd", *KEYS_ONLY, timeout=230)
    assert result["score"] == 0 and result["corruption"] is True, statuses
    codes = {f["code"] for f in result["findings"]}
    assert "CR111" in codes, codes


@pytest.mark.e2e
@pytest.mark.timeout(300)
@pytest.mark.skipif(shutil.which("npm") is None, reason="npm is not installed")
def test_npm_pkg_set_in_node_gets_0_for_lost_fields():
    result, statuses = check_example("npm-pkg", *KEYS_ONLY, timeout=290)
    assert result["score"] == 0 and result["corruption"] is True, statuses
    assert "CR111" in {f["code"] for f in result["findings"]}


@pytest.mark.e2e
@pytest.mark.timeout(240)
@pytest.mark.skipif(shutil.which("task") is None, reason="taskwarrior is not installed")
def test_taskwarrior_in_cpp_loses_nothing_and_gets_1_for_waiting_without_end():
    # `task add` takes an fcntl lock on pending.data and waits for it without end: nothing is lost, the lock
    # excludes (the contender is blocked in its lock call), and the conflict gets no answer at all (CR207).
    result, statuses = check_example("taskwarrior", timeout=230)
    assert result["score"] == 1 and result["corruption"] is False, statuses
    assert statuses["no-silent-corruption"] == "pass" and statuses["lock-excludes"] == "pass", statuses
    assert statuses["lock-error-structured"] == "fail", statuses
    assert "CR207" in {f["code"] for f in result["findings"]}
