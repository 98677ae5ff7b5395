"""The CI gate and the baseline comparison, on literal histories: corruption fails the gate by default, every
format says so, and a fix is compared with the run that found the bug, with the bound that makes "fixed"
believable. The CLI runs in-process (judge and diff launch nothing)."""
import json
import sys
import xml.etree.ElementTree as ET

import pytest

from clirace import cli
from clirace.cli.pipeline import judge, snapshot_of
from clirace.history import ConfigSnapshot, KeysRound, LockConflict
from clirace.history.vocab import ConfigFormat, EventKind
from clirace.verdict import baseline, gate

from .histories import event, history, inv, saveable


def keys_round(lost: bool, round_: int = 0) -> KeysRound:
    keys = {f"set-{i}": (f"k{i}", f"v{i}") for i in range(2)}
    text = '{"k0": "v0"}' if lost else '{"k0": "v0", "k1": "v1"}'
    return KeysRound(round=round_, invocations=(inv("set-0"), inv("set-1")), keys=keys,
                     config=ConfigSnapshot("c", ConfigFormat.JSON, "{key}", text))


def keys_history(lost_in: int, rounds: int):
    return history(*(keys_round(n < lost_in, n) for n in range(rounds)))


@pytest.fixture
def saved(tmp_path):
    def save(name, h):
        path = tmp_path / f"{name}.history.json"
        saveable(h).save(path)
        return path
    return save


def run_main(monkeypatch, capsys, *args):
    monkeypatch.setattr(sys, "argv", ["clirace", *map(str, args)])
    with pytest.raises(SystemExit) as stop:
        cli.main()
    out, err = capsys.readouterr()
    return stop.value.code, out, err


def test_corruption_fails_the_gate_without_any_option_and_exit_zero_only_stops_enforcing_it():
    result = judge(keys_history(1, 3))
    assert result.score.score == 0
    failing = gate.evaluate(result)
    assert not failing.passed and failing.exit_code == 1 and "CR111 lost-key" in failing.why
    relaxed = gate.evaluate(result, exit_zero=True)
    assert not relaxed.passed and not relaxed.enforced and relaxed.exit_code == 0
    clean = judge(keys_history(0, 3))
    assert gate.evaluate(clean).passed
    below = gate.evaluate(clean, min_score=2)
    assert not below.passed and "below --min-score 2" in below.why


def lock_only_history():
    """A spec with only a lock section: the contender refused while the lock was held, nothing else run."""
    contender = inv("contender", 1, stdout='{"ok": false, "error": {"code": "LOCK_HELD", "retry_after_ms": 50}}')
    return history(LockConflict(invocations=(contender,), events=(event(EventKind.HELD, 0.0),), prompt=5.0))


def test_a_run_that_never_decided_no_silent_corruption_says_so_and_fails_the_gate_unless_allowed():
    result = judge(lock_only_history())
    undecided = gate.evaluate(result)
    assert not undecided.passed and undecided.exit_code == 1, undecided
    assert "no-silent-corruption was not tested, so silent corruption was not ruled out" in undecided.line()
    allowed = gate.evaluate(result, allow_undecided=True)
    assert allowed.passed and allowed.exit_code == 0 and "not ruled out" in allowed.why, allowed
    assert "no silent corruption" not in allowed.why  # never claimed
    assert gate.evaluate(result, exit_zero=True).exit_code == 0


def test_the_command_line_gate_fails_on_an_undecided_criterion_and_allow_undecided_lets_it_pass(
        monkeypatch, capsys, saved):
    path = saved("lock-only", lock_only_history())
    code, out, _ = run_main(monkeypatch, capsys, "judge", path)
    assert code == 1 and "clirace gate failed: no-silent-corruption was not tested" in out, out
    code, out, _ = run_main(monkeypatch, capsys, "judge", path, "--allow-undecided")
    assert code == 0 and "clirace gate passed: no-silent-corruption was not tested" in out, out


