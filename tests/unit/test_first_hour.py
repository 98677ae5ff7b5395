"""The rough edges a maintainer meets in the first hour (issue 28), each on the real command line run in-process
on literal histories (nothing is launched): paths as the user would type them, one overall gate line for several
specs, the same options on every command, a SARIF upload that never reads as "all fixed"."""
import dataclasses
import json

import pytest

from clirace.cli.pipeline import judge

from .histories import filled, saveable
from .hostile import hostile_history
from .test_gate_and_baseline import keys_history, run_main

pytest_plugins = ["pytester"]

FORMATS = ("text", "json", "markdown", "github", "junit", "sarif")


def saved_under(tmp_path, h, name="h.json"):
    """`h` saved with its spec in tmp_path/specs, and a working directory tmp_path/sub beside it."""
    spec = tmp_path / "specs" / "tool.clirace.yaml"
    spec.parent.mkdir(exist_ok=True)
    spec.write_text("version: 1\n")
    path = tmp_path / "specs" / name
    saveable(dataclasses.replace(h, spec_path=str(spec))).save(path)
    sub = tmp_path / "sub"
    sub.mkdir(exist_ok=True)
    return path, sub


@pytest.mark.parametrize("fmt", FORMATS)
def test_judge_from_a_sibling_directory_names_the_spec_relative_to_it(tmp_path, monkeypatch, capsys, fmt):
    path, sub = saved_under(tmp_path, hostile_history())
    monkeypatch.chdir(sub)
    code, out, err = run_main(monkeypatch, capsys, "judge", "../specs/h.json", "-f", fmt)
    assert code in (0, 1), err
    assert str(tmp_path) not in out + err
    assert "../specs/tool.clirace.yaml" in out


def test_a_spec_error_from_a_subdirectory_names_the_spec_as_given(tmp_path, monkeypatch, capsys):
    (tmp_path / "bad.clirace.yaml").write_text("version: 1\ntool: {comand: [x]}\n")
    (tmp_path / "sub").mkdir()
    monkeypatch.chdir(tmp_path / "sub")
    code, out, err = run_main(monkeypatch, capsys, "validate", "../bad.clirace.yaml")
    assert code == 2 and err.startswith("clirace: ../bad.clirace.yaml:2:") and str(tmp_path) not in err


def two_specs():
    good = judge(dataclasses.replace(keys_history(0, 3), spec_path="good.clirace.yaml"))
    bad = judge(dataclasses.replace(keys_history(1, 3), spec_path="bad.clirace.yaml"))
    return [good, bad]


@pytest.mark.parametrize("fmt", ["text", "markdown"])
def test_several_specs_start_with_one_overall_gate_line_then_a_block_per_spec(fmt):
    from clirace.report import RENDERERS
    lines = RENDERERS[fmt](two_specs()).splitlines()
    assert lines[0].lstrip("# ") == "clirace gate failed: 1 of 2 specs failed (bad.clirace.yaml)"
    own = {"text": "clirace gate passed", "markdown": "gate ✅ passed"}[fmt]
    assert sum(own in line for line in lines) == 1  # the good spec's own block follows
    assert RENDERERS[fmt](two_specs()[:1]).splitlines()[0].lstrip("# ").startswith(("clirace gate passed", "clirace:"))


def test_the_sarif_of_a_bad_spec_carries_the_error_as_a_result_so_an_upload_never_reads_all_fixed(
        monkeypatch, capsys, tmp_path):
    import jsonschema

    from ..conftest import ROOT
    spec = tmp_path / "tool.clirace.yaml"
    spec.write_text("version: 1\ntool:\n  command: [\"true\"]\nworklods:\n  - kind: counter\n")
    code, out, _ = run_main(monkeypatch, capsys, "check", spec, "-f", "sarif")
    sarif = json.loads(out)
    jsonschema.Draft4Validator(json.loads((ROOT / "tests/data/sarif-schema-2.1.0.json").read_text())).validate(sarif)
    run = sarif["runs"][0]
    assert code == 2 and run["invocations"][0]["executionSuccessful"] is False
    [result] = run["results"]
    assert result["level"] == "error" and "worklods" in result["message"]["text"]
    assert result["locations"][0]["physicalLocation"]["region"]["startLine"] == 4
    assert run["tool"]["driver"]["rules"][result["ruleIndex"]]["id"] == result["ruleId"]


