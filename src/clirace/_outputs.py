"""Where reports go: `--format F` (stdout or -o PATH) and any number of `--report F=PATH`, plus `--history`.

Every path is checked writable before the run starts (a run can take minutes; a typo in a path must not
waste it), and every file is written atomically: a temp file in the same directory, then os.replace, so a
reader (a CI step, an editor) never sees half a report. Special files (/dev/stdout, a FIFO) are written in
place, since replacing them would replace the device node.
"""
from __future__ import annotations

import os
import stat
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from .errors import UsageError

FORMATS = ("text", "json", "markdown", "github", "junit", "sarif")


@dataclass(frozen=True)
class Outputs:
    format: str = "text"
    output: Path | None = None  # -o: where --format goes instead of stdout
    reports: tuple[tuple[str, Path], ...] = ()
    history: Path | None = None


def parse_report(value: str) -> tuple[str, Path]:
    fmt, sep, path = value.partition("=")
    if not sep or not path:
        raise UsageError(f"--report {value!r} is not FORMAT=PATH.", hint=f"e.g. --report sarif=clirace.sarif; "
                         f"formats: {', '.join(FORMATS)}.")
    if fmt not in FORMATS:
        raise UsageError(f"--report {value!r} names the format {fmt!r}, which does not exist.",
                         hint=f"Formats: {', '.join(FORMATS)}.")
    return fmt, Path(path)


def check_writable(option: str, path: Path) -> None:
    """Raise UsageError unless `path` can be written the way `write_atomic` writes it."""
    where = f"{option} {path}"
    if path.is_dir():
        raise UsageError(f"{where}: is a directory; expected a file path.")
    if path.exists() and not path.is_file():
        if not os.access(path, os.W_OK):
            raise UsageError(f"{where}: cannot be written.")
        return  # a device or FIFO, written in place
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        raise UsageError(f"{where}: the directory {parent} does not exist.", hint="Create it first.")
    if path.exists() and not os.access(path, os.W_OK):
        raise UsageError(f"{where}: the file is not writable.")
    try:  # the only sure test, also for root and for /proc or read-only mounts: create a temp file beside it
        fd, probe = tempfile.mkstemp(dir=parent, prefix=f".{path.name}.", suffix=".probe")
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise UsageError(f"{where}: cannot write in {parent} ({exc.strerror}).") from None


def check_all(outputs: Outputs) -> None:
    seen: dict[Path, str] = {}
    pairs = ([("-o", outputs.output)] if outputs.output else []) + [("--report", p) for _, p in outputs.reports]
    pairs += [("--history", outputs.history)] if outputs.history else []
    for option, path in pairs:
        check_writable(option, path)
        key = path.resolve()
        if key in seen:
            raise UsageError(f"{option} {path}: the same file is also given to {seen[key]}.")
        seen[key] = option


def write_atomic(path: Path, text: str) -> None:
    path = Path(path)
    if path.exists() and not path.is_file():
        with open(path, "w") as handle:
            handle.write(text)
        return
    fd, temp = tempfile.mkstemp(dir=path.parent if str(path.parent) else ".", prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
        if path.exists():
            os.chmod(temp, stat.S_IMODE(path.stat().st_mode))
        else:
            umask = os.umask(0)
            os.umask(umask)
            os.chmod(temp, 0o666 & ~umask)
        os.replace(temp, path)
    except BaseException:
        try:
            os.unlink(temp)
        except OSError:
            pass
        raise


def emit(result, outputs: Outputs) -> None:
    from .report import RENDERERS, console, render_text

    if outputs.history:
        write_atomic(outputs.history, _history_text(result.history))
    for fmt, path in outputs.reports:
        write_atomic(path, _terminated(RENDERERS[fmt](result)))
    if outputs.output:
        write_atomic(outputs.output, _terminated(RENDERERS[outputs.format](result)))
    elif outputs.format == "text":
        render_text(result, console())
    else:
        sys.stdout.write(_terminated(RENDERERS[outputs.format](result)))
        sys.stdout.flush()


def _terminated(text: str) -> str:
    return text if text.endswith("\n") else text + "\n"


def _history_text(history) -> str:
    """The history as History.save writes it (saved through a temp path so that the write is atomic)."""
    with tempfile.TemporaryDirectory(prefix="clirace-history-") as tmp:
        target = Path(tmp) / "history.json"
        history.save(target)
        return target.read_text()
