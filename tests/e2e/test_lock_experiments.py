"""The lock experiments on tools a naive harness misreads (issue 18): a lock that outlives its command, a contender
that answers a busy lock with success and does nothing, a lock taken over while held, a contender that asks, and a
tool that locks its own config's fd. Each runs only what decides its case (--only, one round, without strace where
the case does not need it), within a CI budget of about a minute for the file. A case asserting a score runs the
checks of every criterion that score reads (tests/e2e/conftest.py's only_up_to), none of the levels above."""
import pytest

from ..conftest import FIXTURES, check_json
from .conftest import only_up_to, shared_group

ADVERSARIAL = FIXTURES / "adversarial"
FAST = ("--seed", "1", "--rounds", "1")


def _statuses(result):
    return {c["id"]: c["status"] for c in result["criteria"]}


def _codes(result, check):
    return [f["code"] for f in result["checks"][check]["findings"]]


@pytest.mark.timeout(120)
def test_a_lock_left_to_a_background_child_is_a_finding_with_its_holder_named_not_a_spec_error():
    result = check_json(ADVERSARIAL / "lock-outlives-command" / "clirace.yaml", *FAST, "--no-strace",
                        *only_up_to(1, "lock-released-on-exit"))
    statuses = _statuses(result)
    assert result["score"] == 1, statuses
    assert statuses["lock-released-on-exit"] == "fail" and statuses["lock-excludes"] == "pass", statuses
    outlived = [f for f in result["findings"] if f["code"] == "CR306"]
    assert outlived, result["checks"]["lock-released-on-exit"]
    said = outlived[0]["message"]
    assert "a process it left running (pid " in said and ", parent " in said and "running " in said
    assert "FLOCK WRITE {sandbox}/home/.local/state/lock-outlives-command/lock" in said
    assert any(inv["label"].startswith("refused-") and "LOCK_HELD" in inv["printed"]
               for inv in outlived[0]["evidence"]["invocations"])


@pytest.mark.timeout(60)
def test_a_contender_answering_a_busy_lock_with_success_and_no_effect_is_silent_loss():
    result = check_json(ADVERSARIAL / "lock-silent-noop" / "clirace.yaml", *FAST, "--only", "lock-excludes")
    assert result["corruption"] and result["score"] == 0
    assert _codes(result, "lock-excludes") == ["CR209"]
    (loss,) = result["checks"]["lock-excludes"]["findings"]
    assert loss["message"].startswith("contender exited 0 while the lock was held, but what it wrote was not there")
    assert "LOCK_HELD" in loss["fix"] and "exclusive lock before reading" not in loss["fix"]


@pytest.mark.timeout(60)
def test_a_lock_taken_over_while_held_fails_lock_excludes_with_the_lost_write():
    result = check_json(ADVERSARIAL / "lock-stealer" / "clirace.yaml", *FAST, "--only", "lock-excludes",
                        "--only", "lock-wait-timeout")
    assert _statuses(result)["lock-excludes"] == "fail" and result["corruption"]
    losses = [f for f in result["checks"]["lock-excludes"]["findings"] if f["code"] == "CR209"]
    assert losses, result["checks"]["lock-excludes"]
    assert "is missing" in losses[0]["message"]
    labels = [inv["label"] for inv in losses[0]["evidence"]["invocations"]]
    assert "holder" in labels and "exit 0" in [inv["outcome"] for inv in losses[0]["evidence"]["invocations"]][0]


@pytest.mark.timeout(60)
def test_a_contender_that_asks_on_a_lock_conflict_is_caught_with_stdin_an_open_pipe():
    result = check_json(ADVERSARIAL / "prompt-on-lock" / "clirace.yaml", *FAST, "--only", "lock-excludes",
                        "--only", "lock-error-structured")
    statuses = _statuses(result)
    assert statuses["lock-excludes"] == "pass" and statuses["lock-error-structured"] == "fail", statuses
    (asks,) = result["checks"]["lock-error-structured"]["findings"]
    assert asks["code"] == "CR210" and "lock held, overwrite? [y/N]" in asks["message"]


# The options of lock-own-config's checks; test_evidence reads the take spec's run too (shared_check: one live run).
OWN_CONFIG_OPTIONS = (*FAST, "--no-strace", *only_up_to(1, "lock-error-structured"))


@pytest.mark.timeout(120)
@pytest.mark.parametrize("spec", ["clirace.yaml", pytest.param("take.clirace.yaml", marks=shared_group("lock-own-config/take"))],
                         ids=["park", "take"])
