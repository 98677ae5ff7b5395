#!/usr/bin/env python3
"""How long clirace takes to start: `--help`, `validate SPEC --no-tool` and `explain CODE` (issue 27, item 5).

    .venv/bin/python benchmarks/startup.py [--runs N] [--imports] [--against SRC]

Each command runs N times (default 10) as a user runs it, through the installed console script; the table gives
the median wall time and the median CPU (user + sys of the child, from its rusage: less sensitive to other jobs
on the machine than wall time), beside the floors: `python -c pass` (any Python program), `import typer`, and a
two-command Typer app with `rich_markup_mode=None` asked for its `--help` and run with one `str` argument (Typer
0.29 coerces every value that is not a flag through pydantic, which it imports then). The runs are interleaved,
one of each command in turn, so that every row sees the same load. With --against SRC (another checkout's src/,
e.g. of main before a change), clirace's rows are also run from there (PYTHONPATH=SRC), interleaved with the rest.
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


# Typer's own floor: the least a Typer command line costs here, whatever the program behind it.
TYPER_APP = """
import sys, typer
app = typer.Typer(rich_markup_mode=None)
@app.command()
def hello(name: str = typer.Argument("x")) -> None:
    pass
@app.command()
def bye(loud: bool = typer.Option(False, "--loud")) -> None:
    pass
sys.argv = ["app", *sys.argv[1:]]
app()
"""


def commands(against: str | None) -> dict[str, tuple[list[str], dict[str, str] | None]]:
    """Each row: its argv and its environment (None: this one's)."""
    exe = clirace_exe()
    clirace = {
        "clirace --help": [exe, "--help"],
        "clirace validate SPEC --no-tool": [exe, "validate", str(SPEC), "--no-tool"],
        "clirace explain lock-excludes": [exe, "explain", "lock-excludes"],
    }
    rows: dict[str, tuple[list[str], dict[str, str] | None]] = {
        "python -c pass": ([sys.executable, "-c", "pass"], None),
        "python -c 'import typer'": ([sys.executable, "-c", "import typer"], None),
        "Typer app --help": ([sys.executable, "-c", TYPER_APP, "--help"], None),
        "Typer app hello NAME (a str argument)": ([sys.executable, "-c", TYPER_APP, "hello", "NAME"], None),
    }
    for name, argv in clirace.items():
        rows[name] = (argv, None)
        if against is not None:
            rows[f"{name} (--against)"] = (argv, {**os.environ, "PYTHONPATH": against})
    return rows


def timed(argv: list[str], env: dict[str, str] | None = None) -> tuple[float, float]:
    """Wall seconds and CPU seconds (user + sys) of one run of argv; its output is thrown away."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=REPO, env=env)
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
    parser.add_argument("--against", metavar="SRC", help="also run clirace's rows from this src/ (PYTHONPATH)")
    args = parser.parse_args()
    header("startup.py", sys.argv[1:])
    compileall.compile_dir(REPO / "src" / "clirace", quiet=2)
    if args.against:
        compileall.compile_dir(Path(args.against) / "clirace", quiet=2)
    todo = commands(args.against)
    runs: dict[str, list[tuple[float, float]]] = {name: [] for name in todo}
    for argv, env in todo.values():
        timed(argv, env)  # once first: byte-compiled files written, the page cache warm
    for _ in range(args.runs):
        for name, (argv, env) in todo.items():
            runs[name].append(timed(argv, env))
    rows = [[name, f"{median([w for w, _ in got]) * 1000:.0f} ms", f"{min(w for w, _ in got) * 1000:.0f} ms",
             f"{median([c for _, c in got]) * 1000:.0f} ms", f"{min(c for _, c in got) * 1000:.0f} ms"]
            for name, got in runs.items()]
    print(table(f"Start-up, {args.runs} runs each, interleaved",
                ["command", "median wall", "fastest wall", "median CPU", "least CPU"], rows,
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
