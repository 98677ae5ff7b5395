"""Helpers shared by the benchmark scripts: statistics, plain-text tables, a description of the machine.

The scripts print measured figures; they assert nothing about time (they are not tests).
"""
from __future__ import annotations

import datetime
import os
import platform
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
VENV_BIN = Path(sys.executable).parent


def clirace_exe() -> str:
    """The installed console script next to this interpreter, else whatever `clirace` is on PATH."""
    here = VENV_BIN / "clirace"
    return str(here) if here.exists() else (shutil.which("clirace") or "clirace")


def median(values):
    return statistics.median(values) if values else float("nan")


def percentile(values, q: float) -> float:
    """Nearest-rank percentile (q in 0..100): a value that was actually measured."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    rank = max(1, -(-len(ordered) * q // 100))  # ceil(n * q / 100), at least 1
    return ordered[int(rank) - 1]


def mean(values):
    return statistics.fmean(values) if values else float("nan")


def fmt(value, digits: int = 2) -> str:
    if isinstance(value, float):
        return "n/a" if value != value else f"{value:.{digits}f}"
    return str(value)


def table(title: str, header: list[str], rows: list[list], note: str = "") -> str:
    """A plain-text table (also valid Markdown when pasted between pipes)."""
    cells = [[str(c) for c in header]] + [[fmt(c) if isinstance(c, float) else str(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    line = lambda r: "| " + " | ".join(c.ljust(w) for c, w in zip(r, widths)) + " |"
    out = [title, "", line(cells[0]), "|" + "|".join("-" * (w + 2) for w in widths) + "|"]
    out += [line(r) for r in cells[1:]]
    if note:
        out += ["", note]
    return "\n".join(out) + "\n"


def machine() -> str:
    try:
        strace = subprocess.run(["strace", "-V"], capture_output=True, text=True).stdout.splitlines()[0]
    except (OSError, IndexError):
        strace = "strace not installed"
    try:
        cc = subprocess.run(["cc", "--version"], capture_output=True, text=True).stdout.splitlines()[0]
    except (OSError, IndexError):
        cc = "no cc"
    try:
        commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True,
                                text=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain", "--", "src"], capture_output=True,
                               text=True).stdout.strip()
        commit += " (src/ has uncommitted changes)" if dirty else ""
    except OSError:
        commit = "unknown"
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    return (f"date {datetime.datetime.now().astimezone().isoformat(timespec='seconds')}; nproc {os.cpu_count()}; "
            f"Python {platform.python_version()} ({sys.executable}); {strace}; {cc}; {platform.system()} "
            f"{platform.release()} {platform.machine()}; load average at start {load}; clirace at commit {commit}")


def header(script: str, argv: list[str]) -> None:
    print(f"# {script} {' '.join(argv)}".rstrip())
    print(f"# {machine()}")
    print()
