"""The run's watchdog: a tiny process that outlives a SIGKILLed clirace and ends what that run started.

    python -I -S run/_watchdog.py CLIRACE_PID WORKDIR WORKDIR_FD PRIVATE PRIVATE_FD CGROUP RECORD
    (stdin: a pipe whose write end only clirace holds; the two fds: clirace's own, on the run's two folders)

Run from its own file with the standard library only (no clirace import, no site packages: it starts in about
10 ms); the ending itself is run/_ending.py's, loaded from beside this file. It blocks reading stdin. clirace
writes "d" when its run is over (`cleanup.end_run`, or its own exit): then the watchdog exits. When stdin reaches
end-of-file without that byte, clirace died without cleaning up (SIGKILL, a CI runner cancelling the job, the OOM
killer): in the order of `_ending.end`, it kills the run's cgroup (every process of every trial, whatever it did
to its session or environment), ends every process whose CLIRACE_TRIAL marker names the run (`PID:WORKDIR/...`),
sweeping until none is left, and removes the run's folders (the run folder unless clirace said "k": kept with
--keep), found through the fds wherever a target moved them, whatever the owner file in the run folder says (a
target can delete or rewrite it).
Without a cgroup, processes that cleared their environment are out of its reach; `cleanup.sweep_leftovers` has
the same limit.
"""
from __future__ import annotations

import os
import signal
import sys

TYPE_CHECKING = False  # typing's own constant, without importing typing (this process starts in about 10 ms)
if TYPE_CHECKING:
    from collections.abc import Callable

    from clirace.run import _ending
else:  # the module beside this file, clirace's packages unused (appended: the standard library comes first)
    sys.path.append(os.path.dirname(os.path.abspath(__file__)))
    import _ending


def remove_held(fd: int, named: str) -> list[str]:
    """Remove the folder `fd` is open on, wherever it is now; and a link a target put at its old name `named`."""
    try:
        os.chmod(fd, 0o700)  # a private folder is 0300 (not listable)
    except OSError:
        pass
    return _ending.remove_tree(fd, _ending.where_now(fd) or named) + _ending.unlink_planted(named)


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
    # The folders are the ones clirace made (the fds it passed on them), whatever the owner file in the run folder
    # now says: a target may have deleted or rewritten it. Only a run kept with --keep ("k") keeps its folder.
    folders: list[Callable[[], list[str]]] = [lambda: remove_held(int(private_fd), private)]
    if b"k" not in said:
        folders.insert(0, lambda: remove_held(int(workdir_fd), workdir))
    _ending.end(f"{pid}:{workdir}/", prefix=True, cgroup=cgroup, folders=folders)
    if record:  # the run's record (cleanup.RECORDS): the run is over, nothing is left for a sweep
        try:
            os.unlink(record)
            os.rmdir(os.path.dirname(record))  # the last one, unless another run keeps one there
        except OSError:
            pass


if __name__ == "__main__":
    main()
