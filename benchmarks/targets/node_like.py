#!/usr/bin/env python3
"""A node-like counter for benchmarks/detection.py: a slow, syscall-heavy start-up, then an unlocked
read-modify-write.

Before it does anything, each invocation "resolves its modules" the way node does: it stats, opens and reads
every file of a module cache in $XDG_CACHE_HOME/nodelike/ (built on first use: MODULES small files), PASSES
times over, and compiles what it read: about 10,000 file syscalls and 100-150 ms on an idle core (0.3 s
under an amplifying strace). Only then does `counter incr`
read $XDG_STATE_HOME/nodelike/counter, add one and write it back in place, with no lock and no sleep.
Tracing every syscall of such a start-up (as amplified rounds do) spreads eight starts by far more than the
delays it adds, so a traced round can catch fewer lost increments than a plain one. stdlib only.
"""
import os
import sys

MODULES = 800
PASSES = 3


def base(var, fallback):
    path = os.path.join(os.environ.get(var) or os.path.expanduser(fallback), "nodelike")
    os.makedirs(path, exist_ok=True)
    return path


def module_cache():
    cache = os.path.join(base("XDG_CACHE_HOME", "~/.cache"), "modules")
    ready = os.path.join(cache, ".complete")
    if not os.path.exists(ready):  # first use in this home: build it (parallel builders write the same bytes)
        os.makedirs(cache, exist_ok=True)
        for n in range(MODULES):
            with open(os.path.join(cache, f"module{n:04d}.js"), "w") as fh:
                fh.write(f"exports = {{'id': {n}, 'name': 'module{n}'}}\n" * 8)
        open(ready, "w").close()
    return cache


def resolve_modules():
    cache = module_cache()
    names = sorted(os.listdir(cache))
    size = 0
    for _ in range(PASSES):
        for name in names:
            path = os.path.join(cache, name)
            os.stat(path)
            fd = os.open(path, os.O_RDONLY)
            try:
                source = os.read(fd, 65536)
            finally:
                os.close(fd)
            compile(source, path, "exec")  # node compiles what it loads: CPU between the syscalls
            size += len(source)
    return size


def main(argv):
    if argv not in (["counter", "incr"], ["counter", "get"]):
        print("usage: node_like.py counter incr|get", file=sys.stderr)
        return 2
    resolve_modules()
    path = os.path.join(base("XDG_STATE_HOME", "~/.local/state"), "counter")
    try:
        with open(path) as fh:
            value = int(fh.read().strip() or 0)
    except FileNotFoundError:
        value = 0
    if argv[1] == "incr":
        value += 1
        with open(path, "w") as fh:
            fh.write(f"{value}\n")
    print(value)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
