"""Text that came from the target, made safe to show: control characters escaped, runner paths shortened.

Everything a target printed (and everything derived from it: evidence, summaries, paths, notes) is untrusted
input. A terminal obeys escape sequences (OSC 52 writes the clipboard, OSC 8 hides a link, CSI 2J clears the
screen), so every renderer passes such text through `clean()` before it shows it anywhere.
"""
from __future__ import annotations

import os
import re
import sys
import tempfile
from enum import Enum

from clirace.verdict.result import Result

# C0 (tab and newline included: a caller that wants lines splits them first), DEL, C1; ESC is in C0.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
# clirace's run folder (run/cleanup.make_workdir: clirace-PID-[KIND-]HEX under TMPDIR, or /tmp for a server's) and
# a trial's sandbox directly inside it (KIND-HEX: kill-points-..., keys-...); or its private folder beside it
# (.clirace-PID-HEX.HEX: traces, kill logs), whose files read as the run's.
_BASES = "|".join(re.escape(base) for base in dict.fromkeys((tempfile.gettempdir().rstrip("/") or "/tmp", "/tmp")))
_RUNDIR = re.compile(rf"(?:{_BASES})/(\.?)clirace-[A-Za-z0-9_.-]+(/[A-Za-z0-9_.-]+)?")


def _run_path(m: re.Match[str]) -> str:
    if m.group(1):  # the private folder: whatever lies under it is clirace's own file of the run
        return "{run}" + (m.group(2) or "")
    return "{sandbox}" if m.group(2) else "{run}"


def escape_controls(text: str) -> str:
    """Every control character as a visible \\xNN, so a terminal never receives one from the target."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def shorten(text: str, spec_dir: str | None = None) -> str:
    """Runner-specific paths replaced by stable names: sandboxes, the spec's directory, the interpreter, home."""
    text = _RUNDIR.sub(_run_path, text)
    if sys.executable and len(sys.executable) > 1:  # not inside a longer name (.venv/bin/python3)
        text = re.sub(re.escape(sys.executable) + r"(?![\w.-])", "{python}", text)
    if spec_dir and len(spec_dir) > 1:
        text = text.replace(spec_dir.rstrip("/") + "/", "{spec_dir}/")
    home = os.path.expanduser("~")
    if len(home) > 1:
        text = re.sub(re.escape(home) + r"(?=/|\b)", "~", text)
    return text


def clean(text: object, spec_dir: str | None = None) -> str:
    """Untrusted text ready for any report, on one line: paths shortened, whitespace runs folded, controls
    escaped."""
    return escape_controls(" ".join(shorten(str(text), spec_dir).split()))


def clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit - 1] + "…"


def status_value(status: str) -> str:
    """A criterion or verdict status as its plain string ("pass", "fail", ...), whether str or str-Enum."""
    return status.value if isinstance(status, Enum) else status


def spec_dir_of(result: Result) -> str:
    return os.path.dirname(os.path.abspath(result.spec_path)) if result.spec_path else ""


def replay(result: Result, command: str) -> str:
    """A replay command that can be pasted in the directory clirace ran in: the spec named relative to it (or
    absolute outside it), nothing shortened (a `{spec_dir}` or a quoted `~` would not run), controls escaped."""
    import shlex

    from clirace.report._locate import display_path
    if result.spec_path:
        command = command.replace(shlex.quote(result.spec_path), shlex.quote(display_path(result.spec_path)))
    return escape_controls(" ".join(command.split()))
