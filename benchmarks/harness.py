#!/usr/bin/env python3
"""What clirace itself costs: start-up, launcher overhead against xargs, full checks of the fixtures, memory.

    /tmp/venv/bin/python benchmarks/harness.py [--quick] [--skip startup,launcher,levels]

1. `clirace --help` start-up: the installed console script and `python -m clirace`, median of 20.
2. Launcher overhead: 64 invocations of a trivial target in batches of 8 through Launcher.run_together, against
   `seq 64 | xargs -P 8 -I{} CMD` and against plain Popen batches of 8 (no barrier); median wall of 10.
   Target: launcher <= 1.15x xargs.
3. Wall time of a full `clirace check` of fixtures/level0..3 (median of 3) and the scores seen.
4. clirace's own peak memory (VmHWM of the clirace process, polled every 20 ms) during those same checks
   (level 3 is the one with a target: < 100 MB).

Prints plain-text tables; asserts nothing.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _bench import REPO, clirace_exe, header, median, table  # noqa: E402

from clirace.run.launch import Launcher  # noqa: E402

K, N = 64, 8
LAUNCHER_TARGET = 1.15
MEMORY_TARGET_MB = 100


def wall(argv, **kw) -> float:
    t0 = time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True, **kw)
    return time.perf_counter() - t0


# --- 1. start-up ------------------------------------------------------------------------------------------

def startup(reps: int) -> str:
    rows = []
    for name, argv in (("clirace --help (console script)", [clirace_exe(), "--help"]),
                       ("python -m clirace --help", [sys.executable, "-m", "clirace", "--help"]),
                       ("python -c pass (interpreter alone, for context)", [sys.executable, "-c", "pass"]),
                       ("python -c 'import clirace.cli' (import only)", [sys.executable, "-c", "import clirace.cli"])):
        wall(argv)  # warm the page cache
        values = [wall(argv) for _ in range(reps)]
        rows.append([name, reps, f"{1000 * median(values):.0f}", f"{1000 * min(values):.0f}",
                     f"{1000 * max(values):.0f}"])
    return table("Start-up time (ms)", ["command", "runs", "median ms", "min ms", "max ms"], rows,
                 "Method: wall time of each command run to completion, output discarded, after one warm-up run.")


# --- 2. launcher overhead -----------------------------------------------------------------------------------

def via_launcher(argv: list[str], cwd: str) -> float:
    t0 = time.perf_counter()
    launcher = Launcher(dict(os.environ), cwd, {}, 10.0)
    for batch in range(K // N):
        invs = launcher.run_together([(f"b{batch}-{i}", argv, None) for i in range(N)])
        if any(inv.exit_code != 0 for inv in invs):
            raise RuntimeError(f"{argv}: a run failed under the launcher")
    return time.perf_counter() - t0


def via_popen_batches(argv: list[str], cwd: str) -> float:
    t0 = time.perf_counter()
    for _ in range(K // N):
        procs = [subprocess.Popen(argv, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE) for _ in range(N)]
        for proc in procs:
            proc.communicate()
    return time.perf_counter() - t0


def via_xargs(argv: list[str], cwd: str) -> float:
    script = f"seq {K} | xargs -P {N} -I{{}} {shlex.join(argv)}"
    return wall(["sh", "-c", script], cwd=cwd)


def launcher_overhead(reps: int) -> str:
    rows = []
    with tempfile.TemporaryDirectory(prefix="clirace-bench-launch-") as cwd:
        for name, argv in (("/bin/true", ["/bin/true"]), ("python -S -c pass", [sys.executable, "-S", "-c", "pass"])):
            methods = (("xargs", via_xargs), ("launcher", via_launcher), ("popen", via_popen_batches))
            samples = {method: [] for method, _ in methods}
            for rep in range(reps + 1):  # interleaved, so a change of load hits every method alike
                for method, fn in methods:
                    value = fn(argv, cwd)
                    if rep:  # the first round is a warm-up
                        samples[method].append(value)
            figures = {method: median(values) for method, values in samples.items()}
            ratio = figures["launcher"] / figures["xargs"]
            rows.append([name, reps, f"{1000 * figures['xargs']:.0f}", f"{1000 * figures['launcher']:.0f}",
                         f"{1000 * figures['popen']:.0f}", f"{ratio:.2f}x",
                         "met" if ratio <= LAUNCHER_TARGET else "MISSED"])
    return table(f"Launcher overhead: {K} invocations, {N} at a time (median wall ms)",
                 ["target", "reps", f"xargs -P {N} ms", f"Launcher.run_together x{K // N} ms",
                  f"Popen batches of {N} (no barrier) ms", "launcher/xargs", f"<= {LAUNCHER_TARGET}x"], rows,
                 f"Method: `seq {K} | xargs -P {N} -I{{}} CMD` vs one Launcher running {K // N} batches of {N} "
                 f"(run_together each, output captured) vs {K // N} batches of {N} plain Popen+communicate; "
                 f"median of {reps}, the three interleaved, after one warm-up round.")


def launcher_breakdown(reps: int) -> str:
    """Where the launcher's time goes on the most trivial target."""
    argv = ["/bin/true"]
    methods = [("xargs -P 8", via_xargs), (f"Popen batches of {N}", via_popen_batches),
               (f"Popen batches of {N} through `sh -c 'exec \"$@\"'` (the shim's extra exec)",
                lambda a, c: via_popen_batches(["sh", "-c", 'exec "$@"', "shim", *a], c)),
               ("Launcher.run_together (as shipped)", via_launcher)]
    samples = {name: [] for name, _ in methods}
    with tempfile.TemporaryDirectory(prefix="clirace-bench-launch-") as cwd:
        for rep in range(reps + 1):
            for name, fn in methods:
                value = fn(argv, cwd)
                if rep:
                    samples[name].append(value)
    base = median(samples["xargs -P 8"])
    rows = [[name, reps, f"{1000 * median(v):.0f}", f"{median(v) / base:.2f}x"] for name, v in samples.items()]
    return table(f"Where the launcher's time goes: {K} x /bin/true, {N} at a time (median wall ms)",
                 ["method", "reps", "ms", "vs xargs"], rows,
                 "Method: as above, interleaved.")