def snap(score, criterion, check_status, code):
    from clirace.verdict.baseline import Snapshot
    finding = {"code": code, "name": f"name-{code}", "severity": "error"}
    return Snapshot("old.json", "t.yaml", score, {"lock-error-structured": criterion},
                    {"lock-error-structured": {"status": check_status, "summary": "", "findings": [finding]}})


def test_diff_says_now_fails_where_the_check_went_from_pass_to_fail_and_never_score_score():
    from clirace.report.diff import RENDERERS
    from clirace.verdict.baseline import compare
    comparison = compare(snap(1, "pass", "pass", "CR901"), snap(0, "fail", "fail", "CR202"))
    cr901 = next(c for c in comparison.changes if c.subject == "CR901")
    assert "now fails" in cr901.detail and "still fails" not in cr901.detail
    assert "still fails" in next(c for c in compare(snap(0, "fail", "fail", "CR901"), snap(0, "fail", "fail", "CR202"))
                                 .changes if c.subject == "CR901").detail
    github = RENDERERS["github"](comparison)
    assert "score score" not in github and "score 1 -> 0" in github


@pytest.mark.parametrize("fmt", ["text", "json", "markdown", "github"])
def test_diff_says_its_verdict_on_the_first_line_in_every_format(fmt):
    from clirace.report.diff import RENDERERS
    from clirace.verdict.baseline import compare
    worse = RENDERERS[fmt](compare(snap(1, "pass", "pass", "CR901"), snap(0, "fail", "fail", "CR202")))
    same = RENDERERS[fmt](compare(snap(0, "fail", "fail", "CR202"), snap(0, "fail", "fail", "CR202")))
    first = {"text": r"clirace diff: regression against", "json": '  "verdict": "regression"',
             "markdown": "## clirace diff: ❌ regression", "github": "::error title=clirace diff::regression against"}
    assert worse.splitlines()[1 if fmt == "json" else 0].startswith(first[fmt])
    assert "no regression" in same.splitlines()[1 if fmt == "json" else 0]


COMMANDS = ("check", "judge", "diff", "schema", "checks", "explain", "validate", "init")


@pytest.mark.parametrize("command", COMMANDS)
def test_help_shows_no_python_types(monkeypatch, capsys, command):
    import re
    code, out, _ = run_main(monkeypatch, capsys, command, "--help")
    assert code == 0 and not re.search(r"<(list\[|path>|str>|int|float|text>|integer)", out, re.I), out


def test_the_common_options_are_on_every_command_that_reports():
    from typer.main import get_command

    from clirace import cli
    group = get_command(cli.app)
    opts = {name: {o for p in cmd.params for o in p.opts} for name, cmd in group.commands.items()}
    for name in ("check", "judge", "diff"):
        assert {"-q", "--exit-zero", "--report", "--format", "--output-format", "-o"} <= opts[name], name
    assert {"-q", "--no-tool"} <= opts["validate"] and {"--format", "--output-format"} <= opts["checks"]
    assert "-V" in {o for p in group.params for o in p.opts}


def test_dash_capital_v_prints_the_version(monkeypatch, capsys):
    from clirace import __version__
    code, out, _ = run_main(monkeypatch, capsys, "-V")
    assert code == 0 and out == f"clirace {__version__}\n"


def test_diff_takes_report_and_exit_zero(monkeypatch, capsys, tmp_path):
    old, new = tmp_path / "old.json", tmp_path / "new.json"
    saveable(keys_history(0, 3)).save(old)
    saveable(keys_history(1, 3)).save(new)
    code, out, _ = run_main(monkeypatch, capsys, "diff", old, new, "--report", f"json={tmp_path}/d.json",
                            "--output-format", "github")
    assert code == 1 and out.startswith("::error title=clirace diff::regression")
    assert json.loads((tmp_path / "d.json").read_text())["verdict"] == "regression"
    code, _, _ = run_main(monkeypatch, capsys, "diff", old, new, "--exit-zero", "-q")
    assert code == 0
    code, _, err = run_main(monkeypatch, capsys, "diff", old, new, "--report", f"sarif={tmp_path}/d.sarif")
    assert code == 2 and "sarif" in err and not (tmp_path / "d.sarif").exists()