def test_every_format_shows_a_failed_gate(monkeypatch, capsys, saved, tmp_path):
    path = saved("lost", keys_history(1, 3))
    code, out, _ = run_main(monkeypatch, capsys, "judge", path, "--format", "github",
                            "--report", f"junit={tmp_path}/r.xml", "--report", f"markdown={tmp_path}/r.md",
                            "--report", f"text={tmp_path}/r.txt", "--report", f"json={tmp_path}/r.json")
    assert code == 1
    assert any(line.startswith("::error ") and "title=clirace gate" in line and "CR111" in line
               for line in out.splitlines())
    suite = ET.parse(tmp_path / "r.xml").getroot().find("testsuite")
    gate_case = next(c for c in suite.findall("testcase") if c.get("name") == "gate")
    assert gate_case.find("failure") is not None and int(suite.get("failures")) >= 1
    assert (tmp_path / "r.md").read_text().splitlines()[0].endswith("gate ❌ failed")
    assert (tmp_path / "r.txt").read_text().startswith("clirace gate failed: silent corruption was found (CR111")
    data = json.loads((tmp_path / "r.json").read_text())
    assert data["gate"] == {"threshold": 0, "passed": False, "enforced": True,
                            "why": "silent corruption was found (CR111 lost-key)"}
    code, out, _ = run_main(monkeypatch, capsys, "judge", path, "--format", "github", "--exit-zero")
    assert code == 0 and any(line.startswith("::warning ") and "not enforced" in line for line in out.splitlines())


def test_rounds_for_a_confidence_and_a_rate():
    assert baseline.rounds_for(0.99, 0.1) == 44
    assert baseline.rounds_for(0.75, 0.5) == 2  # exactly 2, not 3 from rounding
    assert baseline.rounds_for(0.99, 0.32) == 12
    for bad in ((1.0, 0.1), (0.99, 0.0), (0.999999, 0.000001)):
        with pytest.raises(baseline.UsageError):
            baseline.rounds_for(*bad)


def test_a_fix_is_fixed_with_its_bound_and_swapping_the_runs_is_a_regression():
    before = snapshot_of(judge(keys_history(3, 3)), "before.json")
    after = snapshot_of(judge(keys_history(0, 12)), "after.json")
    fixed = baseline.compare(before, after)
    cr111 = next(c for c in fixed.changes if c.subject == "CR111")
    assert cr111.status == "fixed" and not cr111.regression
    assert cr111.detail == ("failed 3 of 3 rounds before; 0 of 12 now: a race showing in 32% of rounds or more "
                            "would have shown with probability >= 99%")
    assert next(c for c in fixed.changes if c.subject == "no-silent-corruption").status == "fixed"
    assert fixed.regressions() == []
    worse = baseline.compare(after, before)
    assert next(c for c in worse.changes if c.subject == "CR111").status == "new"
    assert any(r.startswith("CR111 lost-key") for r in worse.regressions())
    assert any(r.startswith("no-silent-corruption") for r in worse.regressions())  # pass -> fail


def test_a_finding_gone_because_its_check_did_not_decide_is_undecided_not_fixed():
    before = snapshot_of(judge(keys_history(1, 3)))
    after = snapshot_of(judge(history()))  # the keys workload did not run at all
    change = next(c for c in baseline.compare(before, after).changes if c.subject == "CR111")
    assert change.status == "undecided" and "did not decide" in change.detail


def unparseable_round(round_: int = 0) -> KeysRound:
    return KeysRound(round=round_, invocations=(inv("set-0"), inv("set-1")),
                     keys={f"set-{i}": (f"k{i}", f"v{i}") for i in range(2)},
                     config=ConfigSnapshot("c", ConfigFormat.JSON, "{key}", '{"k0": "v0", "k1'))


def test_a_code_the_check_never_examined_is_undecided_in_the_diff_not_fixed(monkeypatch, capsys, saved):
    torn = judge(history(*(unparseable_round(n) for n in range(3))))
    keys = torn.verdicts["keys"]
    assert [f.code for f in keys.findings] == ["CR113"] * 3 and set(keys.unexamined) == {"CR111", "CR112", "CR114"}
    lost, clean = snapshot_of(judge(keys_history(3, 3))), snapshot_of(judge(keys_history(0, 3)))
    for old in (lost, clean):
        change = next(c for c in baseline.compare(old, snapshot_of(torn)).changes if c.subject == "CR111")
        assert change.status == "undecided" and "did not examine it" in change.detail, change
    code, out, _ = run_main(monkeypatch, capsys, "diff", saved("clean", keys_history(0, 3)),
                            saved("torn", history(*(unparseable_round(n) for n in range(3)))))
    assert any(line.split()[:2] == ["undecided", "CR111"] for line in out.splitlines()), out


