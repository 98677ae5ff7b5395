"""Ending processes clirace started: by the marker in their environment, sweeping until none is left.

The trial's sandbox (run/sandbox.py), the launcher (run/launch.py) and the leftover sweep of a killed run
(run/cleanup.py) all end processes this way; this module is theirs, below all three.
"""
from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable

from clirace.run.procfs import environ, pids

MARKER = "CLIRACE_TRIAL"


def end_marked(marker: str, name: str = MARKER, prefix: bool = False, within: float = 2.0) -> list[int]:
    """SIGKILL every process whose environment has `name`=`marker` (with `prefix`: a value starting with it).

    Sweeps until a sweep finds nothing, so a stray that forks while we sweep is caught by the next one;
    gives up after `within` seconds (a process that keeps forking faster than we kill) and returns the pids.
    """
    needle = f"{name}={marker}".encode()
    def match(env: bytes) -> bool:
        entries = env.split(b"\0")
        return any(entry.startswith(needle) for entry in entries) if prefix else needle in entries

    return _kill_until_gone(lambda: [pid for pid in pids() if match(environ(pid))], within)


def _kill_until_gone(find: Callable[[], list[int]], within: float, reap: bool = False) -> list[int]:
    """SIGKILL what `find()` lists (and, with `reap`, wait for those that are our children) until it lists
    nothing, or `within` seconds pass; returns the pids killed."""
    killed: list[int] = []
    deadline = time.monotonic() + within
    while True:
        found = find()
        if not found:
            return killed
        for pid in found:
            try:
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
            except ProcessLookupError:
                pass
        for pid in found if reap else ():
            try:
                os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                pass
        if time.monotonic() > deadline:
            return killed
        time.sleep(0.005)
