#!/usr/bin/env python3
"""How far below clirace's figures any launcher could go on this machine: the floors under two targets.

    /tmp/venv/bin/python benchmarks/floors.py [--reps N] [--skip skew,launcher]

1. Start skew of 8 (target: median <= 1 ms). Beside clirace's launcher, an ideal one that no exec-after-release
   barrier can beat: every target is exec'd *before* the release and stopped by ptrace at its first instruction
   (PTRACE_SEIZE of the parked shim with PTRACE_O_TRACEEXEC), then the 8 are detached back to back. What is
   left is each target's own way from its first instruction to main, and the scheduler. Each probe either
   exits at once after stamping, or naps 20 ms first, so that its exit cannot delay the others' starts.
2. Launcher cost for 64 x /bin/true, 8 at a time (target: <= 1.15x `xargs -P 8`): xargs, posix_spawn and
   Popen batches without a barrier, Popen batches behind the `sh` barrier shim, behind a minimal static shim
   (raw syscalls, no libc; built here with cc -nostdlib on x86-64 only, never shipped), and the Launcher with
   each shim.

Prints plain-text tables; asserts nothing. Needs cc (the probe and the minimal shim are compiled here).
"""
from __future__ import annotations

import argparse
import ctypes
import os
import platform
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _bench import header, median, percentile, table  # noqa: E402
from detection import build_c_target, read_skew_ms  # noqa: E402

import clirace.run.launch as launch  # noqa: E402

PARALLEL = 8
K = 64
NAP_MS = 20

# The sh shim's job in raw x86-64 syscalls: say ready, wait for EOF on stdin, stdin from /dev/null, execve.
MINIMAL_SHIM_C = r"""
#include <asm/unistd.h>
static long sys3(long n, long a, long b, long c) {
    long r;
    __asm__ volatile ("syscall" : "=a"(r) : "a"(n), "D"(a), "S"(b), "d"(c) : "rcx", "r11", "memory");
    return r;
}
void __attribute__((noreturn)) shim(long *sp) {
    char **argv = (char **)(sp + 1), **envp = argv + sp[0] + 1, c = '.';
    sys3(__NR_write, 1, (long)&c, 1);
    while (sys3(__NR_read, 0, (long)&c, 1) > 0) {}
    long fd = sys3(__NR_open, (long)"/dev/null", 0, 0);
    if (fd > 0) { sys3(__NR_dup2, fd, 0, 0); sys3(__NR_close, fd, 0, 0); }
    long err = sys3(__NR_execve, (long)argv[1], (long)(argv + 1), (long)envp);
    sys3(__NR_exit, err == -2 ? 127 : 126, 0, 0);
    for (;;) {}
}
__asm__(".globl _start\n_start:\n mov %rsp, %rdi\n and $-16, %rsp\n call shim\n");
"""

# --- 1. start skew floor -------------------------------------------------------------------------------------

PTRACE_SEIZE, PTRACE_DETACH, PTRACE_CONT, PTRACE_O_TRACEEXEC, PTRACE_EVENT_EXEC = 0x4206, 17, 7, 0x10, 4


def _libc():
    libc = ctypes.CDLL(None, use_errno=True)
    libc.ptrace.restype = ctypes.c_long
    libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
    return libc


def skew_launcher(probe: list[str], tmp: Path, nap: int) -> float:
    paths = [tmp / f"l{i}" for i in range(PARALLEL)]
    jobs = [(f"t{i}", [*probe, str(p), str(nap)], None) for i, p in enumerate(paths)]
    launch.Launcher(dict(os.environ), str(tmp), {}, 10.0).run_together(jobs)
    return read_skew_ms(paths)


