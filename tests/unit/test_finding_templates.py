"""A finding is checked against the rule catalogue when it is made: an unknown or removed code, or arguments
that its message template cannot be formatted with, fail at construction (in a check's test), not when a
report renders. Every code has a lifecycle."""
import pytest

from clirace.checks.catalogue import LIFECYCLES, lifecycle, rules, template_fields
from clirace.checks.findings import Finding


def test_a_finding_missing_an_argument_of_its_template_fails_when_it_is_made():
    with pytest.raises(ValueError, match="CR101 lacks final, ok, start, target"):
        Finding("CR101", {"lost": 1})


def test_a_finding_with_a_code_the_catalogue_lacks_fails_when_it_is_made():
    with pytest.raises(ValueError, match="CR999 is not in the rule catalogue"):
        Finding("CR999", {})


def test_a_finding_with_a_removed_code_fails_when_it_is_made(monkeypatch):
    retired = {**rules()["CR101"], "retired": True}
    monkeypatch.setitem(rules(), "CR101", retired)
    with pytest.raises(ValueError, match="CR101 was removed"):
        Finding("CR101", {"lost": 1, "ok": 2, "start": 0, "final": 1, "target": 2})


def test_a_finding_with_its_template_s_arguments_renders_its_message():
    finding = Finding("CR101", {"lost": 1, "ok": 2, "start": 0, "final": 1, "target": 2, "extra": "kept"})
    assert finding.message().startswith("lost 1 of 2 increments")


@pytest.mark.parametrize("code", sorted(rules()))
def test_every_code_has_a_lifecycle_and_a_template_that_formats_with_its_own_fields(code):
    assert lifecycle(code) in LIFECYCLES
    rules()[code]["message"].format(**{name: "x" for name in template_fields(code)})
