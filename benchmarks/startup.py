#!/usr/bin/env python3
"""How long clirace takes to start: `--help`, `validate SPEC --no-tool` and `explain CODE` (issue 27, item 5).

    .venv/bin/python benchmarks/startup.py [--runs N] [--imports]

Each command runs N times (default 10) as a user runs it, through the installed console script; the table gives
the median wall time and the median CPU (user + sys of the child, from its rusage: less sensitive to other jobs
on the machine than wall time), beside `python -c pass`, the floor any Python program pays on this machine.
With --imports, also what `import clirace.cli` and each command's own imports cost, by top-level package, from
`python -X importtime` (self times summed, so that a package counts once however deep its modules sit).

clirace is byte-compiled first, as an installed copy is (pip compiles what it installs); where
PYTHONDONTWRITEBYTECODE is set, a checkout would otherwise compile every module it imports on every start.

Prints plain-text tables; asserts nothing (tests/unit/test_startup.py checks which modules are imported, which is
deterministic, unlike a time).
"""
from __future__ import annotations

import argparse
import compileall
import os
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _bench import REPO, clirace_exe, header, median, table  # noqa: E402

SPEC = REPO / "fixtures" / "level3" / "clirace.yaml"


def commands() -> dict[str, list[str]]:
    exe = clirace_exe()
    return {
        "python -c pass": [sys.executable, "-c", "pass"],
        "clirace --help": [exe, "--help"],
        "clirace validate SPEC --no-tool": [exe, "validate", str(SPEC), "--no-tool"],
        "clirace explain lock-excludes": [exe, "explain", "lock-excludes"],
    }


def timed(argv: list[str]) -> tuple[float, float]:
    """Wall seconds and CPU seconds (user + sys) of one run of argv; its output is thrown away."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=REPO)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} exited {proc.returncode}")
    return wall, usage.ru_utime + usage.ru_stime


def by_package(code: str) -> list[tuple[str, float]]:
    """Milliseconds of import per top-level package (clirace split one level further), from -X importtime."""
    proc = subprocess.run([sys.executable, "-X", "importtime", "-c", code], capture_output=True, text=True,
                          cwd=REPO, check=False)
    totals: dict[str, float] = defaultdict(float)
    for line in proc.stderr.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        self_us, _, name = (part.strip() for part in line[len("import time:"):].split("|"))
        parts = name.split(".")
        key = ".".join(parts[:2]) if parts[0] == "clirace" else parts[0]
        totals[key] += int(self_us) / 1000
    return sorted(totals.items(), key=lambda item: -item[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--imports", action="store_true", help="also the import cost by package (-X importtime)")
    args = parser.parse_args()
    header("startup.py", sys.argv[1:])
    compileall.compile_dir(REPO / "src" / "clirace", quiet=2)
    rows = []
    for name, argv in commands().items():
        timed(argv)  # once first: byte-compiled files written, the page cache warm
        runs = [timed(argv) for _ in range(args.runs)]
        rows.append([name, f"{median([w for w, _ in runs]) * 1000:.0f} ms", f"{min(w for w, _ in runs) * 1000:.0f} ms",
                     f"{median([c for _, c in runs]) * 1000:.0f} ms"])
    print(table(f"Start-up, {args.runs} runs each", ["command", "median wall", "fastest wall", "median CPU"], rows,
                note=f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}"))
    if args.imports:
        argv_of = {"import clirace.cli": "import clirace.cli",
                   "--help": "import sys; sys.argv = ['clirace', '--help']; from clirace.cli import main; main()",
                   "validate": f"import sys; sys.argv = ['clirace', 'validate', {str(SPEC)!r}, '--no-tool']; "
                               "from clirace.cli import main; main()",
                   "explain": "import sys; sys.argv = ['clirace', 'explain', 'lock-excludes']; "
                              "from clirace.cli import main; main()"}
        for name, code in argv_of.items():
            found = by_package(code)
            total = sum(ms for _, ms in found)
            rows = [[pkg, f"{ms:.1f}"] for pkg, ms in found[:15]]
            print(table(f"Imports of {name}: {total:.0f} ms in all (self times by package, the 15 largest)",
                        ["package", "ms"], rows))


if __name__ == "__main__":
    main()
