"""Report destinations through the real CLI: several reports from one run, atomic writes, and bad paths
refused before anything runs. `judge` on a literal history launches no target; `check` stops before it."""
import json
import os
import re
import stat
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from clirace.cli._outputs import Outputs, check_all, parse_report
from clirace.cli.pipeline import judge
from clirace.errors import UsageError

from ..conftest import FIXTURES, run_clirace
from .histories import saveable
from .hostile import hostile_history


@pytest.fixture
def saved(tmp_path):
    path = tmp_path / "h.json"
    saveable(hostile_history()).save(path)
    return path


@pytest.fixture(scope="module")
def several_reports(tmp_path_factory):
    """One judge writing six reports into out/, and a seventh over an old file in old/ (a judge costs about 0.6 s
    of CPU; the two tests below read this one run)."""
    home = tmp_path_factory.mktemp("reports")
    history = home / "h.json"
    saveable(hostile_history()).save(history)
    out, old = home / "out", home / "old"
    out.mkdir()
    old.mkdir()
    (old / "r.md").write_text("old")
    os.chmod(old / "r.md", 0o640)
    proc = run_clirace("judge", history, "--format", "json", "-o", out / "r.json", "--report", f"markdown={out}/r.md",
                       "--report", f"junit={out}/r.xml", "--report", f"sarif={out}/r.sarif",
                       "--report", f"github={out}/r.txt", "--report", f"text={out}/r.text",
                       "--report", f"markdown={old}/r.md")
    return proc, out, old


several_reports_run = pytest.mark.xdist_group("test_cli_outputs-several")  # one worker runs both: one judge


@several_reports_run
def test_judge_writes_several_reports_in_one_run(several_reports):
    proc, out, _ = several_reports
    assert proc.returncode in (0, 1), proc.stderr
    assert proc.stdout == ""
    assert sorted(p.name for p in out.iterdir()) == ["r.json", "r.md", "r.sarif", "r.text", "r.txt", "r.xml"]
    assert json.loads((out / "r.json").read_text())["score"] == json.loads((out / "r.sarif").read_text())[
        "runs"][0]["properties"]["score"]
    assert ET.parse(out / "r.xml").getroot().tag == "testsuites"


@pytest.mark.parametrize("option", ["-o", "--report", "--history"])
@pytest.mark.parametrize("bad", ["/proc/version", "DIR", "/nonexistent/x"])
def test_an_unwritable_destination_is_refused(tmp_path, option, bad):
    bad = Path(str(tmp_path) if bad == "DIR" else bad)
    outputs = {"-o": Outputs(output=bad), "--report": Outputs(reports=(("json", bad),)),
               "--history": Outputs(history=bad)}[option]
    with pytest.raises(UsageError, match=re.escape(f"{option} {bad}")):
        check_all(outputs)


@pytest.mark.parametrize("command,args", [("check", ["-o", "/proc/version"]),
                                          ("judge", ["--report", "json=/nonexistent/x"])])
def test_the_cli_refuses_it_before_the_run(saved, command, args):
    target = saved if command == "judge" else FIXTURES / "level3" / "clirace.yaml"
    proc = run_clirace(command, target, *args, timeout=30)
    assert proc.returncode == 2, proc.stderr
    assert args[1].split("=")[-1] in proc.stderr and "Traceback" not in proc.stderr
    assert "clirace: counter" not in proc.stderr  # nothing ran


def test_a_bad_report_option_says_what_is_expected(saved):
    with pytest.raises(UsageError, match="FORMAT=PATH"):
        parse_report("markdown")
    proc = run_clirace("judge", saved, "--report", "pdf=x.pdf")
    assert proc.returncode == 2 and "pdf" in proc.stderr and "sarif" in proc.stderr


@several_reports_run
def test_a_report_replaces_the_old_file_whole_and_leaves_no_temp_file(several_reports):
    proc, _, old = several_reports
    assert proc.returncode in (0, 1), proc.stderr
    target = old / "r.md"
    assert target.read_text().startswith("## clirace") and (target.stat().st_mode & 0o777) == 0o640
    assert sorted(p.name for p in old.iterdir()) == ["r.md"]


# --- paths swapped while the run went on (issue 19, item 3): pinned at the start, never followed at the end ----

from clirace.cli._outputs import Destination, PathChanged, emit  # noqa: E402


def swapped(tmp_path, how):
    """A destination pinned while its path held nothing, then swapped the way a target could swap it."""
    path = tmp_path / "history.json"
    destination = Destination("--history", path)
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "keep").write_text("the user's")
    if how == "directory":
        path.mkdir()
        (path / "inside").write_text("x")
    elif how == "fifo":
        os.mkfifo(path)
    elif how == "link":
        os.symlink(victim / "keep", path)
    elif how == "file":
        path.write_text("planted")
    return destination, path, victim


@pytest.mark.timeout(10)
@pytest.mark.parametrize("how", ["directory", "fifo", "link", "file"])
def test_a_path_swapped_during_the_run_is_an_error_naming_it_and_nothing_is_followed(tmp_path, how):
    destination, path, victim = swapped(tmp_path, how)
    before = {p.name: p.read_bytes() for p in victim.iterdir()}
    with pytest.raises(PathChanged, match=re.escape(f"--history {path}")) as error:
        destination.write("new")
    destination.close()
    assert error.value.exit_code == 2
    assert {p.name: p.read_bytes() for p in victim.iterdir()} == before
    kind = {"directory": os.path.isdir, "fifo": lambda p: stat.S_ISFIFO(os.lstat(p).st_mode),
            "link": os.path.islink, "file": os.path.isfile}[how]
    assert kind(path)  # still what the target put there: not replaced, not written into
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_the_directory_swapped_for_a_link_is_an_error(tmp_path):
    reports = tmp_path / "reports"
    reports.mkdir()
    destination = Destination("-o", reports / "r.json")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    reports.rename(tmp_path / "moved")
    os.symlink(elsewhere, reports)
    with pytest.raises(PathChanged, match="its directory"):
        destination.write("x")
    destination.close()
    assert list(elsewhere.iterdir()) == []


@pytest.mark.timeout(10)
def test_a_fifo_given_by_the_user_is_written_in_place_and_one_without_reader_does_not_hang(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    destination = Destination("--report", fifo)
    with pytest.raises(UsageError, match="no reader"):
        destination.write("x")
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        destination.write("through the pipe")
        assert os.read(reader, 100) == b"through the pipe"
    finally:
        os.close(reader)
        destination.close()


def test_the_step_summary_is_appended_to(tmp_path, monkeypatch):
    summary = tmp_path / "step_summary.md"
    summary.write_text("# an earlier step\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    destination = Destination("--report", summary)
    destination.write("## clirace\n")
    destination.close()
    assert summary.read_text() == "# an earlier step\n\n## clirace\n"
    other = tmp_path / "other.md"
    other.write_text("old")
    Destination("--report", other).write("new")
    assert other.read_text() == "new"


def test_emit_writes_every_other_report_before_it_fails_on_a_swapped_one(tmp_path):
    outputs = Outputs("json", tmp_path / "r.json", (("junit", tmp_path / "r.xml"),), tmp_path / "h.json")
    pinned = check_all(outputs)
    (tmp_path / "h.json").mkdir()
    result = judge(hostile_history())
    with pytest.raises(PathChanged, match=re.escape(f"--history {tmp_path / 'h.json'}")):
        emit(result, outputs, pinned)
    pinned.close()
    assert json.loads((tmp_path / "r.json").read_text())["spec"] == result.spec_path
    assert ET.parse(tmp_path / "r.xml").getroot().tag == "testsuites"
