#!/usr/bin/env python3
"""What judging a big saved history costs: its size, and the wall, CPU and peak memory of `clirace judge`.

    python benchmarks/bighistory.py [--rounds 10000] [--from HISTORY] [--runs N] [--where-memory-goes N]

The history is synthesized, not run: `clirace check` caps --rounds at 100 a run, so a 10,000-round history is
what a matrix of shards joins or what a --budget run leaves. The base is a real history (made here by
`clirace check fixtures/level0 --rounds 3 --seed 1`, unless --from gives one); its parallel workload rounds are
repeated, in turn, until there are --rounds of them, each copy numbered as the next round of its workload, and the
plan and the environment say that many rounds, so that every check judges every copy; each copy names a sandbox
of its own (as each round did), so that no two copies share the text of their paths. The file is written the way
`clirace check --history` writes it (indent 1).

Each run of `clirace judge FILE --format json -o OUT` is measured from outside (os.wait4: the CPU and the peak
resident memory of the judging process); the score and finding codes it printed are shown, to see that two runs,
and two versions of clirace, agree. --where-memory-goes N loads and judges an N-round copy in this process under
tracemalloc and prints the lines that hold the most memory at the peak of loading. Asserts nothing.
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
from _bench import REPO, clirace_exe, header, table  # noqa: E402

WORKLOAD_KINDS = ("counter", "keys", "claim", "output")


def base_history(workdir: Path) -> Path:
    path = workdir / "base.json"
    subprocess.run([clirace_exe(), "check", str(REPO / "fixtures/level0"), "--rounds", "3", "--seed", "1", "-q",
                    "--exit-zero", "--history", str(path), "--format", "json", "-o", str(workdir / "base-result.json")],
                   check=True, cwd=REPO, stdout=subprocess.DEVNULL)
    return path


def synthesize(base: Path, rounds: int, out: Path) -> int:
    """Write a history of `rounds` parallel workload rounds made from `base`'s; its size in bytes."""
    data = json.loads(base.read_text())
    trials = data.pop("trials")
    parallel = [t for t in trials if t["kind"] in WORKLOAD_KINDS and not t.get("serial")]
    if not parallel:
        raise SystemExit(f"{base}: no parallel workload rounds to repeat")
    others = [t for t in trials if not (t["kind"] in WORKLOAD_KINDS and not t.get("serial"))]
    per_workload: dict[str, int] = {}
    made = []
    for n in range(rounds):
        copy = dict(parallel[n % len(parallel)])
        copy["round"] = per_workload.get(copy["workload"], 0)
        per_workload[copy["workload"]] = copy["round"] + 1
        made.append(copy)
    for planned in data["plan"]:
        if planned["experiment"] == "workloads" and planned["part"] in per_workload:
            planned["trials"] = per_workload[planned["part"]]
    most = max(per_workload.values())
    data["options"]["rounds"] = data["environment"]["rounds"] = most
    head = json.dumps(data, indent=1)
    assert head.endswith("\n}")
    with open(out, "w") as handle:
        handle.write(head[:-2] + ',\n "trials": [\n')
        for n, trial in enumerate(others + made):
            text = json.dumps(trial, indent=1).replace("\n", "\n  ")
            if n >= len(others) and trial.get("sandbox"):  # each round had a sandbox of its own: so does each copy
                name = Path(trial["sandbox"]).name
                text = text.replace(name, f"{name.partition('-')[0]}-{n:016x}")
            handle.write((",\n" if n else "") + "  " + text)
        handle.write("\n ]\n}")
    return out.stat().st_size


def judge_once(history: Path, result: Path) -> dict:
    started = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "clirace", "judge", str(history), "--format", "json", "-o", str(result), "-q"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - started
    stderr = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    code = os.waitstatus_to_exitcode(status)
    verdict = "n/a"
    if result.exists() and code in (0, 1):
        out = json.loads(result.read_text())
        codes = sorted({f["code"] for check in out.get("checks", {}).values() if isinstance(check, dict)
                        for f in check.get("findings", [])})
        verdict = f"score {out.get('score')}; findings {' '.join(codes) or 'none'}"
    elif stderr:
        verdict = stderr.strip().splitlines()[-1][:120]
    return {"exit": code, "wall": wall, "cpu": usage.ru_utime + usage.ru_stime,
            "rss_mb": usage.ru_maxrss / 1024, "verdict": verdict}


def where_memory_goes(base: Path, rounds: int, workdir: Path) -> None:
    import tracemalloc

    from clirace.cli.pipeline import judge
    from clirace.history import History

    path = workdir / f"small-{rounds}.json"
    size = synthesize(base, rounds, path)
    tracemalloc.start(1)
    history = History.load(path)
    loaded, peak = tracemalloc.get_traced_memory()
    snapshot = tracemalloc.take_snapshot()
    judge(history)
    judged, judged_peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    print(f"# where the memory goes: a {rounds}-round history of {size / 1e6:.1f} MB, loaded in this process "
          f"under tracemalloc: {loaded / 1e6:.1f} MB held once loaded (peak {peak / 1e6:.1f} MB while loading); "
          f"{judged / 1e6:.1f} MB held after judging (peak {judged_peak / 1e6:.1f} MB)")
    for stat in snapshot.statistics("lineno")[:12]:
        frame = stat.traceback[0]
        print(f"#   {stat.size / 1e6:8.1f} MB  {stat.count:>9} blocks  {frame.filename.split('/src/')[-1]}:{frame.lineno}")
    print()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=10_000)
    parser.add_argument("--from", dest="base", type=Path, help="a saved history to repeat (default: a level-0 run)")
    parser.add_argument("--runs", type=int, default=2, help="judge runs (default 2)")
    parser.add_argument("--where-memory-goes", type=int, default=0, metavar="N",
                        help="also trace the memory of loading an N-round copy (e.g. 500)")
    parser.add_argument("--keep", type=Path, help="write the big history here and keep it")
    args = parser.parse_args()
    header("benchmarks/bighistory.py", sys.argv[1:])
    with tempfile.TemporaryDirectory(prefix="bighistory-") as tmp:
        workdir = Path(tmp)
        base = args.base or base_history(workdir)
        if args.where_memory_goes:
            where_memory_goes(base, args.where_memory_goes, workdir)
        big = args.keep or workdir / "big.json"
        size = synthesize(base, args.rounds, big)
        rows = []
        for run in range(1, args.runs + 1):
            load = os.getloadavg()[0]
            m = judge_once(big, workdir / f"result-{run}.json")
            rows.append([run, f"{size / 1e6:.0f}", m["exit"], f"{m['wall']:.1f}", f"{m['cpu']:.1f}",
                         f"{m['rss_mb']:.0f}", f"{load:.1f}", m["verdict"]])
        print(table(f"clirace judge on a {args.rounds}-round history (from {base.name})",
                    ["run", "MB", "exit", "wall s", "CPU s", "peak RSS MB", "load (1 min)", "verdict"], rows))


if __name__ == "__main__":
    main()
