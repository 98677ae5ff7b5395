#!/usr/bin/env python3
"""What a check costs next to what the tool itself costs: CPU, wall time, and where the time goes.

    python benchmarks/cost.py [--runs N] [--only NAME ...]

For each target (the level-3 fixture, its Redis twin, a real tool) it prints: the invocations the check made (from
its saved history), the tool's own CPU per invocation (its commands run alone, one at a time, in a throw-away
HOME, just before and just after each check: it drifts within minutes), the check's CPU (clirace, strace, the
servers and the tool together: the rusage of the whole process tree, which clirace reaps as a child subreaper),
the ratio of the two (each run against its own measurements; with --runs N, the median and range), the wall time,
the seconds of each stage (recorded in the history), the CPU and wall of judging and rendering the saved history
again, and the load average. Ratios, not absolute times: the machine is shared. Asserts nothing.
"""
from __future__ import annotations

import argparse
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _bench import REPO, clirace_exe, header, median, table  # noqa: E402

PY = sys.executable
CPUS = os.cpu_count() or 1
RACE_WIDTH = 8  # the spec's default `parallel` (spec.DEFAULT_PARALLEL), the width of the level-3 check's rounds


def _level3(tool: Path) -> list[list[str]]:
    """One of each command the level-3 checks run, with the tool's own interpreter."""
    base = [PY, str(tool)]
    return [base + ["config", "set", "k1", "v1"], base + ["counter", "incr"], base + ["counter", "get"],
            base + ["queue", "add", "item1"], base + ["queue", "claim"],
            base + ["process", "--input", "in", "--output", "{home}/out"], base + ["config", "get", "k1"]]


TARGETS = {
    "level3": (REPO / "fixtures/level3/clirace.yaml", lambda: _level3(REPO / "fixtures/level3/tool.py"), None),
    "redis-level3": (REPO / "fixtures/servers/redis-level3/clirace.yaml",
                     lambda: _level3(REPO / "fixtures/servers/redis-level3/tool.py"), "redis-server"),
    "git-config": (REPO / "docs/examples/git-config.clirace.yaml",
                   lambda: [["git", "config", "--global", "clirace.k1", "v1"],
                            ["git", "config", "--global", "user.email", "a@example.com"],
                            ["git", "config", "--global", "--unset", "clirace.k1"]], "git"),
}