def skew_exec_stopped(probe: list[str], tmp: Path, nap: int, libc=None, timeline=None) -> float:
    """Every probe already exec'd and stopped at its first instruction; then all detached back to back.

    With `timeline` (a list), appends each probe's stamp in ms after the first detach, earliest first.
    """
    libc = libc or _libc()
    paths = [tmp / f"x{i}" for i in range(PARALLEL)]
    gate_r, gate_w = os.pipe()
    procs = [subprocess.Popen([*launch.BARRIER, *probe, str(p), str(nap)], stdin=gate_r, stdout=subprocess.DEVNULL)
             for p in paths]
    os.close(gate_r)
    try:
        for proc in procs:
            if libc.ptrace(PTRACE_SEIZE, proc.pid, None, PTRACE_O_TRACEEXEC) != 0:
                raise OSError(ctypes.get_errno(), "PTRACE_SEIZE failed")
    finally:
        os.close(gate_w)  # the shims read EOF and exec their probe, which stops right after execve
    for proc in procs:
        while True:
            _, status = os.waitpid(proc.pid, 0)
            if os.WIFSTOPPED(status) and status >> 8 == signal.SIGTRAP | PTRACE_EVENT_EXEC << 8:
                break
            if not os.WIFSTOPPED(status):
                raise RuntimeError(f"probe ended before exec: status {status}")
            libc.ptrace(PTRACE_CONT, proc.pid, None, os.WSTOPSIG(status))
    detached = time.time_ns()
    for proc in procs:
        libc.ptrace(PTRACE_DETACH, proc.pid, None, None)
    for proc in procs:
        proc.wait()
    if timeline is not None:
        timeline.append(sorted((int(p.read_text()) - detached) / 1e6 for p in paths))
    return read_skew_ms(paths)


def skew(reps: int) -> str:
    rows, notes = [], []
    with tempfile.TemporaryDirectory(prefix="clirace-bench-floor-") as tmpdir:
        tmp = Path(tmpdir)
        probe, probe_name = build_c_target(tmp)
        if not probe:
            return f"Start skew floor: not measured ({probe_name})\n"
        methods = [("clirace Launcher.run_together", skew_launcher)]
        libc = _libc()
        try:
            skew_exec_stopped(probe, tmp, 0, libc)
            methods.append(("ideal: exec'd before release, stopped by ptrace, detached together",
                            lambda p, t, n: skew_exec_stopped(p, t, n, libc)))
        except OSError as exc:
            notes.append(f"the ptrace floor was not measured: {exc}")
        for method, fn in methods:
            for nap in (0, NAP_MS):
                fn(probe, tmp, nap)  # warm-up
                values = [fn(probe, tmp, nap) for _ in range(reps)]
                after = "exits at once" if not nap else f"naps {nap} ms, then exits"
                rows.append([method, after, reps, f"{median(values):.3f}", f"{percentile(values, 90):.3f}",
                             f"{min(values):.3f}"])
                print(f"  {method} / {after}: median {median(values):.3f} ms", file=sys.stderr, flush=True)
        if len(methods) > 1:
            timeline = []
            for _ in range(5):
                skew_exec_stopped(probe, tmp, NAP_MS, libc, timeline)
            notes.append("Each probe's start after the first detach, ms (ideal launcher, napping probe, 5 runs): " +
                         "; ".join(" ".join(f"{t:.3f}" for t in run) for run in timeline) + ".")
    note = (f"Method: {PARALLEL} {probe_name} probes per repetition, each stamping CLOCK_REALTIME as main's first "
            "action; skew = latest minus earliest.\n\n" + " ".join(notes))
    return table(f"Start skew of {PARALLEL}: clirace against the exec-stopped floor ({os.cpu_count()} CPUs)",
                 ["launched by", "probe after its stamp", "reps", "median ms", "p90 ms", "min ms"], rows, note)


# --- 2. launcher floor ---------------------------------------------------------------------------------------

def build_minimal_shim(tmp: Path) -> tuple[str | None, str]:
    if platform.machine() != "x86_64":
        return None, f"the minimal shim is x86-64 only (this is {platform.machine()})"
    src, exe = tmp / "shim.c", tmp / "shim"
    src.write_text(MINIMAL_SHIM_C)
    built = subprocess.run(["cc", "-Os", "-static", "-nostdlib", "-fno-stack-protector", "-o", str(exe), str(src)],
                           capture_output=True, text=True)
    if built.returncode != 0:
        return None, f"cc could not build the minimal shim: {built.stderr.strip()[:200]}"
    return str(exe), ""


