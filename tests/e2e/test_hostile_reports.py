"""The hostile Markdown fixture run for real: its escape sequences never reach a terminal."""
import os
import sys

import pexpect
import pytest

from ..conftest import FIXTURES, ROOT

SPEC = FIXTURES / "hostile" / "markdown.yaml"


def on_a_terminal(*args, **env) -> bytes:
    child = pexpect.spawn(sys.executable, ["-m", "clirace", *args], cwd=str(ROOT), timeout=60, dimensions=(40, 100),
                          env={**os.environ, **env})
    out = child.read()
    child.close()
    assert child.exitstatus in (0, 1), out.decode(errors="replace")
    return out


@pytest.mark.e2e
@pytest.mark.timeout(120)
def test_no_escape_from_the_target_reaches_a_terminal():
    plain = on_a_terminal("check", str(SPEC), NO_COLOR="1", TERM="dumb")
    assert b"\x1b" not in plain and b"\xc2\x9b" not in plain and b"\x07" not in plain
    assert b"\\x1b]52;c;" in plain  # shown, escaped
    coloured = on_a_terminal("check", str(SPEC), TERM="xterm-256color")
    for sequence in (b"\x1b]", b"\x1b[2J", b"\xc2\x9b", b"\x07"):
        assert sequence not in coloured



@pytest.mark.e2e
@pytest.mark.timeout(120)
def test_every_report_of_a_real_hostile_run_keeps_its_text_inert(tmp_path):
    reports = {fmt: tmp_path / f"r.{fmt}" for fmt in ("markdown", "json", "junit", "sarif", "text")}
    args = [a for fmt, path in reports.items() for a in ("--report", f"{fmt}={path}")]
    shown = on_a_terminal("check", str(SPEC), *args, "--format", "github", NO_COLOR="1", TERM="dumb")
    assert b"\x1b" not in shown and b"::error file=" in shown
    for fmt, path in reports.items():
        text = path.read_text()
        assert "\x1b" not in text.replace("\\u001b", "") and "@octocat" in text, fmt
