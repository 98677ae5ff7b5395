#!/usr/bin/env python3
"""What the test suite costs, and the least wall time that cost allows on this machine.

    python benchmarks/suite.py [-m EXPR] [-n N] [--top K]

Runs the suite as the README does (`pytest -q`, its xdist workers as configured, or `-n N`), with `-m EXPR` a part
of it (`-m "not e2e"`: the fast subset), and prints: the tests and their outcome, the wall time, the CPU of the
whole process tree (pytest, its workers, every clirace and target they started and waited for), that CPU spread
over this machine's CPUs (the floor of the wall time for this much work: no scheduling of these tests goes below
it here), the share of the CPUs idle during the run (machine-wide, from /proc/stat: other work counts too), the
test seconds of each file (pytest's own timing of each test, summed) and the slowest tests. Asserts nothing.
"""
from __future__ import annotations

import argparse
import collections
import os
import resource
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _bench import REPO, header, table  # noqa: E402


def cpu_jiffies() -> tuple[int, int]:
    """(idle, total) jiffies of every CPU since boot (/proc/stat's first line; idle includes iowait)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    return fields[3] + fields[4], sum(fields[:8])  # user nice system idle iowait irq softirq steal


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-m", dest="markexpr", help='pytest -m: the part of the suite to run ("not e2e")')
    parser.add_argument("-n", dest="workers", help="pytest-xdist workers (default: as configured in pyproject.toml)")
    parser.add_argument("--top", type=int, default=15, help="files and tests listed (default 15)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="suite-") as tmp:
        junit = Path(tmp) / "junit.xml"
        argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={junit}",
                *(["-m", args.markexpr] if args.markexpr else []), *(["-n", args.workers] if args.workers else [])]
        idle_before, total_before = cpu_jiffies()
        started = time.perf_counter()
        proc = subprocess.Popen(argv, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        output = proc.communicate()[0].decode(errors="replace")
        # communicate() has reaped pytest already; its children's CPU is in this process's RUSAGE_CHILDREN.
        wall = time.perf_counter() - started
        idle_after, total_after = cpu_jiffies()
        tests = ET.parse(junit).getroot().iter("testcase") if junit.exists() else iter(())
        by_file: collections.Counter[str] = collections.Counter()
        counted: collections.Counter[str] = collections.Counter()
        slowest = []
        for case in tests:
            module, seconds = case.get("classname", ""), float(case.get("time", 0))
            by_file[module] += seconds
            counted[module] += 1
            slowest.append((seconds, module.rsplit(".", 1)[-1], case.get("name", "")))
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = usage.ru_utime + usage.ru_stime
    cpus = os.cpu_count() or 1
    idle = (idle_after - idle_before) / max(1, total_after - total_before)
    header("benchmarks/suite.py", sys.argv[1:])
    print(f"{' '.join(argv[1:])}: exit {proc.returncode}; {output.strip().splitlines()[-1] if output.strip() else ''}\n")
    test_seconds = sum(by_file.values())
    print(table("What the suite costs", ["wall", "CPU (the whole process tree)", f"CPU / {cpus} CPUs",
                                         "CPUs idle", "test seconds (summed)"],
                [[f"{wall:.1f} s", f"{cpu:.1f} s ({usage.ru_utime:.1f} user + {usage.ru_stime:.1f} sys)",
                  f"{cpu / cpus:.1f} s", f"{idle:.0%}", f"{test_seconds:.1f} s"]],
                note=f"CPU / {cpus} CPUs: the least wall time this much work can take on this machine, however the "
                     "tests are scheduled. CPUs idle: machine-wide during the run (other work included). Test "
                     "seconds: pytest's time of each test, summed over the workers (waits included)."))
    print(table(f"Test seconds by file (the {args.top} most)", ["file", "tests", "seconds"],
                [[module, counted[module], f"{seconds:.1f}"] for module, seconds in by_file.most_common(args.top)]))
    print(table(f"The {args.top} slowest tests", ["seconds", "file", "test"],
                [[f"{s:.1f}", module, name[:100]] for s, module, name in sorted(slowest, reverse=True)[:args.top]]))


if __name__ == "__main__":
    main()
