"""The text report's layout, through the real CLI judging a literal history (no target is launched)."""
import os
import re
import sys

import pexpect

from clirace.rubric import load_section

from ..conftest import ROOT, run_clirace
from .hostile import hostile_history

IDS = [c["id"] for level in load_section("s15")["levels"] for c in level.get("criteria", [])]
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def saved(tmp_path):
    path = tmp_path / "h.json"
    hostile_history().save(path)
    return path


def test_piped_output_has_no_trailing_spaces_and_whole_ids_at_60_columns(tmp_path):
    env = {**os.environ, "COLUMNS": "60"}
    env.pop("NO_COLOR", None)
    out = run_clirace("judge", saved(tmp_path), env=env).stdout
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
