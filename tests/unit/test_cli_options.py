"""The command line's conveniences, in-process on literal histories (nothing is launched): -h, explain by name,
[tool.clirace] in pyproject.toml, several specs or a directory, --color with NO_COLOR and FORCE_COLOR, shell
completion, and a bad spec still written into every requested report."""
import io
import json
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import jsonschema
import pytest

from clirace.cli import _pyproject
from clirace.errors import UsageError
from clirace.report.explain import explanations
from clirace.report.text import console, wants_colour

from ..conftest import FIXTURES, ROOT
from .hostile import hostile_history
from .test_gate_and_baseline import run_main

SARIF_SCHEMA = ROOT / "tests" / "data" / "sarif-schema-2.1.0.json"


def test_h_is_help(monkeypatch, capsys):
    code, out, _ = run_main(monkeypatch, capsys, "check", "-h")
    assert code == 0 and "--exit-zero" in out and "--baseline" in out and "--color" in out


def test_explain_takes_the_name_the_report_prints_beside_the_code(monkeypatch, capsys):
    code, out, _ = run_main(monkeypatch, capsys, "explain", "lost-key")
    assert code == 0 and out.startswith("CR111 lost-key [corruption]")
    code, _, err = run_main(monkeypatch, capsys, "explain", "lost-kee")
    assert code == 2 and "'lost-kee' is not a clirace finding code or name, criterion or check; did you mean lost-key?" in err


def test_json_in_explanations_keeps_its_colons():
    """A YAML plain scalar drops nothing, but `{"ok" false}` was written that way to dodge YAML's ': '."""
    assert '{"ok": false, "data": null' in explanations()["CR904"]["means"]


def project(tmp_path, table: str) -> Path:
    (tmp_path / "pyproject.toml").write_text(f"[project]\nname = 'x'\n\n[tool.clirace]\n{table}\n")
    sub = tmp_path / "src" / "deep"
    sub.mkdir(parents=True)
    return sub


def test_the_nearest_pyproject_with_a_clirace_table_gives_specs_min_score_and_rounds(tmp_path):
    sub = project(tmp_path, 'specs = ["specs/", "tool.clirace.yaml"]\nmin-score = 2\nrounds = 5')
    (sub / "pyproject.toml").write_text("[project]\nname = 'inner, without a clirace table'\n")
    settings = _pyproject.find(sub)
    assert settings.path == tmp_path / "pyproject.toml"
    assert settings.specs == (tmp_path / "specs", tmp_path / "tool.clirace.yaml")
    assert (settings.min_score, settings.rounds) == (2, 5)
    assert _pyproject.find(Path("/")).specs == ()


@pytest.mark.parametrize("table,message", [
    ('min-score = "two"', "min-score is 'two'; expected an integer from 0 to 3"),
    ("min_score = 2", "key 'min_score', which clirace does not know; did you mean 'min-score'?"),
    ("specs = [1]", "specs is [1]; expected a list"),
    ("rounds = 0", "rounds is 0"),
])
def test_a_bad_clirace_table_names_the_file_and_key(tmp_path, table, message):
    with pytest.raises(UsageError, match=re.escape(message)):
        _pyproject.find(project(tmp_path, table))


