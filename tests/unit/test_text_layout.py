"""The text report's layout, through the real CLI judging a literal history (no target is launched)."""
import os
import re
import sys

import pexpect
import pytest

from clirace.verdict.rubric import load_section

from ..conftest import ROOT, run_clirace
from .histories import saveable
from .hostile import hostile_history

IDS = [c["id"] for level in load_section("s15")["levels"] for c in level.get("criteria", [])]
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def saved(tmp_path):
    path = tmp_path / "h.json"
    saveable(hostile_history()).save(path)
    return path


@pytest.fixture(scope="module")
def piped_at_60_columns(tmp_path_factory) -> str:
    """The report piped at COLUMNS=60, NO_COLOR unset: read by two tests (a judge costs about 0.6 s of CPU)."""
    env = {**os.environ, "COLUMNS": "60"}
    env.pop("NO_COLOR", None)
    return run_clirace("judge", saved(tmp_path_factory.mktemp("judged")), env=env).stdout


at_60_columns = pytest.mark.xdist_group("test_text_layout-60")  # one worker runs both, and so the judge once


@at_60_columns
def test_piped_output_has_no_trailing_spaces_and_whole_ids_at_60_columns(piped_at_60_columns):
    out = piped_at_60_columns
    lines = out.splitlines()
    assert lines and all(line == line.rstrip() for line in lines)
    assert all(len(line) <= 60 for line in lines)
    for criterion in IDS:
        assert any(re.search(rf"(^|\s){re.escape(criterion)}(\s|$)", line) for line in lines), criterion
    assert "\x1b" not in out and "\\x1b]52" in out


def tty(path, **env) -> str:
    full = {**os.environ, "TERM": "xterm-256color", **env}
    child = pexpect.spawn(sys.executable, ["-m", "clirace", "judge", str(path)], cwd=str(ROOT), timeout=30,
                          dimensions=(50, 90), env=full)
    out = child.read().decode()
    child.close()
    return out


def test_no_color_removes_colour_and_nothing_else(tmp_path):
    path = saved(tmp_path)
    coloured = tty(path)
    plain = tty(path, NO_COLOR="1")
    assert "\x1b[" in coloured and "\x1b[" not in ANSI.sub("", coloured)
    assert ANSI.sub("", coloured) == ANSI.sub("", plain)
    assert max(len(line) for line in ANSI.sub("", plain).splitlines()) <= 90  # the terminal's width


@at_60_columns
def test_below_90_columns_evidence_goes_under_its_criterion_and_wrapped_lines_keep_their_indent(piped_at_60_columns):
    lines = piped_at_60_columns.splitlines()
    assert lines[0].startswith("clirace gate failed: silent corruption")
    table = lines[lines.index("§15 Race Conditions & Concurrency") + 1:lines.index("Findings") - 1]
    heads = [n for n, line in enumerate(table) if re.match(r"[0-9] \S+  \S", line)]
    assert [table[n].split()[1] for n in heads] == IDS  # one line per criterion: level, id, status
    assert all(line.startswith("    ") for n, line in enumerate(table) if n not in heads)  # evidence, indented
    findings = lines[lines.index("Findings") + 1:]
    findings = findings[:next(n for n, line in enumerate(findings) if not line)]
    assert all(re.match(r"CR[0-9]{3} \S+ \[\w+\]$", line) or line.startswith("    ") for line in findings), findings
    assert any(len(line) > 50 for line in findings)  # long enough to have wrapped


def test_at_100_columns_the_criteria_are_a_table_and_the_score_headline_closes_the_report(tmp_path):
    env = {**os.environ, "COLUMNS": "100"}
    lines = run_clirace("judge", saved(tmp_path), env=env).stdout.splitlines()
    assert any(re.match(r"lvl +criterion +status +evidence", line) for line in lines)
    score = next(n for n, line in enumerate(lines) if line.startswith("score 0/3: level 1 needs"))
    assert any(line.startswith("  Level 0 in the rubric:") for line in lines[score + 1:])
