"""The command line as a CI job uses it: exit codes, formats, saved histories judged again."""
import json

import pytest

from ..conftest import FIXTURES, run_clirace

LEVEL1 = FIXTURES / "level1" / "clirace.yaml"
QUICK = ("--only", "lock-excludes", "--only", "lock-error-structured")


@pytest.fixture(scope="module")
def level1_run(tmp_path_factory):
    """One live check of level 1's lock checks, read by every test below: its text on stdout (not a terminal), its
    Markdown and JSON reports, and its saved history, which the tests judge again with other options (judging
    launches nothing, and runs the same gate and renderers as the check). Six live runs of the same fixture with
    the same options, one per output, were 5 more runs for nothing."""
    out = tmp_path_factory.mktemp("level1")
    proc = run_clirace("check", LEVEL1, *QUICK, "--report", f"markdown={out / 'r.md'}", "--report",
                       f"json={out / 'r.json'}", "--history", out / "h.json")
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc, out


@pytest.mark.e2e
@pytest.mark.timeout(120)
def test_min_score_gates_and_json_shape(level1_run):
    text, out = level1_run
    assert text.returncode == 1 and "clirace gate failed: no-silent-corruption was not tested" in \
        text.stdout, text.stdout  # lock checks only: silent corruption was not ruled out
    passing = run_clirace("judge", out / "h.json", "--format", "json", "--min-score", "0", "--allow-undecided")
    assert passing.returncode == 0, passing.stderr
    result = json.loads(passing.stdout)
    assert "no-silent-corruption was not tested" in result["gate"]["why"], result["gate"]
    assert {"score", "criteria", "findings", "seed", "replay"} <= set(result)
    assert all(c["status"] in ("pass", "fail", "not_tested") for c in result["criteria"])
    statuses = {c["id"]: c["status"] for c in result["criteria"]}
    assert statuses["lock-excludes"] == "pass" and statuses["lock-error-structured"] == "fail"
    gated = run_clirace("judge", out / "h.json", "--format", "json", "--min-score", "2", "--allow-undecided")
    assert gated.returncode == 1


@pytest.mark.e2e
@pytest.mark.timeout(60)
def test_saved_history_is_judged_the_same_without_launching(level1_run):
    _text, out = level1_run
    again = run_clirace("judge", out / "h.json", "--format", "json", "--allow-undecided")
    assert again.returncode == 0, again.stderr
    a, b = json.loads((out / "r.json").read_text()), json.loads(again.stdout)
    assert [(c["id"], c["status"]) for c in a["criteria"] if c["id"].startswith("lock-e")] == \
        [(c["id"], c["status"]) for c in b["criteria"] if c["id"].startswith("lock-e")]
    assert [f["code"] for f in a["findings"]] == [f["code"] for f in b["findings"]]


@pytest.mark.e2e
@pytest.mark.timeout(60)
def test_plain_text_when_not_a_terminal_and_markdown(level1_run, tmp_path):
    text, out = level1_run
    assert "\x1b[" not in text.stdout and "score" in text.stdout and "CR202" in text.stdout
    assert (out / "r.md").read_text().startswith("## clirace")
    report = tmp_path / "r.md"
    md = run_clirace("judge", out / "h.json", "--format", "markdown", "--output", report, "--allow-undecided")
    assert md.returncode == 0 and report.read_text().startswith("## clirace")


def test_judge_rejects_a_file_that_is_not_a_history(tmp_path):
    bogus = tmp_path / "x.json"
    bogus.write_text("{}")
    proc = run_clirace("judge", bogus)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr and "history" in proc.stderr


def test_unknown_only_is_a_usage_error():
    proc = run_clirace("check", LEVEL1, "--only", "nope")
    assert proc.returncode == 2 and "not a check" in proc.stderr


def test_schema_prints_json_schema():
    proc = run_clirace("schema")
    assert json.loads(proc.stdout)["title"] == "clirace spec"


@pytest.mark.e2e
@pytest.mark.timeout(60)
def test_ctrl_c_reaches_the_holder_when_clirace_runs_with_sigint_ignored():
    """A background job (nohup, `cmd &` in a script) starts with SIGINT ignored; its children must not inherit
    that, or the Ctrl-C release test would see a holder that never ends."""
    import signal
    import subprocess
    import sys
    proc = subprocess.run([sys.executable, "-m", "clirace", "check", str(FIXTURES / "level3" / "clirace.yaml"),
                           "--only", "lock-release", "--format", "json"], capture_output=True, text=True, timeout=60,
                          preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    result = json.loads(proc.stdout)
    assert {c["id"]: c["status"] for c in result["criteria"]}["lock-released-on-exit"] == "pass", result["checks"]


SETUP_FAILS = """\
version: 1
tool:
  command: ["{python}", "-c", "import sys; sys.exit(int(sys.argv[1]))"]
setup:
  - ["3"]
workloads:
  - kind: counter
    run: ["0"]
    read: ["0"]
  - kind: keys
    run: ["0", "{key}", "{value}"]
    config: {path: "{home}/c.json", format: json}
lock:
  contender: ["0"]
  hold:
    command: ["0", "{release_file}"]
    ready: {delay: 0.1s}
"""


SETUP_HANGS = """\
version: 1
tool:
  command: ["{python}", "-c", "import sys, time; time.sleep(float(sys.argv[1])); print(0)"]
  timeout: 1s
setup:
  - ["60"]
workloads:
  - kind: counter
    run: ["0"]
    read: ["0"]
"""


@pytest.mark.e2e
@pytest.mark.timeout(60)
def test_a_setup_command_killed_at_its_deadline_is_undecided_not_a_spec_error(tmp_path):
    """Issue 25 item 6: a setup that ran out of time (a loaded machine, a hung tool) gave no answer: whether the
    spec fits the tool is unknown, not "the spec does not fit the tool" (exit 2)."""
    spec = tmp_path / "tool.clirace.yaml"
    spec.write_text(SETUP_HANGS)
    proc = run_clirace("check", spec, "--format", "json", "--only", "counter", "--rounds", "1", "--no-strace")
    assert proc.returncode != 2 and "does not fit the tool" not in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr
    verdict = json.loads(proc.stdout)["checks"]["counter"]
    assert verdict["status"] == "unknown" and "ended without an answer" in verdict["summary"], verdict


@pytest.mark.e2e
@pytest.mark.timeout(60)
def test_a_setup_command_that_fails_is_a_spec_error_not_a_crash(tmp_path):
    spec = tmp_path / "tool.clirace.yaml"
    spec.write_text(SETUP_FAILS)
    proc = run_clirace("check", spec, "--format", "json")
    assert proc.returncode == 2, proc.stderr  # once a bug: "internal error: generator didn't yield", exit 3
    assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr
    assert "does not fit the tool" in proc.stderr and "setup command" in proc.stderr, proc.stderr
    assert "failed (exit 3" in proc.stderr
    error = json.loads(proc.stdout)["error"]  # the JSON asked for describes the spec error
    assert error["kind"] == "spec error" and "does not fit the tool" in error["message"]
