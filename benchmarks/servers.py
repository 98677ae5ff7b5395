#!/usr/bin/env python3
"""What keeping the state in a server costs a check: the level-3 fixture against its Redis twin, in one run.

    python benchmarks/servers.py [--runs N]

fixtures/servers/redis-level3 is fixtures/level3 with its lock and counter in Redis (spec `services: redis`):
clirace starts a Redis server per trial, watches it with MONITOR, and meets the counter's rounds at its proxy.
The two checks run alternately, N times each (default 3), with the same seeds, so that the machine's load falls
on both alike. Prints each wall time, the medians, their ratio (issue 20 asks for at most 1.5) and the load
average before and after; asserts nothing. Scores are printed too: a fast wrong score is no figure.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SPECS = {"file": REPO / "fixtures/level3/clirace.yaml", "redis": REPO / "fixtures/servers/redis-level3/clirace.yaml"}


def one(spec: Path, seed: int) -> tuple[float, str]:
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "clirace", "check", str(spec), "--format", "json", "--seed",
                           str(seed)], capture_output=True, text=True)
    wall = time.perf_counter() - t0
    try:
        return wall, str(json.loads(proc.stdout)["score"])
    except (ValueError, KeyError):
        return wall, f"error (exit {proc.returncode})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    walls: dict[str, list[float]] = {name: [] for name in SPECS}
    for run in range(args.runs):
        for name, spec in SPECS.items():
            wall, score = one(spec, seed=run + 1)
            walls[name].append(wall)
            print(f"  run {run + 1} {name:5} score {score}  {wall:6.1f} s", flush=True)
    medians = {name: statistics.median(w) for name, w in walls.items()}
    for name, median in medians.items():
        print(f"{name:5} median {median:6.1f} s  ({', '.join(f'{w:.1f}' for w in walls[name])})")
    print(f"redis / file: {medians['redis'] / medians['file']:.2f}x")
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
