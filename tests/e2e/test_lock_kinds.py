"""Every lock a tool can take, seen and held (issue 23, items 3 and 4), on real fixture tools: a link(2) lock file
held by `take: {kind: link}`, SQLite's write lock held by `take: {kind: sqlite-write}`, locks kept in Redis and
PostgreSQL known to the hazards, and a lock at a fixed path shared by every session."""
import shutil

import pytest

from clirace.run.services.postgres import binaries

from ..conftest import FIXTURES, check_json

LOCKS = FIXTURES / "locks"
LOCK_CRITERIA = ("lock-excludes", "lock-error-structured", "lock-released-on-exit", "lock-wait-timeout")


def statuses(result):
    return {c["id"]: c["status"] for c in result["criteria"]}


@pytest.mark.timeout(400)
def test_a_link_lock_is_seen_held_and_every_lock_criterion_decided():
    result = check_json(LOCKS / "dotlock" / "clirace.yaml", "--seed", "1", timeout=380)
    found = statuses(result)
    assert all(found[c] == "pass" for c in LOCK_CRITERIA), [(c["id"], c["status"], c["evidence"])
                                                             for c in result["criteria"]]
    assert result["score"] == 3, found
    assert "locks with lock file made by link(2): {sandbox}/home/.local/state/dotlock/config.lock" in \
        result["observed"], result["observed"]


@pytest.mark.timeout(300)
@pytest.mark.parametrize("spec", ["clirace.yaml", "helper.yaml"], ids=["take-sqlite-write", "hold-run-helper"])
def test_a_sqlite_tool_that_exits_0_on_a_busy_write_lock_scores_0_with_corruption_through_the_write_lock_holder(spec):
    """Held by clirace (take sqlite-write) or by a helper program that is not the tool (hold.run)."""
    result = check_json(LOCKS / "sqlite-busy" / spec, "--seed", "1", timeout=280)
    corruption = [f for f in result["findings"] if f["severity"] == "corruption"]
    assert result["score"] == 0 and {f["code"] for f in corruption} == {"CR209"}, result["findings"]
    assert "database is locked" in corruption[0]["evidence"]["invocations"][0]["printed"]
    if spec == "helper.yaml":
        release = next(c for c in result["criteria"] if c["id"] == "lock-released-on-exit")
        assert release["status"] == "not_tested", release


@pytest.mark.timeout(400)
def test_a_lock_at_a_fixed_path_shared_by_every_session_fails_session_isolation_and_is_named(tmp_path):
    fixed = tmp_path / "tool.lock"  # the fixed path: the same for every session and state home, and the test's own
    spec = (LOCKS / "dotlock" / "fixed-lock.yaml").read_text().replace("/tmp/dotlock-fixed.lock", str(fixed)) \
        .replace("{spec_dir}/tool.py", str(LOCKS / "dotlock" / "tool.py"))
    (tmp_path / "fixed-lock.yaml").write_text(spec)
    # Only the session experiment: it alone decides what is asserted (session-isolation failing holds the score
    # under 3, as test_adversarial's session-id-ignored shows live for a whole check). The whole check was 11.4 s
    # of CPU and 54 s of wall at load 18, this one 2.6 s and 5.5 s.
    result = check_json(tmp_path / "fixed-lock.yaml", "--seed", "1", "--allow-outside-sandbox",
                        "--only", "session-isolation", timeout=380)
    # (No assertion on the score: with --only the criteria not run hold it at 0 whatever this one says.)
    session = next(c for c in result["criteria"] if c["id"] == "session-isolation")
    assert session["status"] == "fail" and "tool.lock" in session["evidence"], session
    (named,) = [f for f in result["findings"] if f["code"] == "CR506"]
    assert named["args"]["path"].endswith("/tool.lock") and named["args"]["how"] == "locked", named


@pytest.mark.timeout(400)
@pytest.mark.parametrize("spec", [
    pytest.param("redis.clirace.yaml", marks=pytest.mark.skipif(shutil.which("redis-server") is None,
                                                                reason="redis-server is not installed")),
    pytest.param("postgres.clirace.yaml", marks=pytest.mark.skipif(None in binaries(),
                                                                   reason="PostgreSQL is not installed")),
])
def test_a_tool_locked_in_a_server_is_never_told_it_took_no_lock(spec):
    result = check_json(FIXTURES / "servers" / "server-locked-file" / spec, "--seed", "1", timeout=380)
    codes = {f["code"] for f in result["findings"]}
    assert not {"CR701", "CR702", "CR712"} & codes, result["findings"]
    assert not [f for f in result["findings"] if f["severity"] == "corruption"]
    assert statuses(result)["lock-excludes"] == "pass"
