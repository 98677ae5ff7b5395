"""Session isolation judged as isolation (issue 18): a session folder named after a hash of the id passes, a
"per-session" folder that every session shares still fails. Only the session experiment runs (and the
reference runs it is judged against)."""
import pytest

from clirace.run import observe

from ..conftest import FIXTURES, check_json

pytestmark = pytest.mark.skipif(not observe.available()[0], reason="temp paths are observed with strace")


def session_verdict(name):
    result = check_json(FIXTURES / "adversarial" / name / "clirace.yaml", "--seed", "1", "--only",
                        "session-isolation")
    return result["checks"]["session-isolation"]


@pytest.mark.timeout(120)
def test_a_folder_named_after_a_hash_of_the_id_is_a_namespace():
    verdict = session_verdict("session-hashed")
    assert verdict["status"] == "pass", verdict
    assert "by a folder or name prefix of their own that the same id wrote in again" in verdict["summary"]


@pytest.mark.timeout(120)
def test_one_hashed_folder_for_every_session_is_shared():
    verdict = session_verdict("session-hash-shared")
    assert verdict["status"] == "fail", verdict
    shared = [f for f in verdict["findings"] if f["code"] == "CR502"]
    assert shared, verdict
    assert shared[0]["args"]["path"].startswith("{sandbox}/tmp/session-hash-shared/s-"), shared[0]
