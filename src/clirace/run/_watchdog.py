"""The run's watchdog: a tiny process that outlives a SIGKILLed clirace and ends what that run started.

    python -I -S run/_watchdog.py CLIRACE_PID WORKDIR WORKDIR_FD PRIVATE PRIVATE_FD CGROUP RECORD
    (stdin: a pipe whose write end only clirace holds; the two fds: clirace's own, on the run's two folders)

Run from its own file with the standard library only (no clirace import, no site packages: it starts in about
10 ms). It blocks reading stdin. clirace writes "d" when its run is over (`_leftovers.end`, or its own exit):
then the watchdog exits. When stdin reaches end-of-file without that byte, clirace died without cleaning up
(SIGKILL, a CI runner cancelling the job, the OOM killer): it kills the run's cgroup (every process of every trial,
whatever it did to its session or environment), ends every process whose CLIRACE_TRIAL marker names the run
(`PID:WORKDIR/...`), sweeping until none is left, and removes the run's folders (the run folder unless clirace
said "k": kept with --keep), found through the fds wherever a target moved them, whatever the owner file in the
run folder says (a target can delete or rewrite it).
Without a cgroup, processes that cleared their environment are out of its reach; `sandbox.sweep_leftovers` has
the same limit.
"""
from __future__ import annotations

import os
import shutil
import signal
import stat
import sys
import time

TYPE_CHECKING = False  # typing's own constant, without importing typing (this process starts in about 10 ms)
if TYPE_CHECKING:
    from collections.abc import Callable

MARKER = b"CLIRACE_TRIAL="


def marked(prefix: bytes) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as handle:
                environ = handle.read()
        except OSError:
            continue
        if any(item.startswith(prefix) for item in environ.split(b"\0")):
            found.append(int(entry))
    return found


def kill_until_gone(find: Callable[[], list[int]], within: float = 5.0) -> None:
    """SIGKILL what find() lists until it lists nothing or `within` seconds pass (a process may fork meanwhile)."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        found = find()
        if not found:
            return
        for pid in found:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        time.sleep(0.005)


def in_cgroup(path: str) -> list[int]:
    pids: list[int] = []
    for folder, _dirs, _files in os.walk(path):
        try:
            with open(os.path.join(folder, "cgroup.procs")) as handle:
                pids += [int(line) for line in handle if line.strip().isdigit()]
        except OSError:
            pass
    return pids


def kill_cgroup(path: str) -> None:
    """cgroup.kill (Linux 5.14+), or SIGKILL to each process listed, until none is left; then remove it."""
    try:
        with open(os.path.join(path, "cgroup.kill"), "w") as handle:
            handle.write("1")
    except OSError:
        pass
    kill_until_gone(lambda: in_cgroup(path))
    for folder, _dirs, _files in sorted(os.walk(path), key=lambda entry: -entry[0].count("/")):
        try:
            os.rmdir(folder)
        except OSError:
            pass


def remove_held(fd: int, named: str) -> None:
    """Remove the folder `fd` is open on, wherever it is now; and a link a target put at its old name `named`."""
    try:
        now = os.readlink(f"/proc/self/fd/{fd}")
        if now.startswith("/") and os.path.samestat(os.lstat(now), os.fstat(fd)):
            os.chmod(fd, 0o700)  # a private folder is 0300 (not listable)
            shutil.rmtree(now, ignore_errors=True)
    except OSError:
        pass
    try:
        if stat.S_ISLNK(os.lstat(named).st_mode):
            os.unlink(named)
    except OSError:
        pass


def main() -> None:
    pid, workdir, workdir_fd, private, private_fd, cgroup, record = sys.argv[1:8]
    workdir = os.path.normpath(workdir)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C for clirace's terminal is clirace's to handle
    said = b""
    while True:
        try:
            chunk = os.read(0, 64)
        except InterruptedError:
            continue
        except OSError:
            break
        if not chunk:
            break
        said += chunk
    if b"d" in said:
        return
    if cgroup:
        kill_cgroup(cgroup)
    kill_until_gone(lambda: marked(MARKER + f"{pid}:{workdir}/".encode()))
    # The folders are the ones clirace made (the fds it passed on them), whatever the owner file in the run folder
    # now says: a target may have deleted or rewritten it. Only a run kept with --keep ("k") keeps its folder.
    if b"k" not in said:
        remove_held(int(workdir_fd), workdir)
    remove_held(int(private_fd), private)
    if record:  # the run's record (_leftovers.RECORDS): the run is over, nothing is left for a sweep
        try:
            os.unlink(record)
            os.rmdir(os.path.dirname(record))  # the last one, unless another run keeps one there
        except OSError:
            pass


if __name__ == "__main__":
    main()
