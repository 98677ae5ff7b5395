#!/usr/bin/env python3
"""A kubectl-shaped config tool for benchmarks/detection.py: it reads its state BEFORE it locks.

`config set NAME VALUE` does what `kubectl config set-cluster` does to ~/.kube/config: load the whole file,
apply the change to the loaded copy, then create `config.lock` beside it with O_CREAT|O_EXCL (on conflict:
"error: open .../config.lock: file exists", exit 1, as kubectl says it), rewrite the file in place
(O_TRUNC) from the copy, and remove the lock. The lock serialises the writes but protects nothing: the race
window is from the read to the lock's openat, and delaying writes (which happen under the lock) never widens
it. `config get NAME` prints the value. stdlib only, no sleeps.
"""
import json
import os
import sys


def paths():
    home = os.environ.get("HOME") or os.path.expanduser("~")
    directory = os.path.join(home, ".kube")
    os.makedirs(directory, exist_ok=True)
    return os.path.join(directory, "config"), os.path.join(directory, "config.lock")


def load(path):
    try:
        with open(path) as fh:
            text = fh.read()
    except FileNotFoundError:
        return {}
    return json.loads(text) if text.strip() else {}


def main(argv):
    if argv[:2] not in (["config", "set"], ["config", "get"]) or len(argv) != (4 if argv[1] == "set" else 3):
        print("usage: kubectl_shape.py config set NAME VALUE | config get NAME", file=sys.stderr)
        return 2
    config_path, lock_path = paths()
    config = load(config_path)  # read first, as kubectl loads the kubeconfig at start-up
    if argv[1] == "get":
        if argv[2] not in config:
            print(f"error: no entry named {argv[2]!r}", file=sys.stderr)
            return 1
        print(config[argv[2]])
        return 0
    config[argv[2]] = argv[3]
    text = json.dumps(config, indent=2, sort_keys=True) + "\n"
    try:
        lock = os.open(lock_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        print(f"error: open {lock_path}: file exists", file=sys.stderr)
        return 1
    try:
        with open(config_path, "w") as fh:  # in place, from the copy loaded before the lock
            fh.write(text)
    finally:
        os.close(lock)
        os.unlink(lock_path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