def test_judge_takes_q(monkeypatch, capsys, tmp_path):
    saveable(keys_history(0, 3)).save(tmp_path / "h.json")
    code, out, err = run_main(monkeypatch, capsys, "judge", tmp_path / "h.json", "-q")
    assert code == 0 and out.startswith("clirace gate passed") and err == ""


def test_validate_takes_directories_and_the_pyproject_table_and_no_tool(monkeypatch, capsys, tmp_path):
    specs = tmp_path / "specs"
    specs.mkdir()
    (specs / "a.clirace.yaml").write_text(
        "version: 1\ntool:\n  command: [not-installed-tool-xyz]\nworkloads:\n  - kind: counter\n"
        "    run: [incr]\n    read: [get]\n")
    (tmp_path / "pyproject.toml").write_text("[tool.clirace]\nspecs = [\"specs/\"]\n")
    (tmp_path / "sub").mkdir()
    monkeypatch.chdir(tmp_path / "sub")
    code, _, err = run_main(monkeypatch, capsys, "validate")
    assert code == 2 and "not-installed-tool-xyz" in err and "not on PATH" in err
    code, out, err = run_main(monkeypatch, capsys, "validate", "--no-tool", "-q")
    assert code == 0 and out == "../specs/a.clirace.yaml: valid\n", out + err
    code, out, _ = run_main(monkeypatch, capsys, "validate", "--no-tool", "../specs")
    assert code == 0 and out.startswith("../specs/a.clirace.yaml: valid\n") and len(out.splitlines()) > 1


@pytest.mark.parametrize("name, first", [("lock-excludes", "criterion lock-excludes, level 1"),
                                         ("counter", "check counter (under criterion no-silent-corruption)")])
def test_explain_takes_criterion_ids_and_check_names(monkeypatch, capsys, name, first):
    code, out, _ = run_main(monkeypatch, capsys, "explain", name)
    assert code == 0 and out.startswith(first)
    from clirace.checks.registry import EXPERIMENTS
    assert all(code in out for code in EXPERIMENTS[name].codes)


def test_checks_as_json_lists_every_criterion_check_and_live_rule(monkeypatch, capsys):
    from clirace.checks.registry import EXPERIMENTS
    from clirace.verdict.rubric import rules
    code, out, _ = run_main(monkeypatch, capsys, "checks", "--format", "json")
    data = json.loads(out)
    assert code == 0
    assert {c["id"] for crit in data["criteria"] for c in crit["checks"]} == set(EXPERIMENTS)
    assert {r["code"] for r in data["rules"]} == {c for c, r in rules().items() if not r.get("retired")}


@pytest.mark.timeout(60)
@pytest.mark.parametrize("args", [("checks",), ("judge", "{history}"), ("judge", "{history}", "-f", "sarif")])
def test_a_closed_pipe_exits_quietly_with_its_own_status(tmp_path, args):
    """The pipe's read end is closed before clirace starts: its first write fails, deterministically."""
    import os
    import subprocess
    import sys

    from clirace.errors import EXIT_PIPE_CLOSED
    saveable(keys_history(1, 3)).save(tmp_path / "h.json")  # a corrupting run: the gate's own status would be 1
    read, write = os.pipe()
    os.close(read)
    try:
        proc = subprocess.run([sys.executable, "-m", "clirace", *(a.format(history=tmp_path / "h.json") for a in args)],
                              stdout=write, stderr=subprocess.PIPE, text=True, timeout=50)
    finally:
        os.close(write)
    assert (proc.returncode, proc.stderr) == (EXIT_PIPE_CLOSED, "")


def test_init_points_editors_at_a_schema_written_beside_the_spec_not_at_a_url(monkeypatch, capsys, tmp_path):
    import re
    monkeypatch.chdir(tmp_path)
    code, _, _ = run_main(monkeypatch, capsys, "init", "--example", "flock-counter")
    first = (tmp_path / "clirace.yaml").read_text().splitlines()[0]
    target = re.fullmatch(r"# yaml-language-server: \$schema=(\S+)", first).group(1)
    assert code == 0 and "://" not in target
    code, printed, _ = run_main(monkeypatch, capsys, "schema")
    assert json.loads((tmp_path / target).read_text()) == json.loads(printed)


