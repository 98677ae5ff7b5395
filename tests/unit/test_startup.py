"""Start-up: what `clirace --help` and `clirace validate` import (docs/benchmarks.md, Start-up). A time would
depend on the machine's load; the modules a command loads do not, and they are what its start-up costs."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

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


def imported(*args: str) -> set[str]:
    proc = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["code"] == 0, proc.stderr
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
