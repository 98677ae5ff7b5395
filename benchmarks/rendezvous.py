#!/usr/bin/env python3
"""Does the rendezvous catch lost updates in every round, under CPU load, and what does a locked tool pay?

    .venv/bin/python benchmarks/rendezvous.py [--runs N] [--parallel N] [--no-load] [--targets a,b]

Each run is one parallel round of `--parallel` invocations (default 8) through clirace's launcher (start
barrier), in a fresh state directory, in three modes: `plain` (no strace), `traced` (the rendezvous' strace
command line without its injection: what tracing alone costs) and `rendezvous` (every invocation under
rendezvous.commit_point_prefix; Rendezvous waits, then releases them together). A run *catches* the
race when updates are lost: the final counter (or number of keys) is below the number of invocations that
succeeded. Load: unless --no-load, one `python -c "while 1: pass"` per core (os.cpu_count()) runs for the
whole benchmark, beside whatever else the machine runs (the load average is printed).

Targets: tight = benchmarks/targets/tight_counter.py (microsecond window); slow-start =
fixtures/reach/slow_start_counter.py (1500-file start-up, then an unlocked read-modify-write); level3 =
fixtures/level3/tool.py (flock, correct; its default --lock-timeout 0 refuses the others); level3-wait = the
same with --lock-timeout 20000 (the others wait on the lock); read-then-lock = fixtures/reach/read_then_lock.py
(kubectl shape: reads, then takes an O_EXCL lock file; stopped at its lock call).
Prints plain-text tables; asserts nothing.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _bench import REPO, header, mean, percentile, table  # noqa: E402

from clirace.run import observe  # noqa: E402
from clirace.run.launch import Launcher  # noqa: E402
from clirace.run.rendezvous import Arrival, Rendezvous, commit_point_prefix  # noqa: E402
from clirace.run.stopper import LOCK_CALLS, READ_CALLS  # noqa: E402

TARGETS = {
    # name: (tool, args for invocation i, state file (relative to the run's directory), initial text, stop calls,
    #        path stopped on (relative), how to count what survived)
    "tight": (REPO / "benchmarks/targets/tight_counter.py", lambda i: ["counter", "incr"], "state/tight/counter",
              "0\n", READ_CALLS, "state/tight/counter", "counter"),
    "slow-start": (REPO / "fixtures/reach/slow_start_counter.py", lambda i: ["counter", "incr"],
                   "state/slow-start/counter", "0\n", READ_CALLS, "state/slow-start/counter", "counter"),
    "level3": (REPO / "fixtures/level3/tool.py", lambda i: ["counter", "incr"], "state/level3/counter", "0\n",
               READ_CALLS, "state/level3/counter", "counter"),
    "level3-wait": (REPO / "fixtures/level3/tool.py", lambda i: ["counter", "incr", "--lock-timeout", "20000"],
                    "state/level3/counter", "0\n", READ_CALLS, "state/level3/counter", "counter"),
    "read-then-lock": (REPO / "fixtures/reach/read_then_lock.py", lambda i: ["set", f"k{i}", f"v{i}"],
                       "config/read-then-lock/config.json", "{}\n", LOCK_CALLS["exclusive-create"],
                       "config/read-then-lock/config.lock", "keys"),
}


LOCKS = {"level3": "state/level3/lock", "level3-wait": "state/level3/lock"}


def untargeted(prefix: list[str]) -> list[str]:
    """The same strace command line without the injection: what tracing alone costs."""
    at = next(i for i, arg in enumerate(prefix) if arg.startswith("inject="))
    return prefix[:at - 1] + prefix[at + 1:]


def one_round(name: str, mode: str, parallel: int) -> dict:
    tool, args_of, state_rel, initial, calls, stop_rel, count = TARGETS[name]
    with tempfile.TemporaryDirectory(prefix="clirace-bench-rv-") as tmp:
        root = Path(tmp)
        state = root / state_rel
        state.parent.mkdir(parents=True, exist_ok=True)
        state.write_text(initial)
        env = {**os.environ, "XDG_STATE_HOME": str(root / "state"), "XDG_CONFIG_HOME": str(root / "config"),
               "HOME": str(root), "PYTHONDONTWRITEBYTECODE": "1"}
        launcher = Launcher(env, str(root), {}, 60)
        trace = root / "trace"
        trace.mkdir()
        rendezvous = mode == "rendezvous"
        # The lock file too (level3's): its refused flocks are what prove the others blocked, not idleness.
        locks = [str(root / LOCKS[name])] if name in LOCKS else []
        prefixes = [commit_point_prefix(trace / f"inv-{i}", [str(root / stop_rel), *locks], calls, cwd=str(root),
                                        also_trace="flock") for i in range(parallel)]
        wraps = {"plain": [()] * parallel, "traced": [untargeted(p) for p in prefixes], "rendezvous": prefixes}[mode]
        jobs = [(f"inv-{i}", [sys.executable, str(tool), *args_of(i)], None, wraps[i]) for i in range(parallel)]
        t0 = time.perf_counter()
        runnings = launcher.start_together(jobs)
        record = {}
        if rendezvous:
            arrival = Arrival.of([str(root / stop_rel)], cwd=str(root)) if calls == READ_CALLS else None
            with Rendezvous.of(runnings, trace, arrival=arrival) as meeting:
                meeting.wait_all_arrived()
                meeting.release()
                invocations = [r.finish() for r in runnings]
            record = meeting.record()
        else:
            invocations = [r.finish() for r in runnings]
        wall = time.perf_counter() - t0
        ok = sum(inv.exit_code == 0 for inv in invocations)
        text = state.read_text()
        survived = int(text.strip() or 0) if count == "counter" else len(json.loads(text or "{}"))
    return {"wall": wall, "ok": ok, "survived": survived, "lost": ok - survived, "caught": survived < ok,
            "timed_out": record.get("timed_out", False), "arrived": len(record.get("arrived", {})),
            "released_after": record.get("released_after_s")}


MODES = ("plain", "traced", "rendezvous")


def bench(names, runs: int, parallel: int) -> str:
    rows = []
    for name in names:
        for mode in MODES:
            rendezvous = mode == "rendezvous"
            results = []
            for n in range(runs):
                results.append(one_round(name, mode, parallel))
                r = results[-1]
                print(f"  {name} {mode} {n + 1}/{runs}: ok {r['ok']} survived {r['survived']} "
                      f"({r['wall']:.2f} s)", file=sys.stderr, flush=True)
            walls = [r["wall"] for r in results]
            released = [r["released_after"] for r in results if r["released_after"] is not None]
            rows.append([name, mode, f"{sum(r['caught'] for r in results)}/{runs}",
                         f"{mean([r['lost'] for r in results]):.1f}", f"{mean([r['ok'] for r in results]):.1f}",
                         f"{mean(walls):.2f}", f"{percentile(walls, 50):.2f}", f"{max(walls):.2f}",
                         f"{mean(released):.2f}" if released else "-",
                         f"{sum(r['timed_out'] for r in results)}" if rendezvous else "-",
                         f"{mean([r['arrived'] for r in results]):.1f}" if rendezvous else "-"])
    return table(
        f"Lost updates per parallel round of {parallel}: plain, traced (same strace, no stop), rendezvous",
        ["target", "mode", "runs catching (lost > 0)", "mean lost", "mean succeeded", "mean round wall s",
         "median s", "max s", "mean release after s", "released before all arrived", "mean arrived"], rows,
        "Method: one round per run in a fresh directory, launched with clirace's start barrier; lost = invocations "
        "that exited 0 minus updates present at the end. 'released before all arrived' counts rounds released by "
        "the settle rule (the others idle: blocked on or refused by the lock) or the overall cap.")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--parallel", type=int, default=8)
    parser.add_argument("--no-load", action="store_true", help="no CPU-bound job beside the benchmark")
    parser.add_argument("--targets", default=",".join(TARGETS))
    args = parser.parse_args(argv)
    names = [t for t in args.targets.split(",") if t]
    for name in names:
        if name not in TARGETS:
            parser.error(f"unknown target {name!r}; choose from {', '.join(TARGETS)}")
    usable, why = observe.available()
    if not usable:
        print(f"rendezvous not available: {why}", file=sys.stderr)
        return 1
    header("benchmarks/rendezvous.py", sys.argv[1:] if argv is None else argv)
    hogs = [] if args.no_load else [subprocess.Popen([sys.executable, "-c", "while 1: pass"])
                                    for _ in range(os.cpu_count() or 1)]
    started = time.perf_counter()
    try:
        print(f"# load: {len(hogs)} x `python -c 'while 1: pass'` (one per core)" if hogs else "# load: none added")
        print(bench(names, args.runs, args.parallel), flush=True)
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"# total wall time {time.perf_counter() - started:.0f} s; load average at end {load}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
