"""The run's watchdog: a tiny process that outlives a SIGKILLed clirace and ends what that run started.

    python -I -S _watchdog.py CLIRACE_PID WORKDIR      (stdin: a pipe whose write end only clirace holds)

Run from its own file with the standard library only (no clirace import, no site packages: it starts in about
10 ms). It blocks reading stdin. clirace writes "d" when its run is over (`sandbox.end_run`, or its own exit):
then the watchdog ends any process still marked as the run's and exits. When stdin reaches end-of-file without
that byte, clirace died without cleaning up (SIGKILL, a CI runner cancelling the job, the OOM killer): it ends
every process whose CLIRACE_TRIAL marker names the run (`PID:WORKDIR/...`), sweeping until none is left, and
removes WORKDIR when it is a clirace run folder whose owner file says it is still running.
Processes that cleared their environment are out of its reach; `sandbox.sweep_leftovers` has the same limit.
"""
import os
import shutil
import signal
import sys
import time

MARKER = b"CLIRACE_TRIAL="
OWNER = ".clirace-owner"


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


def end_all(prefix: bytes, within: float = 5.0) -> None:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        found = marked(prefix)
        if not found:
            return
        for pid in found:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        time.sleep(0.01)


def main() -> None:
    pid, workdir = sys.argv[1], os.path.normpath(sys.argv[2])
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
    end_all(MARKER + f"{pid}:{workdir}/".encode())
    if b"d" in said:
        return
    try:
        with open(os.path.join(workdir, OWNER)) as handle:
            owner = handle.read().split()
    except OSError:
        return
    if owner[:1] == [pid] and owner[2:3] == ["running"] and os.path.basename(workdir).startswith("clirace-"):
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
