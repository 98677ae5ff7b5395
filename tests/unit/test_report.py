"""Reports rendered from a literal history: what strace saw, grouped findings, all three formats."""
import io
import json

from clirace.history import History
from clirace.pipeline import judge
from clirace.report import render_text, to_json, to_markdown
from clirace.report.text import console

from .histories import history, inv, trial


def observed_counter_history():
    summaries = {f"inc-{i}": {"written": ["{sandbox}/state/counter"], "in_place": ["{sandbox}/state/counter"],
                              "renamed_onto": [f"{{sandbox}}/tmp/run-{i:016x}/r.json", f"{{sandbox}}/io/out-{i}"],
                              "locks": []} for i in range(3)}
    rounds = [trial("counter", round_=r, invocations=[inv(f"inc-{i}") for i in range(3)], start=0, final=1,
                    amplified=bool(r), observed=summaries if r else None) for r in range(2)]
    return history(*rounds)


def test_observed_lines_collapse_random_paths_and_say_when_no_lock_was_seen():
    lines = judge(observed_counter_history()).observed()
    assert "rewrites {sandbox}/state/counter in place (O_TRUNC)" in lines
    assert "replaces {sandbox}/tmp/run-*/r.json by rename (atomic) (3 distinct paths)" in lines
    assert not any("{sandbox}/io/" in line for line in lines)
    assert lines[-1].startswith("no lock call seen")


def test_every_format_renders_the_same_verdict():
    result = judge(observed_counter_history())
    data = json.loads(to_json(result))
    assert data["score"] == 0 and data["corruption"] is True
    assert [f["code"] for f in data["findings"]] == ["CR101", "CR101"]
    markdown = to_markdown(result)
    assert "#### CR101 lost-increment" in markdown and "and 1 more like it" in markdown and "observed:" in markdown
    out = io.StringIO()
    render_text(result, console(out))
    text = out.getvalue()
    assert "CR101 lost-increment" in text and "\x1b[" not in text and "score 0/3" in text


def test_a_signal_clirace_sent_does_not_read_as_a_crash_and_survives_a_saved_history(tmp_path):
    parked = inv("holder", exit_code=None, signal=9)
    parked.ended_by = "sent by clirace once the trial was over"
    assert parked.outcome() == "killed by SIGKILL, sent by clirace once the trial was over"
    assert inv("crashed", exit_code=None, signal=11).outcome() == "killed by SIGSEGV"
    history(trial("lock-conflict", invocations=[parked])).save(tmp_path / "h.json")
    reloaded = History.load(tmp_path / "h.json").trials[0].invocations[0]
    assert reloaded.outcome() == parked.outcome()


def test_evidence_names_the_sandbox_not_its_random_path():
    shown = inv("contender", exit_code=255, stderr="error: could not lock /tmp/clirace-x1/lock-9f/home/.gitconfig")
    shown.argv, shown.sandbox = ["git", "config", "--file", "/tmp/clirace-x1/lock-9f/home/.gitconfig"], "/tmp/clirace-x1/lock-9f"
    assert shown.command() == "git config --file {sandbox}/home/.gitconfig"
    assert shown.printed() == "stderr: error: could not lock {sandbox}/home/.gitconfig"
    assert "/tmp/clirace-x1" in shown.stderr  # the history keeps what the target really printed
