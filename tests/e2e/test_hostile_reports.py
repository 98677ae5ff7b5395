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