def test_a_directory_expands_to_its_specs_in_order_skipping_hidden_and_virtualenvs(tmp_path):
    for name in ("b/clirace.yaml", "a/tool.clirace.yaml", "a/notes.yaml", ".git/x.clirace.yaml",
                 "node_modules/y.clirace.yaml"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("version: 1\n")
    assert _pyproject.expand([tmp_path]) == [tmp_path / "a/tool.clirace.yaml", tmp_path / "b/clirace.yaml"]
    with pytest.raises(UsageError, match="no clirace.yaml"):
        _pyproject.expand([tmp_path / "a" / "empty"] if (tmp_path / "a" / "empty").mkdir() is None else [])


def test_check_without_a_spec_says_where_specs_come_from(monkeypatch, capsys, tmp_path):
    monkeypatch.chdir(tmp_path)
    code, _, err = run_main(monkeypatch, capsys, "check")
    assert code == 2 and "[tool.clirace] specs" in err


@pytest.mark.parametrize("flag,env,coloured", [
    ("auto", {}, False), ("always", {}, True), ("never", {"FORCE_COLOR": "1"}, False),
    ("auto", {"FORCE_COLOR": "1"}, True), ("auto", {"NO_COLOR": "1", "FORCE_COLOR": "1"}, False),
])
def test_colour_on_a_pipe(monkeypatch, flag, env, coloured):
    for name in ("NO_COLOR", "FORCE_COLOR"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    buffer = io.StringIO()
    assert wants_colour(buffer, flag) is coloured
    from clirace.cli.pipeline import judge
    from clirace.report import render_all
    plain = io.StringIO()
    render_all(judge(hostile_history()), console(buffer, flag))
    render_all(judge(hostile_history()), console(plain, "never"))
    assert ("\x1b[" in buffer.getvalue()) is coloured
    assert re.sub(r"\x1b\[[0-9;]*m", "", buffer.getvalue()) == plain.getvalue()  # colour changes nothing else


def test_shell_completion_completes_commands():
    env = {**os.environ, "_CLIRACE_COMPLETE": "complete_bash", "COMP_WORDS": "clirace ch", "COMP_CWORD": "1"}
    script = Path(sys.executable).parent / "clirace"  # the console script: completion goes by the program's name
    proc = subprocess.run([str(script)], env=env, capture_output=True, text=True, timeout=30)
    assert "check" in proc.stdout.split() and "checks" in proc.stdout.split(), (proc.stdout, proc.stderr)


BAD = FIXTURES / "spec-errors"


def misspelt(tmp_path) -> Path:
    spec = tmp_path / "tool.clirace.yaml"
    spec.write_text("version: 1\ntool:\n  command: [\"true\"]\nworklods:\n  - kind: counter\n")
    return spec


def test_a_misspelt_key_still_writes_every_report_describing_it(monkeypatch, capsys, tmp_path):
    spec = misspelt(tmp_path)
    code, out, err = run_main(monkeypatch, capsys, "check", spec, "--format", "github",
                              "--report", f"sarif={tmp_path}/r.sarif", "--report", f"junit={tmp_path}/r.xml",
                              "--report", f"json={tmp_path}/r.json")
    assert code == 2 and "worklods" in err
    annotation = out.strip()
    assert annotation.startswith(f"::error file={spec},line=4,col=1,title=clirace spec error::"), annotation
    sarif = json.loads((tmp_path / "r.sarif").read_text())
    jsonschema.Draft4Validator(json.loads(SARIF_SCHEMA.read_text())).validate(sarif)
    run = sarif["runs"][0]
    assert run["invocations"][0]["executionSuccessful"] is False
    note = run["invocations"][0]["toolConfigurationNotifications"][0]
    assert "worklods" in note["message"]["text"] and note["locations"][0]["physicalLocation"]["region"]["startLine"] == 4
    case = ET.parse(tmp_path / "r.xml").getroot().find("testsuite/testcase")
    assert case.find("error") is not None and "worklods" in case.find("error").get("message")
    data = json.loads((tmp_path / "r.json").read_text())
    assert data["error"]["line"] == 4 and data["error"]["exit_code"] == 2 and not data["gate"]["passed"]
    schema = json.loads((ROOT / "src" / "clirace" / "report" / "result_schema.json").read_text())
    jsonschema.Draft202012Validator(schema).validate(data)


def test_a_bad_spec_among_several_gives_one_result_each_and_exit_2(monkeypatch, capsys, tmp_path):
    spec = misspelt(tmp_path)
    code, out, _ = run_main(monkeypatch, capsys, "check", spec, spec.with_name("missing.clirace.yaml"),
                            "--format", "json", "-q")
    data = json.loads(out)
    assert code == 2 and isinstance(data, list) and len(data) == 2 and all("error" in d for d in data)


def test_a_width_the_machine_cannot_open_files_for_is_refused_before_anything_runs(tmp_path):
    """--parallel 256 needs about 2,300 open files: with a hard limit of 512 the run is refused (exit 2) with the
    limit, the width that fits and how to raise it, and no target is started (its setup would leave a file)."""
    marker = tmp_path / "started"
    spec = tmp_path / "tool.clirace.yaml"
    spec.write_text(f"version: 1\ntool: {{command: [sh, -c, 'touch {marker}; echo 1', sh]}}\nworkloads:\n"
                    "  - {kind: counter, run: [incr], read: [get]}\n")
    lower_then_run = ("import resource, sys; from clirace.cli import main; "
                      "resource.setrlimit(resource.RLIMIT_NOFILE, (512, 512)); sys.argv = ['clirace'] + sys.argv[1:]; "
                      "main()")
    proc = subprocess.run([sys.executable, "-c", lower_then_run, "check", str(spec), "--parallel", "256"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert "256 invocations at once need about 2304 open files" in proc.stderr
    assert "allows this process 512" in proc.stderr and "Lower --parallel to 32" in proc.stderr
    assert "Traceback" not in proc.stderr and not marker.exists()