def run_measured(argv: list[str], env: dict[str, str] | None = None, cwd: str | None = None) -> tuple[float, float, int]:
    """(CPU seconds of the whole process tree, wall seconds, exit status) of one command."""
    started = time.perf_counter()
    proc = subprocess.Popen(argv, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return usage.ru_utime + usage.ru_stime, time.perf_counter() - started, proc.returncode


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def tool_cpu_per_invocation(commands: list[list[str]], needs: str | None, repeats: int = 10, width: int = 1) -> float:
    """The tool's own CPU per invocation: each command alone, `repeats` times, in a fresh HOME (and a Redis
    server of its own for the Redis twin, whose CPU is not counted: the check's servers are). With width > 1,
    the same commands raced `width` at a time on one HOME, as a round does, without clirace or strace: what the
    tool's own invocations cost when they run beside each other on this machine (cache, scheduler and lock
    contention), the floor under any check that races them."""
    home = Path(tempfile.mkdtemp(prefix="cost-"))
    server = None
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CLIRACE", "XDG_"))}
    env.update(HOME=str(home), TMPDIR=str(home), XDG_CONFIG_HOME=str(home / ".config"),
               XDG_STATE_HOME=str(home / ".local/state"), XDG_CACHE_HOME=str(home / ".cache"),
               XDG_RUNTIME_DIR=str(home / "run"), XDG_DATA_HOME=str(home / ".local/share"))
    (home / "in").write_text("some input\n")
    try:
        if needs == "redis-server":
            port = _free_port()
            server = subprocess.Popen(["redis-server", "--port", str(port), "--save", "", "--appendonly", "no"],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            for _ in range(200):
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
                    break
                except OSError:
                    time.sleep(0.02)
            env["REDIS_URL"] = f"redis://127.0.0.1:{port}/0"
        cpu, count = 0.0, 0
        argvs = [[a.replace("{home}", str(home)) for a in argv] for argv in commands] * repeats
        if width == 1:
            for argv in argvs:
                used, _, _ = run_measured(argv, env=env, cwd=str(home))
                cpu += used
                count += 1
            return cpu / count
        for start in range(0, len(argvs), width):
            together = [subprocess.Popen(argv, env=env, cwd=str(home), stdout=subprocess.DEVNULL,
                                         stderr=subprocess.DEVNULL) for argv in argvs[start:start + width]]
            for proc in together:
                _, _, usage = os.wait4(proc.pid, 0)
                cpu += usage.ru_utime + usage.ru_stime
                count += 1
        return cpu / count
    finally:
        if server:
            server.terminate()
            server.wait()
        shutil.rmtree(home, ignore_errors=True)


def one_check(spec: Path, workdir: Path) -> dict:
    from clirace.history import History  # the project's own reader of what it saved

    history_path = workdir / "history.json"
    cpu, wall, status = run_measured([clirace_exe(), "check", str(spec), "--seed", "1", "-q", "--exit-zero",
                                      "--format", "json", "-o", str(workdir / "result.json"),
                                      "--history", str(history_path)])
    history = History.load(history_path)
    invocations = sum(len(t.invocations) for t in history.trials if hasattr(t, "invocations"))
    judge_cpu, judge_wall, _ = run_measured([clirace_exe(), "judge", str(history_path), "--exit-zero",
                                             "--format", "markdown", "-o", str(workdir / "report.md")])
    return {"cpu": cpu, "wall": wall, "status": status, "invocations": invocations,
            "stages": dict(history.environment.stage_seconds), "judge_cpu": judge_cpu, "judge_wall": judge_wall}


def spread(checks: list[dict], key: str, scale: float, fmt: str) -> str:
    """The median of one figure over the runs, and its range when there is more than one run."""
    values = sorted(c[key] * scale for c in checks)
    text = fmt.format(median(values))
    return text if len(values) == 1 else f"{text} ({fmt.format(values[0])}-{fmt.format(values[-1])})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=1, help="checks per target (the median is printed)")
    parser.add_argument("--only", nargs="*", choices=sorted(TARGETS), help="targets to measure")
    args = parser.parse_args()
    rows, stage_rows, run_rows = [], [], []
    for name in args.only or list(TARGETS):
        spec, commands, needs = TARGETS[name]
        if needs and not shutil.which(needs):
            rows.append([name, "-", "-", "-", "-", "-", "-", "-", "-", "-", "-", f"{needs} not available"])
            continue
        # The tool's own CPU drifts by a fifth within minutes on a shared machine (50 to 72 ms an invocation
        # within ten minutes, session 18), so each check is bracketed by its own measurements of the tool alone
        # and raced, and each run gets its own ratios; a single measurement before all the runs was off by that.
        checks = []
        for _ in range(args.runs):
            before = tool_cpu_per_invocation(commands(), needs)
            raced = tool_cpu_per_invocation(commands(), needs, repeats=16, width=RACE_WIDTH)
            with tempfile.TemporaryDirectory(prefix="cost-") as tmp:
                check = one_check(spec, Path(tmp))
            after = tool_cpu_per_invocation(commands(), needs)
            alone = (before + after) / 2
            check.update(alone=alone, raced=raced, ratio=check["cpu"] / (alone * check["invocations"]),
                         ratio_raced=check["cpu"] / (raced * check["invocations"]))
            checks.append(check)
            run_rows.append([name, len(checks), f"{before * 1000:.0f} ms", f"{after * 1000:.0f} ms",
                             f"{raced * 1000:.0f} ms", f"{check['cpu']:.1f} s", f"{check['ratio']:.2f}x",
                             f"{check['ratio_raced']:.2f}x", f"{check['wall']:.1f} s"])
        invocations = int(median([c["invocations"] for c in checks]))
        # Pooled: every run's check CPU over every run's invocations at the mean of all the tool-alone brackets.
        # One bracket moves from one minute to the next on a shared machine (49 to 77 ms an invocation between
        # runs of one session, 35 invocations a bracket); pooled, that drift averages out instead of deciding a ratio.
        pooled = sum(c["cpu"] for c in checks) / (sum(c["alone"] for c in checks) / len(checks)
                                                   * sum(c["invocations"] for c in checks))
        rows.append([name, invocations, spread(checks, "alone", 1000, "{:.0f} ms"),
                     f"{median([c['alone'] for c in checks]) * invocations:.1f} s",
                     spread(checks, "raced", 1000, "{:.0f} ms"), spread(checks, "cpu", 1, "{:.1f} s"),
                     spread(checks, "ratio", 1, "{:.2f}x"), f"{pooled:.2f}x",
                     spread(checks, "ratio_raced", 1, "{:.2f}x"),
                     spread(checks, "wall", 1, "{:.1f} s"), f"{median([c['cpu'] for c in checks]) / CPUS:.1f} s",
                     f"{median([c['judge_cpu'] for c in checks]):.2f} s CPU, "
                     f"{median([c['judge_wall'] for c in checks]):.2f} s wall"])
        last = checks[-1]
        stage_rows += [[name, stage, f"{seconds:.1f}"] for stage, seconds in last["stages"].items()]
    header("benchmarks/cost.py", sys.argv[1:])
    print(f"load average before the last check: {' '.join(f'{x:.2f}' for x in os.getloadavg())}\n")
    print(table("What a check costs next to the tool's own CPU",
                ["target", "invocations", "tool CPU / invocation", "tool CPU (all)",
                 f"raced {RACE_WIDTH} at a time", "check CPU", "ratio", "ratio, pooled", "ratio to raced", "wall",
                 f"check CPU / {CPUS} CPUs", "judge + report again"], rows,
                note="Medians over the runs, with their range. check CPU: clirace, strace, servers and the tool, the "
                     "whole process tree; tool CPU / invocation: the tool alone, measured just before and just after "
                     f"each check (their mean); raced: the same commands {RACE_WIDTH} at a time without clirace, "
                     "measured just before each check; ratio = check CPU / (alone x invocations) and ratio to raced "
                     "= check CPU / (raced x invocations), each run against its own measurements; ratio, pooled = "
                     "every run's check CPU / (the mean of every run's alone x every run's invocations); check CPU / "
                     f"{CPUS} CPUs: the least wall time a check doing this much work can take on this machine."))
    if len(run_rows) > len(rows):
        print(table("Each run", ["target", "run", "alone before", "alone after", "raced", "check CPU", "ratio",
                                 "ratio to raced", "wall"], run_rows))
    print(table("Where the wall time goes (seconds per stage, last run; side-by-side stages joined by +)",
                ["target", "stage", "seconds"], stage_rows))


if __name__ == "__main__":
    main()
