#!/usr/bin/env python3
"""How well clirace catches the tightest race, against the naive way, and how together its starts really are.

    /tmp/venv/bin/python benchmarks/detection.py [--quick] [--runs N] [--skew-reps N] [--skew-widths 8,64,...] [--targets fixture,own] [--load]

1. Detection rate: independent `clirace check SPEC --only counter --format json` runs on a lock-free counter
   whose read-modify-write is microseconds wide, with amplification (default) and with --no-strace; a run
   detects the race when `checks.counter.status` is "fail".
   Targets: `fixture` = fixtures/adversarial/tight-counter/tool.py through benchmarks/targets/tight_counter.yaml
   (counter workload only); `own` = benchmarks/targets/tight_counter.py (os + sys only, the fastest start-up).
2. The naive way: `for i in $(seq 8); do python tool.py counter incr & done; wait`, then read the counter.
3. Start skew of 8 parallel invocations, measured inside the target (latest minus earliest start), through
   clirace's barrier launcher, a plain loop of subprocess.Popen, and a shell `&` loop.
4. Reach (benchmarks/reach.py): default `clirace check` runs on the two races of issue 11 that random delays
   miss: `kubectl` (benchmarks/targets/kubectl_shape.py: reads its config, then takes an O_EXCL lock file,
   then rewrites in place) and `node` (benchmarks/targets/node_like.py: a slow, syscall-heavy start-up, then
   an unlocked read-modify-write), and the Go and Node fixtures of issue 18 (`go-kube`, `go-counter`,
   `node-keys`: fixtures/reach); `--load` runs them with one CPU-bound process per core beside them.

Prints plain-text tables; asserts nothing. Run sequentially on an otherwise idle machine.
"""
from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _bench import REPO, clirace_exe, header, mean, median, percentile, table  # noqa: E402

from clirace.run.launch import Launcher  # noqa: E402

TARGETS = {
    "fixture": {
        "name": "adversarial/tight-counter tool.py",
        "spec": REPO / "benchmarks/targets/tight_counter.yaml",
        "tool": REPO / "fixtures/adversarial/tight-counter/tool.py",
        "state": "tight-counter/counter",
    },
    "own": {
        "name": "benchmarks/targets/tight_counter.py",
        "spec": REPO / "benchmarks/targets/tight_counter_own.yaml",
        "tool": REPO / "benchmarks/targets/tight_counter.py",
        "state": "tight/counter",
    },
}
PARALLEL = 8
DEFAULT_ROUNDS = 3

C_SOURCE = r"""
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
int main(int argc, char **argv) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);   /* first action: the moment this process started running main */
    char buf[32];
    int n = snprintf(buf, sizeof buf, "%lld\n", (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec);
    int fd = open(argv[1], O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || write(fd, buf, n) != n) return 1;
    if (argc > 2) {                        /* floors.py: nap N ms after stamping, so this probe's own exit */
        struct timespec nap = {0, atol(argv[2]) * 1000000L};   /* cannot delay the others' starts */
        nanosleep(&nap, 0);
    }
    return close(fd) != 0;
}
"""
PY_STAMP = "import sys, time; t = time.time_ns(); open(sys.argv[1], 'w').write(str(t))"


# --- 1. detection rate -------------------------------------------------------------------------------------

def one_check(spec: Path, strace: bool) -> dict:
    argv = [clirace_exe(), "check", str(spec), "--only", "counter", "--format", "json"]
    if not strace:
        argv.append("--no-strace")
    t0 = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    try:
        data = json.loads(proc.stdout)
        counter = data["checks"]["counter"]
    except (ValueError, KeyError):
        return {"status": f"error (exit {proc.returncode})", "wall": wall, "rates": {},
                "stderr": proc.stderr[-400:]}
    return {"status": counter["status"], "wall": wall, "rates": counter.get("rates") or {},
            "strace_on": data["environment"].get("strace")}


