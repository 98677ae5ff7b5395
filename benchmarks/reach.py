#!/usr/bin/env python3
"""Reach: how often a default `clirace check` (no --parallel, no --rounds) catches the rare races of issue 11.

    python benchmarks/reach.py [--runs N] [--load] [TARGET ...]

Targets: kubectl (benchmarks/targets/kubectl_shape.yaml: reads its config, then takes an O_EXCL lock file,
then rewrites in place), node (benchmarks/targets/node_like.yaml: a slow, syscall-heavy start-up before an
unlocked read-modify-write), tight (fixtures/adversarial/tight-counter: pread then pwrite, microseconds
apart), and the fixtures of fixtures/reach in other runtimes and shapes: go-kube (client-go's shape in Go:
reads at start-up on two goroutines, then an O_EXCL lock file, a re-read, an in-place rewrite), go-counter
(an unlocked Go counter), node-keys (Node, fs.promises on libuv's threadpool), read-twice (Python, reads its
config twice, no lock). The Go ones are built first (fixtures/reach/gobuild.py, into a temp directory). Each
run is the workload's check alone (`--only`). With --load, one CPU-bound process per core (`python -c "while
True: pass"`) runs beside the checks. Prints, per target: runs caught (the check failed with a corruption
finding), the rounds that failed by kind (plain, amplified, at a rendezvous), the detection bound of any
pass, the wall time per run, and the machine's load average (1 min) before and after. Asserts nothing.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
REACH = REPO / "fixtures/reach"
TARGETS = {
    "kubectl": (REPO / "benchmarks/targets/kubectl_shape.yaml", "keys"),
    "node": (REPO / "benchmarks/targets/node_like.yaml", "counter"),
    "tight": (REPO / "fixtures/adversarial/tight-counter/clirace.yaml", "counter"),
    "go-kube": (REACH / "go-kube", "keys"),  # a Go fixture directory: built first (gobuild.py)
    "go-counter": (REACH / "go-counter", "counter"),
    "node-keys": (REACH / "node-keys/clirace.yaml", "keys"),
    "read-twice": (REACH / "read-twice/clirace.yaml", "keys"),
}


def one(spec: Path, check: str) -> dict:
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "clirace", "check", str(spec), "--only", check, "--format", "json"],
                          capture_output=True, text=True)
    wall = time.perf_counter() - started
    try:
        data = json.loads(proc.stdout)
    except ValueError:
        return {"caught": False, "wall": wall, "rates": {}, "error": proc.stderr[-300:]}
    verdict = data["checks"][check]
    return {"caught": verdict["status"] == "fail" and data["corruption"], "wall": wall, "rates": verdict["rates"],
            "status": verdict["status"]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("targets", nargs="*", help=f"any of {', '.join(TARGETS)} (default: all)")
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--load", action="store_true", help="one CPU-bound process per core beside the checks")
    args = parser.parse_args()
    for name in args.targets:
        if name not in TARGETS:
            parser.error(f"unknown target {name!r}; choose from {', '.join(TARGETS)}")
    reach(args.targets or list(TARGETS), args.runs, args.load)
    return 0


def spec_of(name: str, built: Path) -> tuple[Path, str]:
    """The target's spec (a Go fixture built into `built` first) and the check it is judged by."""
    spec, check = TARGETS[name]
    if (spec / "main.go").exists():
        sys.path.insert(0, str(REACH))
        import gobuild
        spec = gobuild.build(built, [spec.name])[spec.name]
    return spec, check


def reach(targets: list[str], runs_each: int, load: bool = False) -> None:
    """Print the table: per target, runs caught, failed rounds by kind, bound of passes, wall time per run,
    load average before and after. (Also the "reach" section of benchmarks/detection.py.)"""
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(os.cpu_count() or 1)] \
        if load else []
    built = tempfile.TemporaryDirectory(prefix="clirace-reach-")
    try:
        print(f"# benchmarks/reach.py, {runs_each} default runs per target"
              f"{', one CPU hog per core' if hogs else ''}, {time.strftime('%Y-%m-%d %H:%M:%S %Z')}, "
              f"{os.cpu_count()} cores")
        print("| target | caught | failed rounds: plain / amplified / rendezvous (of rounds) | "
              "bound of passes | median wall s (min-max) | load (1 min) before-after |")
        print("|---|---|---|---|---|---|")
        for name in targets:
            spec, check = spec_of(name, Path(built.name))
            load_before = os.getloadavg()[0]
            runs = []
            for n in range(runs_each):
                runs.append(one(spec, check))
                print(f"  {name} run {n + 1}/{runs_each}: {runs[-1].get('status', 'error')} "
                      f"({runs[-1]['wall']:.1f} s)", file=sys.stderr, flush=True)
            rates = [r["rates"] for r in runs if r["rates"]]
            total = sum(r.get("rounds", 0) for r in rates)
            failed = sum(r.get("failed_rounds", 0) for r in rates)
            amp = sum(r.get("failed_amplified_rounds", 0) for r in rates)
            met = sum(r.get("failed_rendezvous_rounds", 0) for r in rates)
            bounds = sorted({r["bound"] for r in rates if r.get("bound") is not None})
            walls = [r["wall"] for r in runs]
            print(f"| {name} | {sum(r['caught'] for r in runs)}/{len(runs)} | {failed - amp - met} / {amp} / {met} "
                  f"({total}) | {', '.join(f'{b:.0%}' for b in bounds) or '-'} | "
                  f"{statistics.median(walls):.1f} ({min(walls):.1f}-{max(walls):.1f}) | "
                  f"{load_before:.1f}-{os.getloadavg()[0]:.1f} |", flush=True)
    finally:
        built.cleanup()
        for hog in hogs:
            hog.kill()
            hog.wait()

if __name__ == "__main__":
    sys.exit(main())