def test_a_round_that_could_not_race_counts_in_no_bound_and_the_pass_says_so():
    alone = KeysRound(round=3, invocations=(inv("set-0"), inv("set-1", 1)), keys={"set-0": ("k0", "v0"),
                      "set-1": ("k1", "v1")}, config=ConfigSnapshot("c", ConfigFormat.JSON, "{key}", '{"k0": "v0"}'))
    one_after_another = KeysRound(round=4, invocations=(inv("set-0"), inv("set-1", started=0.1, ended=0.2)),
                                  keys={f"set-{i}": (f"k{i}", f"v{i}") for i in range(2)},
                                  config=ConfigSnapshot("c", ConfigFormat.JSON, "{key}", '{"k0": "v0", "k1": "v1"}'))
    keys = judge(history(*(keys_round(False, n) for n in range(3)), alone, one_after_another)).verdicts["keys"]
    assert keys.status == "pass" and keys.rates["rounds"] == 5 and keys.rates["racing_rounds"] == 3, keys.rates
    assert keys.rates["bound"] == baseline.detection_bound(3, 0)
    assert "2 of 5 rounds could not race" in keys.summary and "1 invocation(s) exited 0" in keys.summary, keys.summary
    before = snapshot_of(judge(keys_history(3, 3)))
    after = snapshot_of(judge(history(alone, one_after_another)))
    change = next(c for c in baseline.compare(before, after).changes if c.subject == "CR111")
    assert change.status == "undecided" and "0 of 2 now, 0 of which raced" in change.detail, change


def test_diff_on_saved_histories_and_results(monkeypatch, capsys, saved, tmp_path):
    old, new = saved("old", keys_history(3, 3)), saved("new", keys_history(0, 12))
    code, out, _ = run_main(monkeypatch, capsys, "diff", old, new)
    assert code == 0 and "fixed     CR111 lost-key failed 3 of 3 rounds before; 0 of 12 now" in out
    code, out, _ = run_main(monkeypatch, capsys, "judge", old, "--format", "json", "-o", tmp_path / "old.json")
    assert code == 1
    code, out, _ = run_main(monkeypatch, capsys, "diff", new, tmp_path / "old.json", "--format", "json")
    data = json.loads(out)
    assert code == 1 and data["regression"] and {"id": "CR111", "name": "lost-key", "status": "new",
                                                 "detail": "not seen before", "regression": True} in data["findings"]
    code, out, _ = run_main(monkeypatch, capsys, "diff", new, tmp_path / "old.json", "--format", "github")
    assert code == 1 and out.startswith("::error ") and "title=clirace regression" in out


def test_judge_with_a_baseline_fails_the_gate_on_a_regression_only(monkeypatch, capsys, saved):
    old, new = saved("old", keys_history(3, 3)), saved("new", keys_history(0, 12))
    code, out, _ = run_main(monkeypatch, capsys, "judge", new, "--baseline", old, "--format", "json")
    data = json.loads(out)
    assert code == 0 and data["gate"]["passed"] and data["baseline"]["findings"][0]["status"] == "fixed"
    code, out, _ = run_main(monkeypatch, capsys, "judge", new, "--baseline", old)
    assert "Compared with" in out and "fixed" in out


def test_a_baseline_that_is_not_a_result_is_a_usage_error(monkeypatch, capsys, saved, tmp_path):
    bogus = tmp_path / "bogus.json"
    bogus.write_text('{"hello": 1}')
    code, _, err = run_main(monkeypatch, capsys, "diff", bogus, saved("new", keys_history(0, 3)))
    assert code == 2 and "bogus.json: not a clirace JSON result" in err and "Traceback" not in err
