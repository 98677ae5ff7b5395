"""The maintainer's loop on a real tool (fixtures/loop): CI fails on the unlocked version with no option, the
fixed version's headline names what stops level 2, and its run compared with the unlocked one lists CR111 as
fixed with its bound; the other way round, CR111 is new and the gate fails. Issue 16's "done when"."""
import json
import xml.etree.ElementTree as ET

import pytest

from clirace.checks._common import detection_bound
from clirace.verdict import baseline

from ..conftest import FIXTURES, run_clirace

LOOP = FIXTURES / "loop"


@pytest.mark.timeout(240)
def test_unlocked_fails_the_gate_and_the_fix_is_proven_against_it(tmp_path):
    unlocked = run_clirace("check", LOOP / "unlocked.clirace.yaml", "--seed", "5", "--format", "github",
                           "--report", f"json={tmp_path}/unlocked.json", "--report", f"junit={tmp_path}/unlocked.xml",
                           "--history", tmp_path / "unlocked.history.json", timeout=180)
    assert unlocked.returncode == 1, unlocked.stderr  # no option asked for a gate: corruption alone fails it
    gate = [line for line in unlocked.stdout.splitlines() if "title=clirace gate" in line]
    assert len(gate) == 1 and gate[0].startswith("::error ") and "CR111 lost-key" in gate[0]
    suite = ET.parse(tmp_path / "unlocked.xml").getroot().find("testsuite")
    case = next(c for c in suite.findall("testcase") if c.get("name") == "gate")
    assert "silent corruption" in case.find("failure").get("message")

    fixed = run_clirace("check", LOOP / "fixed.clirace.yaml", "--seed", "5", "--baseline", tmp_path / "unlocked.json",
                        "--format", "json", "--report", f"json={tmp_path}/fixed.json", timeout=180)
    assert fixed.returncode == 0, fixed.stderr
    result = json.loads(fixed.stdout)
    assert result["score"] == 1 and result["gate"]["passed"]
    assert result["headline"].startswith("score 1/3: level 2 needs lock-released-on-exit (not tested: add "
                                         "lock.error_command"), result["headline"]
    assert "lock.hold.park.invalid_content" in result["headline"]
    cr111 = next(f for f in result["baseline"]["findings"] if f["id"] == "CR111")
    # The bound counts only the rounds that raced (issue 25): the keys summary says why any other could not.
    racing = result["checks"]["keys"]["rates"]["racing_rounds"]
    assert cr111["status"] == "fixed" and cr111["detail"].startswith("failed 3 of 3 rounds before; 0 of 3 now"), cr111
    bound = baseline.percent(detection_bound(racing, 0))
    assert f"a race showing in {bound} of rounds or more" in cr111["detail"], (cr111, result["checks"]["keys"])

    swapped = run_clirace("judge", tmp_path / "unlocked.history.json", "--baseline", tmp_path / "fixed.json",
                          "--format", "json")
    assert swapped.returncode == 1
    back = json.loads(swapped.stdout)
    assert next(f for f in back["baseline"]["findings"] if f["id"] == "CR111")["status"] == "new"
    assert "regression" in back["gate"]["why"]
    diff = run_clirace("diff", tmp_path / "fixed.json", tmp_path / "unlocked.json")
    assert diff.returncode == 1 and "new       CR111 lost-key not seen before (a regression)" in diff.stdout
