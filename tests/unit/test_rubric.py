"""The rubric as data: criteria combine their checks' verdicts; a level needs every lower level; corruption holds 0."""
import pytest

from clirace.checks import REGISTRY
from clirace.checks.findings import Evidence, Finding, Verdict
from clirace.verdict.rubric import UNDECIDED_HINT, combine, criteria, load_section, rules, score

from .histories import filled

SECTION = load_section("s15")
ALL_CHECKS = [c for level in SECTION["levels"] for crit in level.get("criteria", []) for c in crit["checks"]]


def _failing_code(check):
    """A code of the check that fails it: its first error, else its first corruption finding."""
    mine = {code: rule["severity"] for code, rule in rules().items() if rule.get("check") == check}
    return next((c for c, sev in mine.items() if sev == "error"), next(c for c, sev in mine.items() if sev != "advisory"))


def verdict(check, status):
    """A verdict as a check would give it: a pass names a record it read, a failure has its finding and evidence."""
    if status == "pass":
        return Verdict(check, status, "s", read=("counter: counter (round 1)",))
    if status == "fail":
        return Verdict(check, status, "s", [Finding(_failing_code(check), filled(_failing_code(check)), Evidence(trial="counter: c (round 1)"))])
    return Verdict(check, status, "s")


def verdicts(status="pass", **overrides):
    out = {c: verdict(c, status) for c in ALL_CHECKS}
    out.update({k.replace("_", "-"): verdict(k.replace("_", "-"), v) for k, v in overrides.items()})
    return out


def test_every_check_in_the_rubric_exists_and_every_check_is_used():
    assert set(ALL_CHECKS) == set(REGISTRY)


@pytest.mark.parametrize("name", ["rules.yaml", "s15.yaml", "explain.yaml"])
def test_the_rubric_reads_the_same_with_libyaml_as_with_pure_python(name):
    """catalogue.load_yaml takes libyaml's loader where PyYAML has it (start-up): the data must not change."""
    import yaml

    from clirace.checks.catalogue import load_yaml, rubric_dir
    path = rubric_dir() / name
    assert load_yaml(path) == yaml.load(path.read_text(), Loader=yaml.SafeLoader)


def test_combine_rules():
    assert combine(["pass", "not_applicable"]) == "pass"
    assert combine(["not_applicable"]) == "not_tested"
    assert combine(["pass", "not_tested"]) == "not_tested"
    assert combine(["pass", "unknown", "fail"]) == "fail"
    assert combine(["pass", "unknown"]) == "unknown"


@pytest.mark.parametrize("overrides,expected", [
    ({}, 3),
    ({"session_isolation": "not_tested"}, 2),
    ({"lock_released_on_exit": "fail"}, 1),
    ({"lock_error_structured": "unknown"}, 1),
    ({"lock_excludes": "not_tested"}, 0),
    ({"counter": "fail"}, 0),
    ({"atomic_config_writes": "fail", "lock_released_on_exit": "fail"}, 1),
])
def test_score_is_highest_level_with_all_lower_levels(overrides, expected):
    crits = criteria(SECTION, verdicts(**overrides))
    assert score(SECTION, crits).score == expected


def test_untested_workloads_mean_untested_criterion():
    crits = criteria(SECTION, verdicts(counter="not_applicable", keys="not_applicable", claim="not_applicable",
                                       output="not_applicable", hazards="not_applicable",
                                       server_hazards="not_applicable"))
    assert next(c for c in crits if c.id == "no-silent-corruption").status == "not_tested"


def test_corruption_finding_anywhere_holds_zero():
    vs = verdicts()
    vs["session-isolation"] = Verdict("session-isolation", "pass", "s", [Finding("CR131", {"label": "x", "found": "y"}, Evidence())],
                                      read=("session: with session ids (round 1)",))
    assert score(SECTION, criteria(SECTION, vs)).score == 0


def test_every_rule_has_name_severity_message_fix_and_codes_are_unique_names():
    names = [r["name"] for r in rules().values()]
    assert len(names) == len(set(names))
    for code, rule in rules().items():
        assert code.startswith("CR") and rule["severity"] in ("corruption", "error", "advisory", "info")
        assert rule["message"] and "fix" in rule


def test_a_zero_without_a_failure_does_not_claim_corruption():
    level0 = SECTION["levels"][0]["text"]
    untested = score(SECTION, criteria(SECTION, verdicts(lock_excludes="not_tested")))
    assert untested.score == 0 and untested.line != level0 and "for want of evidence" in untested.line
    assert score(SECTION, criteria(SECTION, verdicts(counter="fail"))).line == level0
    assert score(SECTION, criteria(SECTION, verdicts(lock_excludes="fail"))).line == level0


