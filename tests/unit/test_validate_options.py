"""`clirace validate` with the options `check` and `diff` have (issue 28, rough edge 7): --format/--output-format
text|json, -o, --report FORMAT=PATH, --exit-zero. In process; nothing of any tool runs but a fixture's --help."""
import json

from ..conftest import FIXTURES, ROOT
from .test_gate_and_baseline import run_main

FLOCK = ROOT / "docs" / "examples" / "flock-counter.clirace.yaml"


def bad_spec(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text('version: 1\ntool:\n  comand: ["true"]\n')
    return bad


def test_json_gives_each_spec_valid_or_its_error_as_check_gives_it(monkeypatch, capsys, tmp_path):
    monkeypatch.setenv("CLIRACE_NO_STRACE", "1")
    bad = bad_spec(tmp_path)
    code, out, err = run_main(monkeypatch, capsys, "validate", FLOCK, bad, "--no-tool", "--output-format", "json")
    assert code == 2 and f"{bad}:3:3:" in err  # the error is also said on stderr
    good, refused = json.loads(out)
    assert good["valid"] and good["testable"] and good["spec"].endswith("flock-counter.clirace.yaml")
    extents = {c["id"]: c["extent"] for c in good["criteria"]}
    assert extents["lock-wait-timeout"] == "full" and extents["lock-released-on-exit"] == "partial"
    assert extents["session-isolation"] == "none"
    assert good["subcommands"] == {"seen": None, "why_none": "not looked for (--no-tool)", "never_run": []}
    code, checked, _ = run_main(monkeypatch, capsys, "check", bad, "--format", "json")
    assert code == 2
    assert not refused["valid"] and refused["error"] == json.loads(checked)["error"]
    assert refused["error"]["line"] == 3 and refused["error"]["kind"] == "spec error"


def test_exit_zero_exits_0_on_a_bad_spec_and_the_output_still_says_it(monkeypatch, capsys, tmp_path):
    bad = bad_spec(tmp_path)
    code, out, _ = run_main(monkeypatch, capsys, "validate", bad, "-f", "json", "--exit-zero")
    assert code == 0 and json.loads(out)["valid"] is False
    empty = tmp_path / "empty.yaml"
    empty.write_text('version: 1\ntool:\n  command: ["true"]\n')
    code, out, _ = run_main(monkeypatch, capsys, "validate", empty, "-q")
    assert code == 2 and out.endswith(": valid, but nothing can be tested\n")
    code, out, _ = run_main(monkeypatch, capsys, "validate", empty, "-q", "--exit-zero")
    assert code == 0 and out.endswith(": valid, but nothing can be tested\n")


def test_output_and_reports_are_files_in_their_own_formats(monkeypatch, capsys, tmp_path):
    monkeypatch.setenv("CLIRACE_NO_STRACE", "1")
    bad = bad_spec(tmp_path)
    data, text = tmp_path / "v.out", tmp_path / "v.txt"
    code, out, _ = run_main(monkeypatch, capsys, "validate", FLOCK, bad, "--no-tool", "-o", data,
                            "--report", f"text={text}")
    assert code == 2 and out == ""
    written = text.read_text().splitlines()
    assert written[0].endswith("flock-counter.clirace.yaml: valid")
    assert "  subcommands: not looked for (--no-tool)" in written
    assert written[-1].startswith(f"clirace: {bad}:3:3:")  # in a file the refused spec is said too
    assert data.read_text() == text.read_text()  # -o takes --format, text by default
    code, _, _ = run_main(monkeypatch, capsys, "validate", FLOCK, bad, "--no-tool", "-f", "json", "-o", data)
    assert code == 2 and [item["valid"] for item in json.loads(data.read_text())] == [True, False]


def test_bad_report_options_are_refused_before_any_spec_is_read(monkeypatch, capsys, tmp_path):
    code, _, err = run_main(monkeypatch, capsys, "validate", FLOCK, "--report", "sarif=x.sarif")
    assert code == 2 and "names the format 'sarif'" in err and "Formats: text, json." in err
    code, _, err = run_main(monkeypatch, capsys, "validate", FLOCK, "-o", tmp_path / "no" / "such" / "v.json")
    assert code == 2 and "does not exist" in err


def test_json_lists_each_subcommand_the_spec_never_runs_with_its_warning(monkeypatch, capsys, tmp_path):
    monkeypatch.setenv("CLIRACE_NO_STRACE", "1")
    fixture = FIXTURES / "adversarial" / "unset-skips-lock"
    spec = tmp_path / "clirace.yaml"
    spec.write_text((fixture / "clirace.yaml").read_text().replace("{spec_dir}", str(fixture))
                    .replace('contender: ["config", "unset", "theme"]', 'contender: ["config", "set", "{key}", "{value}"]'))
    code, out, err = run_main(monkeypatch, capsys, "validate", spec, "--format", "json")
    assert code == 0, err
    found = json.loads(out)["subcommands"]
    assert found["seen"] and found["why_none"] is None
    unset = [w for w in found["never_run"] if w["subcommand"] == "config unset"]
    assert unset and 'lock.contender: ["config", "unset", ...]' in unset[0]["warning"]
    assert not any(w["subcommand"] in ("config set", "config get") for w in found["never_run"])
