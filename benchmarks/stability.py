#!/usr/bin/env python3
"""Verdict stability: run `clirace check` on each fixture N times and print the scores and criteria seen.

    python benchmarks/stability.py [--runs N] [--only levels|adversarial] [--histories DIR] [SPEC ...]

A score that changes between two runs of the same tool is the worst bug clirace can have, and so is a corruption
flag that does: this prints, per spec, every distinct (score, corruption flag, non-passing criteria) outcome with
how often it was seen, and the wall times. With --histories DIR, each run's history is kept there (named after the
spec's folder, its file's name unless it is clirace.yaml, and the run), so that an outcome seen once can be read
afterwards (`clirace judge DIR/NAME.json`): a sweep that only counts outcomes cannot say why one run differed.
Prints a table; asserts nothing. Expected scores come from the specs' own comments ("expected score N").
"""
from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def expected_score(spec: Path) -> str:
    for text in (spec.read_text(), (spec.parent / "README.md").read_text() if (spec.parent / "README.md").exists() else ""):
        found = re.search(r"[Ee]xpected(?: score)?:?\s*(?:score\s*)?(\d)", text)
        if found:
            return found.group(1)
    return "?"


def one_run(spec: Path, history: Path | None = None) -> tuple[str, float]:
    t0 = time.perf_counter()
    keep = ["--history", str(history)] if history is not None else []
    proc = subprocess.run([sys.executable, "-m", "clirace", "check", str(spec), "--format", "json", *keep],
                          capture_output=True, text=True)
    wall = time.perf_counter() - t0
    try:
        data = json.loads(proc.stdout)
    except ValueError:
        return f"error (exit {proc.returncode})", wall
    if "error" in data:  # a spec clirace could not check: its error object instead of a result
        return f"error (exit {proc.returncode}: {data['error'].get('kind', '?')})", wall
    # An experiment that ran and could not decide is `not_tested` with `indeterminate` in the JSON: say undecided.
    others = sorted(f"{c['id']}={'undecided' if c.get('indeterminate') else c['status']}"
                    for c in data["criteria"] if c["status"] != "pass")
    flag = " corruption" if data["corruption"] else ""
    return f"{data['score']}{flag} [{', '.join(others) or 'all pass'}]", wall


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("specs", nargs="*", type=Path)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--only", choices=["levels", "adversarial"])
    parser.add_argument("--histories", type=Path, help="keep each run's history in this folder")
    args = parser.parse_args()
    specs = [s.resolve() for s in args.specs] or [
        *(sorted(REPO.glob("fixtures/level*/clirace.yaml")) if args.only != "adversarial" else []),
        *(sorted(REPO.glob("fixtures/adversarial/*/clirace.yaml")) if args.only != "levels" else []),
    ]
    print(f"# benchmarks/stability.py, {args.runs} runs per spec, {time.strftime('%Y-%m-%d %H:%M:%S %Z')}")
    print("| spec | expected | outcomes (score, corruption flag, [criteria not passing]) x runs | median wall s |")
    print("|---|---|---|---|")
    for spec in specs:
        outcomes, walls = Counter(), []
        for run in range(args.runs):
            history = None
            if args.histories is not None:
                args.histories.mkdir(parents=True, exist_ok=True)
                stem = spec.name.removesuffix(".yaml").removesuffix(".clirace")
                name = spec.parent.name if stem == "clirace" else f"{spec.parent.name}-{stem}"
                history = args.histories / f"{name}-{run + 1}.json"
            outcome, wall = one_run(spec, history)
            outcomes[outcome] += 1
            walls.append(wall)
        walls.sort()
        seen = "; ".join(f"{o} x{n}" for o, n in outcomes.most_common())
        shown = spec.relative_to(REPO) if spec.is_relative_to(REPO) else spec
        print(f"| {shown} | {expected_score(spec)} | {seen} | {walls[len(walls) // 2]:.1f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