def detection(targets, runs: int) -> str:
    rows = []
    for key in targets:
        target = TARGETS[key]
        for strace in (True, False):
            results = []
            for n in range(runs):
                results.append(one_check(target["spec"], strace))
                print(f"  {key} {'amplified' if strace else '--no-strace'} run {n + 1}/{runs}: "
                      f"{results[-1]['status']} ({results[-1]['wall']:.1f} s)", file=sys.stderr, flush=True)
            errors = [r for r in results if r["status"] not in ("pass", "fail")]
            for r in errors[:1]:
                print(f"  error: {r.get('stderr')}", file=sys.stderr)
            failed = sum(r["status"] == "fail" for r in results)
            rounds = sorted({r["rates"].get("rounds") for r in results if r["rates"].get("rounds")})
            plain_rounds = sum(r["rates"].get("rounds", 0) - r["rates"].get("amplified_rounds", 0) for r in results)
            plain_failed = sum(r["rates"].get("failed_rounds", 0) - r["rates"].get("failed_amplified_rounds", 0)
                               for r in results)
            amp_rounds = sum(r["rates"].get("amplified_rounds", 0) for r in results)
            amp_failed = sum(r["rates"].get("failed_amplified_rounds", 0) for r in results)
            if strace and not all(r.get("strace_on") for r in results if "strace_on" in r):
                mode = "default (strace NOT usable: no amplification)"
            else:
                mode = "default (rounds 2.. amplified)" if strace else "--no-strace"
            rows.append([
                target["name"], mode, runs,
                f"{failed}/{runs} = {100 * failed / runs:.0f}%" + (f" ({len(errors)} errors)" if errors else ""),
                "/".join(map(str, rounds)) or "?",
                f"{plain_failed}/{plain_rounds}" if plain_rounds else "-",
                f"{amp_failed}/{amp_rounds}" if amp_rounds else "-",
                f"{mean([r['wall'] for r in results]):.2f}",
            ])
    return table(
        f"Detection rate: clirace check SPEC --only counter --format json, {PARALLEL} in parallel per round",
        ["target", "mode", "runs", "runs detecting (counter fail)", "rounds/run", "plain rounds failed",
         "amplified rounds failed", "mean wall s/run"], rows,
        "Method: independent runs, one after another, random seed each; a run detects the race when "
        "checks.counter.status is \"fail\"; round counts from checks.counter.rates.")


def as_is(runs: int) -> str:
    """The fixture's own spec (all four workloads) with --only counter: what the counter-only spec saves."""
    spec = REPO / "fixtures/adversarial/tight-counter/clirace.yaml"
    rows = []
    for strace in (True, False):
        results = [one_check(spec, strace) for _ in range(runs)]
        rows.append([str(spec.relative_to(REPO)), "default (amplified)" if strace else "--no-strace", runs,
                     ", ".join(r["status"] for r in results), f"{mean([r['wall'] for r in results]):.2f}"])
    counter_only = TARGETS["fixture"]["spec"].relative_to(REPO)
    return table("Cost of `--only counter` on the fixture's own spec (for comparison with the counter-only spec)",
                 ["spec", "mode", "runs", "counter status", "mean wall s/run"], rows,
                 f"Method: same command as above on the fixture's full spec; --only counter runs the counter workload "
                 f"alone, so this should cost about what {counter_only} does in the table above.")


# --- 2. the naive shell loop ---------------------------------------------------------------------------------

def naive(targets, reps: int) -> str:
    rows = []
    for key in targets:
        target = TARGETS[key]
        lost_reps, lost_total, walls, finals = 0, 0, [], []
        for _ in range(reps):
            with tempfile.TemporaryDirectory(prefix="clirace-bench-naive-") as tmp:
                env = {**os.environ, "XDG_STATE_HOME": tmp, "HOME": tmp, "PYTHONDONTWRITEBYTECODE": "1"}
                script = (f'for i in $(seq {PARALLEL}); do "$0" "$1" counter incr >/dev/null & done; wait; '
                          f'"$0" "$1" counter get')
                t0 = time.perf_counter()
                proc = subprocess.run(["bash", "-c", script, sys.executable, str(target["tool"])], env=env,
                                      capture_output=True, text=True)
                walls.append(time.perf_counter() - t0)
                final = int(proc.stdout.split()[-1])
                finals.append(final)
                lost_total += PARALLEL - final
                lost_reps += final < PARALLEL
        rows.append([target["name"], reps, PARALLEL, f"{lost_reps}/{reps} = {100 * lost_reps / reps:.0f}%",
                     f"{lost_total}/{reps * PARALLEL}", min(finals), f"{mean(walls):.2f}"])
    return table(
        "Naive detection: `for i in $(seq 8); do python tool.py counter incr & done; wait`, then `counter get`",
        ["target", "repetitions", "increments each", "repetitions losing any", "increments lost", "lowest final",
         "mean wall s"], rows,
        "Method: bash backgrounds 8 increments with no barrier in a fresh XDG_STATE_HOME, waits, reads the counter; "
        "a repetition loses an increment when the counter ends below 8.")


# --- 3. start skew -------------------------------------------------------------------------------------------

def build_c_target(tmp: Path) -> tuple[list[str] | None, str]:
    cc = shutil.which("cc") or shutil.which("gcc")
    if not cc:
        return None, "cc not found"
    src = tmp / "stamp.c"
    src.write_text(C_SOURCE)
    for extra, how in ((["-static"], "static"), ([], "dynamic")):
        exe = tmp / f"stamp-{how}"
        if subprocess.run([cc, "-O2", *extra, "-o", str(exe), str(src)], capture_output=True).returncode == 0:
            return [str(exe)], f"C, {how}ally linked ({cc})"
    return None, "cc failed to compile the stamp program"


def fresh(paths):
    for p in paths:
        p.unlink(missing_ok=True)
    return paths


def read_skew_ms(paths) -> float:
    stamps = [int(Path(p).read_text()) for p in paths]
    return (max(stamps) - min(stamps)) / 1e6


