"""run/_ending.py: killing ends with proof that the processes are gone (issue 26: a sandbox removed while a killed
process still finished a call that created a file in it was reported "Directory not empty" and left in TMPDIR).
The removal's own second try is tested with safefs.remove (tests/unit/test_safefs.py)."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from clirace.run import _ending, safefs

from ..procs import WRITERS, threads_alive


@pytest.mark.timeout(30)
@pytest.mark.parametrize("attempt", range(5))
def test_end_marked_returns_only_once_every_thread_of_what_it_killed_has_exited(tmp_path, attempt):
    folder = tmp_path / "box"
    folder.mkdir()
    marker = f"{os.getpid()}:{folder}"  # as clirace's: this process is alive, so no clirace's start-up sweep ends it
    proc = subprocess.Popen([sys.executable, "-c", WRITERS, str(folder), "-"], stdout=subprocess.PIPE,
                            env={**os.environ, _ending.MARKER: marker})
    try:
        assert proc.stdout is not None and proc.stdout.readline() == f"{proc.pid}\n".encode()
        assert _ending.end_marked(marker) == [proc.pid]
        assert threads_alive(proc.pid) == [], "end_marked returned while threads of the killed process ran"
        before = sorted(os.listdir(folder))
        assert safefs.remove(folder) == [], before[-5:]
    finally:
        proc.kill()
        proc.wait()
