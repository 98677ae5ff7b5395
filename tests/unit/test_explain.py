"""Every finding code is explained (rubric/explain.yaml), and `clirace checks` reads well in a narrow terminal."""
import os

import pytest

from clirace.report.explain import FIELDS, as_text, explanations
from clirace.verdict.rubric import rules

from ..conftest import run_clirace


@pytest.mark.parametrize("code", sorted(rules()))
def test_every_code_has_meaning_reason_fix_and_example(code):
    entry = explanations().get(code)
    assert entry, f"{code} is missing from rubric/explain.yaml"
    for field in FIELDS:
        assert str(entry.get(field) or "").strip(), f"{code}: empty {field}"
    text = as_text(code, width=60)
    for title in ("What it means:", "Why it matters to an agent:", "How to fix it:", "Before:", "After:"):
        assert title in text


def test_explain_knows_only_catalogue_codes():
    assert set(explanations()) <= set(rules())


def test_explain_on_the_command_line():
    proc = run_clirace("explain", "cr202")
    assert proc.returncode == 0 and proc.stdout.startswith("CR202 lock-error-unstructured")
    proc = run_clirace("explain", "CR999")
    assert proc.returncode == 2 and "clirace checks" in proc.stderr


def test_checks_wraps_to_the_terminal_and_never_prints_an_empty_fix():
    proc = run_clirace("checks", env={**os.environ, "COLUMNS": "60"})
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert max(map(len, lines)) <= 60
    for code, rule in rules().items():
        head = next(i for i, line in enumerate(lines) if line.startswith(f"  {code}  "))
        body = []
        for line in lines[head + 1:]:
            if not line.startswith("        "):
                break
            body.append(line.strip())
        text = " ".join(body)
        assert text.startswith(f"from check {rule['check']}"), code  # the check that emits it, then its fix
        assert (len(text) > len(f"from check {rule['check']}")) == bool(rule.get("fix")), code