# --- 3. fixture checks, and 4. memory (measured during the same runs) -----------------------------------------

def _kb(status: str, field: str) -> int | None:
    found = re.search(rf"^{field}:\s+(\d+) kB", status, re.M)
    return int(found.group(1)) if found else None


def _children(pid: int) -> list[int]:
    try:
        return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def checked_run(spec: Path) -> dict:
    """One `clirace check SPEC --format json`, under /usr/bin/time -v when present; polls the clirace process's
    VmHWM every 20 ms (the high-water mark only grows, so the last reading before it exits is its peak)."""
    time_bin = "/usr/bin/time" if os.access("/usr/bin/time", os.X_OK) else None
    with tempfile.TemporaryFile() as out, tempfile.NamedTemporaryFile("r") as log:
        argv = [clirace_exe(), "check", str(spec), "--format", "json"]
        t0 = time.perf_counter()
        proc = subprocess.Popen(([time_bin, "-v", "-o", log.name] if time_bin else []) + argv, stdout=out,
                                stderr=subprocess.DEVNULL)
        pid, hwm, samples = (None if time_bin else proc.pid), 0, 0
        while proc.poll() is None:
            if pid is None:  # clirace is the child of /usr/bin/time
                kids = _children(proc.pid)
                pid = kids[0] if kids else None
            if pid is not None:
                try:
                    value = _kb(Path(f"/proc/{pid}/status").read_text(), "VmHWM")
                except OSError:
                    value = None
                if value is not None:  # None: gone, or a zombie (no memory lines any more)
                    hwm, samples = max(hwm, value), samples + 1
            time.sleep(0.02)
        wall_s = time.perf_counter() - t0
        out.seek(0)
        try:
            data = json.loads(out.read())
            score, inner = str(data["score"]), data["seconds"]
        except (ValueError, KeyError):
            score, inner = f"error(exit {proc.returncode})", None
        found = re.search(r"Maximum resident set size \(kbytes\): (\d+)", log.read()) if time_bin else None
    return {"wall": wall_s, "score": score, "seconds": inner, "hwm_mb": hwm / 1024, "samples": samples,
            "time_mb": int(found.group(1)) / 1024 if found else None}


def levels(reps: int) -> tuple[str, str]:
    rows, mem_rows = [], []
    for level in range(4):
        spec = REPO / f"fixtures/level{level}/clirace.yaml"
        runs = []
        for n in range(reps):
            runs.append(checked_run(spec))
            print(f"  level{level} run {n + 1}/{reps}: score {runs[-1]['score']}, {runs[-1]['wall']:.1f} s, "
                  f"VmHWM {runs[-1]['hwm_mb']:.1f} MB", file=sys.stderr, flush=True)
        walls = [r["wall"] for r in runs]
        inner = [r["seconds"] for r in runs if r["seconds"] is not None]
        rows.append([f"fixtures/level{level}", reps, f"{median(walls):.1f}", f"{min(walls):.1f}", f"{max(walls):.1f}",
                     f"{median(inner):.1f}" if inner else "n/a", ", ".join(r["score"] for r in runs), level])
        peak = max(r["hwm_mb"] for r in runs)
        time_peaks = [r["time_mb"] for r in runs if r["time_mb"] is not None]
        mem_rows.append([f"fixtures/level{level}", reps, f"{peak:.1f}", min(r["samples"] for r in runs),
                         f"{max(time_peaks):.1f}" if time_peaks else "n/a",
                         "met" if peak < MEMORY_TARGET_MB else "MISSED"])
    checks = table("Full `clirace check fixtures/levelN/clirace.yaml --format json` (seconds)",
                   ["spec", "runs", "median wall s", "min s", "max s", "median `seconds` (JSON)", "scores seen",
                    "expected"], rows,
                   "Method: the installed console script, strace available, default rounds (3) and parallelism (8), "
                   "random seed each run, one run at a time; wall measured around the whole process.")
    memory = table("Peak memory of the clirace process during the same checks (MB)",
                   ["spec", "runs", "peak VmHWM MB (max over runs)", "samples (min)", "/usr/bin/time max RSS MB",
                    f"< {MEMORY_TARGET_MB} MB"], mem_rows,
                   "Method: /proc/<clirace pid>/status VmHWM polled every 20 ms until clirace exits; /usr/bin/time -v's "
                   "max RSS is the largest of clirace and every process it waited for, so it bounds clirace's from above.")
    return checks, memory


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="5 start-ups, 3 launcher reps, 1 run per fixture")
    parser.add_argument("--skip", default="", help="comma list of sections to skip: startup, launcher, levels "
                        "(levels also gives the memory table)")
    args = parser.parse_args(argv)
    skip = set(args.skip.split(","))
    header("benchmarks/harness.py", sys.argv[1:] if argv is None else argv)
    started = time.perf_counter()
    if "startup" not in skip:
        print(startup(5 if args.quick else 20), flush=True)
    if "launcher" not in skip:
        print(launcher_overhead(3 if args.quick else 10), flush=True)
        print(launcher_breakdown(3 if args.quick else 10), flush=True)
    if "levels" not in skip:
        for text in levels(1 if args.quick else 3):
            print(text, flush=True)
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"# total wall time {time.perf_counter() - started:.0f} s; load average at end {load}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