def test_a_zero_with_a_failure_above_level_one_names_it():
    line = score(SECTION, criteria(SECTION, verdicts(lock_excludes="not_tested", lock_error_structured="fail"))).line
    assert "lock-excludes" in line and "lock-error-structured failed" in line


def test_a_failed_criterion_gets_no_hint_to_add_what_the_spec_has():
    crits = criteria(SECTION, verdicts(lock_excludes="fail"))
    assert next(c for c in crits if c.id == "lock-excludes").to_test == ""


def test_checks_with_the_same_hint_give_it_once():
    same = {c: Verdict(c, "not_tested", "not run (--only)", hint="Run without --only to test it.")
            for c in ("counter", "keys", "claim", "output")}
    crits = criteria(SECTION, {**verdicts(), **same})
    assert next(c for c in crits if c.id == "no-silent-corruption").to_test == "Run without --only to test it."


def test_an_undecided_criterion_whose_check_ran_never_asks_to_add_what_the_spec_has():
    vs = verdicts()
    vs["lock-excludes"] = Verdict("lock-excludes", "unknown", "could not decide: the lock holder never held the lock")
    crit = next(c for c in criteria(SECTION, vs) if c.id == "lock-excludes")
    assert crit.to_test == UNDECIDED_HINT and "Add lock" not in crit.to_test
    vs["lock-excludes"] = Verdict("lock-excludes", "not_tested", "the contender was not excluded")
    assert next(c for c in criteria(SECTION, vs) if c.id == "lock-excludes").to_test == ""
    untouched = verdicts(lock_excludes="not_applicable")  # nothing in the spec exercised it: the rubric's hint
    assert next(c for c in criteria(SECTION, untouched) if c.id == "lock-excludes").to_test.startswith("Add lock.")


def test_the_headline_names_what_stops_the_next_level_and_the_change_that_would_move_it():
    vs = verdicts(session_isolation="not_tested")
    vs["lock-released-on-exit"] = Verdict("lock-released-on-exit", "not_tested", "released after normal; not tested: "
                                          "error", hint="Add lock.error_command or lock.hold.park.invalid_content.")
    s = score(SECTION, criteria(SECTION, vs))
    assert s.headline() == ("score 1/3: level 2 needs lock-released-on-exit (not tested: add lock.error_command or "
                            "lock.hold.park.invalid_content)")
    level1 = SECTION["levels"][1]["text"]
    assert s.level_text() == f"Level 1 in the rubric: {level1} (already met at level 2: lock-error-structured)"
    failed = verdicts()
    failed["lock-error-structured"] = Verdict("lock-error-structured", "fail", "s", [Finding(
        "CR202", {"outcome": "exit 1", "printed": "Error"}, Evidence(trial="lock-conflict: c (round 1)"))])
    assert score(SECTION, criteria(SECTION, failed)).headline().startswith(
        "score 1/3: level 2 needs lock-error-structured (failed: CR202 lock-error-unstructured; fix: print {")
    assert score(SECTION, criteria(SECTION, verdicts())).headline() == "score 3/3: every criterion passed"


def test_a_verdict_cannot_fail_without_evidence_nor_pass_without_the_records_it_read(monkeypatch):
    """Issue 25 item 6: one owner per failure, checked at construction; judge_all reports a check that tries as a
    bug in clirace (undecided, exit 3), never as the verdict it tried to give."""
    from clirace.checks.findings import VerdictWithoutEvidence
    from clirace.checks.registry import EXPERIMENTS, Experiment, judge_all

    from .histories import history

    with pytest.raises(VerdictWithoutEvidence):
        Verdict("counter", "fail", "lost updates")  # no finding
    with pytest.raises(VerdictWithoutEvidence):
        Verdict("counter", "fail", "lost updates", [Finding("CR101", filled("CR101"), Evidence())])  # a finding seen nowhere
    with pytest.raises(VerdictWithoutEvidence):
        Verdict("lock-error-structured", "fail", "s", [Finding("CR906", filled("CR906"), Evidence(trial="lock-release: x"))])  # advice
    with pytest.raises(VerdictWithoutEvidence):
        Verdict("counter", "pass", "no update lost")  # on nothing
    assert Verdict("counter", "pass", "no update lost", read=("counter: counter (round 1)",)).read

    def passes_on_nothing(h):
        return Verdict("counter", "pass", "no update lost")

    monkeypatch.setitem(EXPERIMENTS, "counter", Experiment("counter", "workloads", passes_on_nothing))
    verdict = judge_all(history())["counter"]
    assert verdict.status == "unknown" and "VerdictWithoutEvidence" in verdict.clirace_failed
