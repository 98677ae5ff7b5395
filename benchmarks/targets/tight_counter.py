#!/usr/bin/env python3
"""A minimal lock-free counter for benchmarks/detection.py: the tightest read-modify-write window stdlib allows.

`counter incr` reads $XDG_STATE_HOME/tight/counter, adds one and writes it back (pwrite + ftruncate) with no
lock and no sleep; `counter get` prints it. Nothing but os and sys is imported, so start-up is as short as
Python's own.
"""
import os
import sys


def main(argv):
    if argv[:1] != ["counter"] or argv[1:2] not in (["incr"], ["get"]):
        print("usage: tight_counter.py counter incr|get", file=sys.stderr)
        return 2
    directory = os.path.join(os.environ.get("XDG_STATE_HOME") or os.path.expanduser("~/.local/state"), "tight")
    os.makedirs(directory, exist_ok=True)
    fd = os.open(os.path.join(directory, "counter"), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        value = int(os.read(fd, 32).strip() or 0)
        if argv[1] == "incr":
            value += 1
            data = b"%d\n" % value
            os.pwrite(fd, data, 0)
            os.ftruncate(fd, len(data))
        print(value)
    finally:
        os.close(fd)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
