"""run/_ending.py: killing ends with proof that the processes are gone, and a folder filled again while it is
emptied is emptied once more (issue 26: a sandbox removed while a killed process still finished a call
that created a file in it was reported "Directory not empty" and left in TMPDIR)."""
from __future__ import annotations

import errno
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


def test_a_folder_filled_again_while_it_is_emptied_is_emptied_once_more(tmp_path, monkeypatch):
    box = safefs.make_dir(tmp_path, "box-")
    (box / "home").mkdir()
    (box / "home" / "config").write_text("x")
    clear = _ending._clear
    late: list[str] = []

    def then_a_late_file(fd: int, shown: str, failures: list[str], depth: int) -> None:
        clear(fd, shown, failures, depth)
        if shown.endswith("/home") and not late:  # a process finishing its call: a file, once home is emptied
            late.append(shown)
            (box / "home" / "late").write_text("")

    monkeypatch.setattr(_ending, "_clear", then_a_late_file)
    assert safefs.remove(box) == [] and not box.exists()
    assert late == [str(box / "home")]


def test_a_folder_filled_again_every_time_is_reported_after_the_second_try(tmp_path, monkeypatch):
    box = safefs.make_dir(tmp_path, "box-")
    (box / "home").mkdir()
    clear = _ending._clear
    tries: list[str] = []

    def then_a_late_file(fd: int, shown: str, failures: list[str], depth: int) -> None:
        clear(fd, shown, failures, depth)
        if shown.endswith("/home"):
            tries.append(shown)
            (box / "home" / f"late-{len(tries)}").write_text("")

    monkeypatch.setattr(_ending, "_clear", then_a_late_file)
    assert safefs.remove(box) == [f"{box}/home: {os.strerror(errno.ENOTEMPTY)}"]
    assert len(tries) == 2