def skew_launcher(base: list[str], tmp: Path, width: int = PARALLEL) -> float:
    paths = fresh([tmp / f"l{i}" for i in range(width)])
    launcher = Launcher(dict(os.environ), str(tmp), {}, 10.0)
    invs = launcher.run_together([(f"t{i}", [*base, str(p)], None) for i, p in enumerate(paths)])
    bad = [i for i in invs if i.exit_code != 0]
    if bad:
        raise RuntimeError(f"target failed under the launcher: {bad[0].stderr}")
    return read_skew_ms(paths)


def skew_popen(base: list[str], tmp: Path, width: int = PARALLEL) -> float:
    paths = fresh([tmp / f"p{i}" for i in range(width)])
    procs = [subprocess.Popen([*base, str(p)]) for p in paths]
    for proc in procs:
        proc.wait()
    return read_skew_ms(paths)


def skew_shell(base: list[str], tmp: Path, width: int = PARALLEL) -> float:
    paths = fresh([tmp / f"s{i}" for i in range(width)])
    script = f'for p in "$@"; do {shlex.join(base)} "$p" & done; wait'
    subprocess.run(["sh", "-c", script, "sh", *map(str, paths)], check=True)
    return read_skew_ms(paths)


def skew(reps: int, widths: tuple[int, ...] = (PARALLEL,)) -> str:
    rows = []
    with tempfile.TemporaryDirectory(prefix="clirace-bench-skew-") as tmpdir:
        tmp = Path(tmpdir)
        c_target, c_note = build_c_target(tmp)
        targets = []
        if c_target:
            targets.append((c_note, c_target))
        else:
            print(f"NOTE: {c_note}: measuring the Python target only", file=sys.stderr)
        targets.append(("python -S -c (time.time_ns)", [sys.executable, "-S", "-c", PY_STAMP]))
        methods = [("clirace Launcher.run_together", skew_launcher), ("subprocess.Popen loop, then wait", skew_popen),
                   ("sh: `prog & ` loop, wait", skew_shell)]
        for width in widths:
            for name, base in targets:
                for method, fn in methods:
                    for _warm in range(2):
                        fn(base, tmp, width)
                    values = [fn(base, tmp, width) for _ in range(reps)]
                    rows.append([width, name, method, reps, f"{median(values):.3f}", f"{percentile(values, 90):.3f}",
                                 f"{max(values):.3f}"])
                    print(f"  skew {width} x {name} / {method}: median {median(values):.3f} ms", file=sys.stderr,
                          flush=True)
    note = ("Method: WIDTH invocations per repetition; each target writes CLOCK_REALTIME ns to its own file as its "
            "first action; skew = latest minus earliest; 2 warm-up repetitions not counted.")
    if not c_target:
        note += f" NOTE: {c_note}, so only the Python target was measured."
    return table("Start skew of WIDTH parallel invocations, measured inside the target (ms)",
                 ["width", "target", "launched by", "reps", "median ms", "p90 ms", "max ms"], rows, note)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="5 runs / 5 repetitions / 10 skew repetitions")
    parser.add_argument("--runs", type=int, help="clirace runs per target and mode (default 20)")
    parser.add_argument("--naive-reps", type=int, help="naive-loop repetitions (default 20)")
    parser.add_argument("--skew-reps", type=int, help="start-skew repetitions (default 50)")
    parser.add_argument("--skew-widths", default=str(PARALLEL),
                        help=f"comma list of parallel widths for the skew section (default {PARALLEL}; e.g. 8,64,128,256)")
    parser.add_argument("--targets", default="fixture,own", help="comma list of: fixture, own (default both)")
    parser.add_argument("--skip", default="", help="comma list of sections to skip: detection, asis, naive, skew, "
                        "reach (--quick skips asis)")
    parser.add_argument("--load", action="store_true", help="reach: one CPU-bound process per core beside the checks")
    args = parser.parse_args(argv)
    runs = args.runs or (5 if args.quick else 20)
    naive_reps = args.naive_reps or (5 if args.quick else 20)
    skew_reps = args.skew_reps or (10 if args.quick else 50)
    targets = [t for t in args.targets.split(",") if t]
    for t in targets:
        if t not in TARGETS:
            parser.error(f"unknown target {t!r}")
        if not TARGETS[t]["tool"].exists():
            parser.error(f"target {t!r}: {TARGETS[t]['tool']} does not exist")
    skip = set(args.skip.split(","))
    header("benchmarks/detection.py", sys.argv[1:] if argv is None else argv)
    started = time.perf_counter()
    if "detection" not in skip:
        print(detection(targets, runs), flush=True)
    if "asis" not in skip and not args.quick and "fixture" in targets:
        print(as_is(1), flush=True)
    if "naive" not in skip:
        print(naive(targets, naive_reps), flush=True)
    if "skew" not in skip:
        print(skew(skew_reps, tuple(int(w) for w in args.skew_widths.split(","))), flush=True)
    if "reach" not in skip:
        from reach import reach
        reach(["kubectl", "node", "go-kube", "go-counter", "node-keys"], runs, args.load)
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"# total wall time {time.perf_counter() - started:.0f} s; load average at end {load}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
