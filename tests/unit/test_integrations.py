"""The integration points at the repository's root, parsed and held to what uses them: action.yml against a
workflow that `uses: ./` it (tests/data/workflows/clirace.yml), and .pre-commit-hooks.yaml against pre-commit's
hook format and the specs it should match. (tests/e2e/test_action.py runs the action's check step for real.)"""
import re
import shlex

import yaml
from typer.main import get_command

from clirace import cli

from ..conftest import ROOT
from .test_gate_and_baseline import run_main

ACTION = yaml.safe_load((ROOT / "action.yml").read_text())
WORKFLOW = yaml.safe_load((ROOT / "tests" / "data" / "workflows" / "clirace.yml").read_text())
HOOKS = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())
USED = re.compile(r"\$\{\{\s*inputs\.([A-Za-z0-9_-]+)\s*\}\}|inputs\.([A-Za-z0-9_-]+)")


def uses_of_this_action():
    return [step for job in WORKFLOW["jobs"].values() for step in job["steps"] if step.get("uses") == "./"]


def test_the_action_is_composite_and_every_input_is_declared_described_and_used():
    assert ACTION["name"] and ACTION["description"] and ACTION["runs"]["using"] == "composite"
    steps = ACTION["runs"]["steps"]
    assert all("shell" in step for step in steps if "run" in step)  # composite run steps must name their shell
    used = {a or b for step in steps for a, b in USED.findall(yaml.safe_dump(step))}
    assert used == set(ACTION["inputs"])
    assert all(spec.get("description") for spec in ACTION["inputs"].values())
    for step in steps:  # an input pasted into a script could inject commands: they go through env only
        assert "inputs." not in step.get("run", ""), step["name"]


def test_the_workflow_that_uses_it_gives_only_its_inputs_and_all_required_ones():
    (step,) = uses_of_this_action()
    given = set(step.get("with", {}))
    assert given <= set(ACTION["inputs"])
    assert {name for name, spec in ACTION["inputs"].items() if spec.get("required")} <= given
    assert (ROOT / step["with"]["specs"]).is_file()


def test_the_check_step_runs_clirace_check_with_the_github_format_and_appends_to_the_summary():
    check = next(step for step in ACTION["runs"]["steps"] if step.get("id") == "check")
    assert "clirace " in check["run"] and "check --format github" in check["run"]
    assert '"markdown=$GITHUB_STEP_SUMMARY"' in check["run"]
    options = set(re.findall(r"--[a-z-]+", check["run"]))
    known = {opt for param in get_command(cli.app).commands["check"].params for opt in param.opts}
    assert options <= known, options - known  # every option the script passes exists on `check`


def test_the_pre_commit_hook_runs_validate_on_spec_files_only(monkeypatch, capsys):
    (hook,) = HOOKS
    assert {"id", "name", "entry", "language"} <= set(hook) and hook["language"] == "python"
    program, command, *options = shlex.split(hook["entry"])
    assert program == "clirace" and command == "validate" and options == ["--no-tool"]
    files = re.compile(hook["files"])
    for name in ("clirace.yaml", "tests/tool.clirace.yaml", "specs/git.clirace.yml"):
        assert files.search(name), name
    for name in ("notclirace.yaml", "clirace.yaml.bak", "docs/tool.yaml", "myclirace.yaml"):
        assert not files.search(name), name
    code, out, _ = run_main(monkeypatch, capsys, command, *options, ROOT / "fixtures" / "level3" / "clirace.yaml")
    assert code == 0 and "valid" in out
