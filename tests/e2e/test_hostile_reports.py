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


@pytest.fixture(scope="module")
def hostile_run(tmp_path_factory):
    """One live check of the fixture on a terminal (GitHub format, every report, the history saved), read by both
    tests: the terminal's text formats are then rendered again from its history by `judge`, which launches nothing
    and renders through the same code as `check` (three live runs of the same fixture were two for nothing)."""
    out = tmp_path_factory.mktemp("hostile-markdown")
    reports = {fmt: out / f"r.{fmt}" for fmt in ("markdown", "json", "junit", "sarif", "text")}
    args = [a for fmt, path in reports.items() for a in ("--report", f"{fmt}={path}")]
    shown = on_a_terminal("check", str(SPEC), *args, "--format", "github", "--history", str(out / "h.json"),
                          NO_COLOR="1", TERM="dumb")
    return shown, reports, out / "h.json"


@pytest.mark.e2e
@pytest.mark.timeout(120)
def test_no_escape_from_the_target_reaches_a_terminal(hostile_run):
    _shown, _reports, history = hostile_run
    plain = on_a_terminal("judge", str(history), NO_COLOR="1", TERM="dumb")
    assert b"\x1b" not in plain and b"\xc2\x9b" not in plain and b"\x07" not in plain
    assert b"\\x1b]52;c;" in plain  # shown, escaped
    coloured = on_a_terminal("judge", str(history), TERM="xterm-256color")
    for sequence in (b"\x1b]", b"\x1b[2J", b"\xc2\x9b", b"\x07"):
        assert sequence not in coloured


@pytest.mark.e2e
@pytest.mark.timeout(120)
def test_every_report_of_a_real_hostile_run_keeps_its_text_inert(hostile_run):
    shown, reports, _history = hostile_run
    assert b"\x1b" not in shown and b"::error file=" in shown
    for fmt, path in reports.items():
        text = path.read_text()
        assert "\x1b" not in text.replace("\\u001b", "") and "@octocat" in text, fmt