def test_a_tool_locking_its_own_config_scores_1_with_park_as_with_take(spec, shared_check):
    result = shared_check(FIXTURES / "lock-own-config" / spec, *OWN_CONFIG_OPTIONS, timeout=115).result
    statuses = _statuses(result)
    assert result["score"] == 1 and statuses["lock-excludes"] == "pass", statuses
    assert _codes(result, "lock-error-structured") == ["CR207"]
    assert "CR201" not in [f["code"] for f in result["findings"]]


UNPROVEN = ADVERSARIAL / "lock-unproven"
LOCK_CRITERIA = ("lock-excludes", "lock-error-structured", "lock-released-on-exit", "lock-wait-timeout")


@pytest.mark.timeout(60)
def test_a_holder_that_quits_early_leaves_every_lock_criterion_undecided_never_failed():
    """Issue 25 item 7: the hook quits as soon as it is ready; the contender then runs with the lock free."""
    result = check_json(UNPROVEN / "quits.clirace.yaml", *FAST, "--no-strace")
    statuses = {check: result["checks"][check]["status"] for check in LOCK_CRITERIA}
    assert "fail" not in statuses.values() and "pass" not in statuses.values(), statuses
    assert statuses["lock-error-structured"] == statuses["lock-wait-timeout"] == "unknown", statuses
    assert not [f for check in LOCK_CRITERIA for f in result["checks"][check]["findings"]], result["checks"]


@pytest.mark.timeout(120)
def test_a_contender_that_stops_itself_even_alone_leaves_lock_release_undecided_not_failed():
    """Issue 25 item 7: each way's next invocation is the contender, which SIGSTOPs itself even alone."""
    result = check_json(UNPROVEN / "stops.clirace.yaml", *FAST, "--no-strace", "--only", "lock-released-on-exit")
    verdict = result["checks"]["lock-released-on-exit"]
    assert verdict["status"] == "unknown", verdict
    assert "lock.contender run alone on fresh state" in verdict["summary"] and "killed at its deadline" in \
        verdict["summary"], verdict["summary"]
    assert not [f for f in verdict["findings"] if f["severity"] not in ("advisory", "info")], verdict["findings"]


@pytest.mark.timeout(240)
def test_a_lock_leaked_by_every_change_is_a_finding_even_when_a_serial_add_or_read_meets_it_first():
    # The claim workload's serial adds run one after another outside the round: each leaves the lock held, and the
    # next add was refused; that was called the spec's misfit (exit 2), which no spec can avoid.
    result = check_json(ADVERSARIAL / "lock-outlives-every-command" / "clirace.yaml", *FAST, "--no-strace",
                        *only_up_to(1, "lock-released-on-exit"), timeout=220)
    statuses = _statuses(result)
    assert result["score"] == 1 and not result["corruption"], statuses
    assert statuses["lock-released-on-exit"] == "fail", statuses
    assert any(f["code"] == "CR306" for f in result["findings"])


@pytest.mark.timeout(90)
def test_a_contender_with_no_key_of_its_own_whose_change_the_holder_undid_is_silent_loss():
    # `config unset theme` skips the lock: it exits 0 while the lock is held, and the holder writes theme back.
    result = check_json(ADVERSARIAL / "unset-skips-lock" / "clirace.yaml", *FAST, "--only", "lock-excludes")
    assert result["corruption"] and result["score"] == 0
    (loss,) = [f for f in result["checks"]["lock-excludes"]["findings"] if f["code"] == "CR209"]
    assert "theme holds" in loss["message"]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("strace", [(), ("--no-strace",)], ids=["traced", "proc-only"])
def test_a_contender_that_sleeps_its_lock_wait_and_prints_lock_held_is_undecided_never_passed(strace):
    """Issue 25 item 1: its answer and its timing are a real lock wait's, but it slept instead of waiting."""
    result = check_json(ADVERSARIAL / "lock-wait-sleeps" / "clirace.yaml", *FAST, *strace, "--only", "lock-wait-timeout")
    verdict = result["checks"]["lock-wait-timeout"]
    assert verdict["status"] == "unknown", verdict
    assert "nothing showed it blocked on the held lock" in verdict["summary"], verdict["summary"]
    assert "LOCK_HELD" in verdict["summary"] and not verdict["findings"], verdict


@pytest.mark.timeout(120)
@pytest.mark.parametrize("strace,seen", [((), "its trace shows"), (("--no-strace",), "woke")],
                         ids=["traced", "proc-only"])
def test_a_contender_polling_the_held_lock_through_its_wait_passes_lock_wait_timeout_on_that_evidence(strace, seen):
    result = check_json(FIXTURES / "level3" / "clirace.yaml", *FAST, *strace, "--only", "lock-wait-timeout")
    verdict = result["checks"]["lock-wait-timeout"]
    assert verdict["status"] == "pass", verdict
    assert "retrying the lock" in verdict["summary"] and seen in verdict["summary"], verdict["summary"]