def xargs_run() -> None:
    subprocess.run(f"seq {K} | xargs -P {PARALLEL} -I{{}} /bin/true", shell=True, check=True)


def posix_spawn_batches() -> None:
    for _ in range(K // PARALLEL):
        for pid in [os.posix_spawn("/bin/true", ["/bin/true"], os.environ) for _ in range(PARALLEL)]:
            os.waitpid(pid, 0)


def popen_batches(shim=()) -> None:
    for _ in range(K // PARALLEL):
        gate_r, gate_w = os.pipe()
        procs = [subprocess.Popen([*shim, "/bin/true"], stdin=gate_r, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, start_new_session=True) for _ in range(PARALLEL)]
        if shim:
            for proc in procs:
                proc.stdout.read(1)  # parked
        os.close(gate_r)
        os.close(gate_w)
        for proc in procs:
            proc.communicate()


def launcher_batches(shim=None) -> None:
    shipped = launch.Launcher._popen

    def with_shim(self, label, argv, extra_env, prefix=(), **kw):
        return shipped(self, label, argv, extra_env, prefix=(shim,) if prefix else (), **kw)

    launch.Launcher._popen = with_shim if shim else shipped
    try:
        runner = launch.Launcher(dict(os.environ), "/", {}, 10.0)
        for _ in range(K // PARALLEL):
            runner.run_together([(f"t{i}", ["/bin/true"], None) for i in range(PARALLEL)])
    finally:
        launch.Launcher._popen = shipped


def launcher(reps: int) -> str:
    with tempfile.TemporaryDirectory(prefix="clirace-bench-floor-") as tmpdir:
        shim, why_not = build_minimal_shim(Path(tmpdir))
        methods = [("xargs -P 8", xargs_run),
                   ("os.posix_spawn batches of 8, no barrier", posix_spawn_batches),
                   ("Popen batches of 8, no barrier", popen_batches),
                   ("Popen batches of 8 behind the sh shim", lambda: popen_batches(launch.BARRIER)),
                   ("Launcher.run_together (as shipped: sh shim)", launcher_batches)]
        if shim:
            methods[4:4] = [("Popen batches of 8 behind the minimal static shim", lambda: popen_batches((shim,)))]
            methods.append(("Launcher.run_together with the minimal static shim", lambda: launcher_batches(shim)))
        times = {name: [] for name, _ in methods}
        for name, fn in methods:
            fn()  # warm-up
        for _ in range(reps):  # interleaved, so that a busy moment hits every method alike
            for name, fn in methods:
                t0 = time.perf_counter()
                fn()
                times[name].append((time.perf_counter() - t0) * 1000)
    base = median(times["xargs -P 8"])
    rows = [[name, reps, f"{median(v):.1f}", f"{median(v) / base:.2f}x"] for name, v in times.items()]
    note = ("Method: wall time of 64 x /bin/true, 8 at a time, median of the repetitions, methods interleaved, "
            "after one warm-up each." + (f" NOTE: {why_not}." if why_not else ""))
    return table(f"Launcher floor: {K} x /bin/true, {PARALLEL} at a time (median wall ms)",
                 ["method", "reps", "ms", "vs xargs"], rows, note)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=30, help="repetitions per method (default 30)")
    parser.add_argument("--skip", default="", help="comma list of sections to skip: skew, launcher")
    args = parser.parse_args(argv)
    skip = set(filter(None, args.skip.split(",")))
    header("benchmarks/floors.py", sys.argv[1:])
    started = time.monotonic()
    if "skew" not in skip:
        print(skew(args.reps), flush=True)
    if "launcher" not in skip:
        print(launcher(args.reps), flush=True)
    print(f"# total wall time {time.monotonic() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
