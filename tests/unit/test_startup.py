"""Start-up: what `clirace --help`, `validate` and `explain` import (docs/benchmarks.md, Start-up). A time would
depend on the machine's load; the modules a command loads do not, and they are what its start-up costs."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# Run the console entry point in a fresh interpreter, then list what it imported.
PROBE = """
import contextlib, io, json, sys
sys.argv = ["clirace", *sys.argv[1:]]
from clirace.cli import main
with contextlib.redirect_stdout(io.StringIO()):
    try:
        main()
    except SystemExit as exc:
        code = exc.code
print(json.dumps({"code": code, "modules": sorted(sys.modules)}))
"""


def imported(*args: str, status: int = 0) -> set[str]:
    proc = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["code"] == status, proc.stderr
    return set(result["modules"])


def loaded(modules: set[str], packages: set[str]) -> list[str]:
    return sorted(m for m in modules if any(m == p or m.startswith(p + ".") for p in packages))


def test_help_loads_neither_the_pipeline_nor_the_libraries_a_command_needs():
    modules = imported("--help")
    assert loaded(modules, {"clirace"}) == ["clirace", "clirace.cli", "clirace.cli._checking", "clirace.cli._outputs",
                                             "clirace.errors"]
    assert loaded(modules, {"yaml", "jsonschema", "rich", "pydantic", "secrets", "tempfile"}) == []


def test_importing_the_package_loads_nothing_else_and_still_has_its_version():
    code = ("import json, sys, clirace; before = sorted(m for m in sys.modules if m.startswith('clirace'));"
            "print(json.dumps([before, clirace.__version__]))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    before, version = json.loads(proc.stdout)
    assert before == ["clirace"]
    from clirace.history.version import __version__
    assert version == __version__


def test_validate_of_a_spec_without_servers_loads_no_report():
    modules = imported("validate", str(ROOT / "fixtures" / "level3" / "clirace.yaml"), "--no-tool")
    assert loaded(modules, {"rich", "clirace.report", "clirace.scenarios"}) == []


def test_validate_reads_the_catalogue_without_loading_a_check_or_the_scorer():
    modules = imported("validate", str(ROOT / "fixtures" / "level3" / "clirace.yaml"), "--no-tool")
    assert loaded(modules, {"clirace.checks", "clirace.verdict"}) == ["clirace.checks", "clirace.checks.catalogue"]
    assert loaded(modules, {"clirace.run"}) == ["clirace.run", "clirace.run.locking", "clirace.run.observe"]
    assert loaded(modules, {"jmespath"}) == []  # only a spec with config.query needs it


EXPLAINED = ["clirace", "clirace.checks", "clirace.checks.catalogue", "clirace.cli", "clirace.cli._checking",
             "clirace.cli._outputs", "clirace.errors", "clirace.report", "clirace.report.explain"]


@pytest.mark.parametrize("subject,registry", [("CR202", False), ("lock-error-unstructured", False),
                                              ("lock-excludes", True), ("counter", True)])
def test_explain_loads_the_catalogue_and_its_prose_only(subject, registry):
    """A code (or its name) needs rules.yaml and explain.yaml; a criterion or a check also the registry's table:
    never a check, the spec, the history, the scorer, rich or the other reports."""
    modules = imported("explain", subject)
    assert loaded(modules, {"clirace"}) == sorted(EXPLAINED + ["clirace.checks.registry"] * registry)
    assert loaded(modules, {"rich", "jsonschema", "regex", "jmespath"}) == []


def test_explain_of_an_unknown_word_guesses_without_loading_the_spec_package():
    """Its "did you mean" (errors.did_you_mean) is difflib's: the spec's loader, jsonschema and the history
    records are not needed to say that a word is no code, criterion or check (exit 2)."""
    modules = imported("explain", "lock-exclude", status=2)
    assert loaded(modules, {"clirace"}) == sorted(EXPLAINED + ["clirace.checks.registry"])
    assert loaded(modules, {"jsonschema", "regex", "jmespath"}) == []


SAVED = ROOT / "tests" / "data" / "histories" / "adversarial-retry-after-string.json"
RENDERER_MODULES = {"text", "jsonout", "markdown", "github", "junit", "sarif"}


def test_a_report_loads_its_own_renderer_only():
    """What CI runs (`--format json`, markdown, github...) never loads rich, which only the text report draws
    with (40-50 ms of every such check's start-up), nor the other formats' modules. (One format: each probe is a
    whole judge, and the fast subset pays for it.)"""
    modules = imported("judge", str(SAVED), "--format", "json", "--exit-zero")
    renderers = {m.rpartition(".")[2] for m in loaded(modules, {"clirace.report"})} & RENDERER_MODULES
    assert renderers == {"jsonout"}
    assert loaded(modules, {"rich"}) == []


def test_checks_lists_the_registry_without_loading_a_check():
    modules = imported("checks")
    assert loaded(modules, {"clirace.checks"}) == ["clirace.checks", "clirace.checks.catalogue",
                                                   "clirace.checks.registry"]
    assert loaded(modules, {"rich", "jsonschema", "clirace.history", "clirace.spec", "clirace.run"}) == []


# Through the installed entry (`python -m clirace`, the path the console script takes to the same main) and
# Python's own record of every import, `-X importtime`: nothing of the pipeline loads before the command asks.
PIPELINE = {"clirace.run", "clirace.scenarios", "clirace.verdict", "clirace.report", "rich"}


@pytest.mark.parametrize("args,allowed", [
    (["--help"], set()),
    (["explain", "lock-excludes"], {"clirace.report"}),
    (["validate", "fixtures/level3/clirace.yaml", "--no-tool"], {"clirace.run"}),
])
def test_the_entry_point_imports_no_check_nor_the_pipeline(args, allowed):
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "clirace", *args], capture_output=True,
                          text=True, timeout=60, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    modules = {line.rsplit("|", 1)[1].strip() for line in proc.stderr.splitlines() if line.startswith("import time:")}
    assert "clirace.cli" in modules  # the record is read: the entry did import the command line
    checks = set(loaded(modules, {"clirace.checks"})) - {"clirace.checks", "clirace.checks.catalogue",
                                                          "clirace.checks.registry"}
    assert sorted(checks) == []
    assert loaded(modules, PIPELINE - allowed) == []
