"""Reports rendered from a literal history: what strace saw, grouped findings, all three formats."""
import dataclasses
import io
import json

from clirace.cli.pipeline import judge
from clirace.history import CounterRound, FileOp, History, LockConflict
from clirace.report import render_text, to_json, to_markdown
from clirace.report.text import console

from .histories import history, inv, saveable


def _ops(i):
    counter = "/sb/state/counter"
    return (FileOp(1, "openat", (counter,), True, ("O_TRUNC", "O_WRONLY"), writes=True),
            FileOp(1, "write", (counter,), True, writes=True),
            FileOp(1, "rename", (f"/sb/tmp/run-{i:016x}/r.tmp", f"/sb/tmp/run-{i:016x}/r.json"), True),
            FileOp(1, "rename", (f"/sb/io/o.tmp{i}", f"/sb/io/out-{i}"), True))


def observed_counter_history():
    rounds = [CounterRound(round=r, invocations=(*(inv(f"inc-{i}") for i in range(3)), inv("read-after", stdout="1")),
                           start=0, amplified=bool(r), traces={f"inc-{i}": _ops(i) for i in range(3)} if r else {},
                           sandbox="/sb") for r in range(2)]
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
    # CR702, CR705: advice, no lock in the trace, and the counter rewritten in place (O_TRUNC)
    assert [f["code"] for f in data["findings"]] == ["CR101", "CR101", "CR702", "CR705"]
    markdown = to_markdown(result)
    assert "#### CR101 lost-increment" in markdown and "and 1 more like it" in markdown and "observed:" in markdown
    out = io.StringIO()
    render_text(result, console(out))
    text = out.getvalue()
    assert "CR101 lost-increment" in text and "\x1b[" not in text and "score 0/3" in text


def test_a_signal_clirace_sent_does_not_read_as_a_crash_and_survives_a_saved_history(tmp_path):
    parked = dataclasses.replace(inv("holder", exit_code=None, signal=9), ended_by="sent by clirace once the trial was over")
    assert parked.ending() == "killed by SIGKILL, sent by clirace once the trial was over"
    assert inv("crashed", exit_code=None, signal=11).ending() == "killed by SIGSEGV"
    saveable(history(LockConflict(invocations=(parked,)))).save(tmp_path / "h.json")
    reloaded = History.load(tmp_path / "h.json").trials[0].invocations[0]
    assert reloaded.ending() == parked.ending()


def test_evidence_names_the_sandbox_not_its_random_path():
    shown = dataclasses.replace(inv("contender", exit_code=255, stderr="error: could not lock /tmp/clirace-x1/lock-9f/home/.gitconfig"),
                                argv=("git", "config", "--file", "/tmp/clirace-x1/lock-9f/home/.gitconfig"),
                                sandbox="/tmp/clirace-x1/lock-9f")
    assert shown.command() == "git config --file {sandbox}/home/.gitconfig"
    assert shown.printed() == "stderr: error: could not lock {sandbox}/home/.gitconfig"
    assert "/tmp/clirace-x1" in shown.stderr  # the history keeps what the target really printed