@pytest.mark.parametrize("columns", ["60", "80", "100"])
def test_color_always_leaves_no_trailing_space_on_wrapped_lines(monkeypatch, capsys, tmp_path, columns):
    import re
    long_name = "a-spec-with-a-name-long-enough-to-wrap-the-replay-line.clirace.yaml"
    saveable(dataclasses.replace(keys_history(1, 3), spec_path=long_name)).save(tmp_path / "h.json")
    monkeypatch.setenv("COLUMNS", columns)
    code, out, _ = run_main(monkeypatch, capsys, "judge", tmp_path / "h.json", "--color", "always")
    assert code == 1 and "\x1b[" in out and "replay:" in out
    assert [line for line in out.splitlines() if re.search(r"[ \t](\x1b\[[0-9;]*m)*$", line)] == []


PLANTED = '''
import hashlib
from clirace.history import History

def pytest_sessionstart(session):
    """The run the plugin would make, planted where its first worker saves it: the plugin judges it."""
    spec = session.config.rootpath / "tool.clirace.yaml"
    key = (str(spec.resolve()), ())
    name = hashlib.sha256(repr(key).encode()).hexdigest()[:16]
    base = session.config._tmp_path_factory.getbasetemp()
    History.load({saved!r}).save(base / f"clirace-{{name}}.history.json")
'''


@pytest.mark.parametrize("args, outcome", [((), "failed"), (("--clirace-score-only",), "passed")])
def test_the_plugins_score_item_fails_on_corruption_like_the_gate_unless_score_only(pytester, tmp_path, args, outcome):
    saved = tmp_path / "h.json"
    saveable(keys_history(1, 3)).save(saved)  # a corrupting run: score 0, which the default minimum 0 lets through
    pytester.makeconftest(PLANTED.format(saved=str(saved)))
    pytester.makefile(".clirace.yaml", tool="version: 1\n")
    result = pytester.runpytest("-k", "score", *args)
    result.assert_outcomes(**{outcome: 1})
    if outcome == "failed":
        result.stdout.fnmatch_lines(["*clirace gate failed: silent corruption was found (CR111 lost-key)*"])


LOCATED_SPEC = """\
version: 1
tool:
  command: ["true"]
workloads:
  - kind: counter
    run: [incr]
    read: [get]
  - kind: counter
    name: second
    run: [incr2]
    read: [get2]
  - kind: keys
    run: [set, "{key}", "{value}"]
    config: {path: "{config_home}/c.json", format: json}
lock:
  contender: [set, "{key}", "{value}"]
  hold:
    park: {command: [set, "{key}", "{value}"], fifo: "{config_home}/c.json"}
  wait_option: ["--wait", "{timeout_ms}"]
"""


def test_every_registered_code_points_at_a_key_of_the_spec_never_at_line_1(tmp_path):
    """Walks the catalogue, not a hand list: a spec without a session section still places CR952 at a key."""
    from clirace.checks.findings import Evidence, Finding
    from clirace.report._locate import Locator
    from clirace.spec import load_spec
    from clirace.verdict.rubric import rules
    spec = tmp_path / "t.clirace.yaml"
    spec.write_text(LOCATED_SPEC)
    locator = Locator(str(spec), load_spec(spec, check_programs=False).places)
    for code, rule in rules().items():
        if rule.get("retired"):
            continue
        place = locator.place(rule["check"], Finding(code, filled(code), Evidence(trial="")))
        assert (place.line, place.column) != (1, 1), code
    lines = LOCATED_SPEC.splitlines()

    def line(code, check, trial=""):
        return locator.place(check, Finding(code, filled(code), Evidence(trial=trial))).line

    def numbered(text):
        return lines.index(text) + 1

    assert line("CR951", "s58-advice", "session: s1 (round 1)") == numbered('  wait_option: ["--wait", "{timeout_ms}"]')
    assert line("CR701", "hazards", "counter: second (round 2 amplified)") == numbered("    name: second") - 1
    assert line("CR701", "hazards", "counter: counter#0 (round 1)") == numbered("workloads:") + 1
    assert line("CR702", "hazards", "keys: keys#2 (round 1)") == numbered("  - kind: keys")
    assert line("CR101", "counter", "counter: second (round 1)") == numbered("    name: second") - 1
