"""run/stopper.py's event waits: a rendezvous wakes when strace writes a trace line (inotify) and a turn ends when
its invocation exits (a pidfd), rather than looking every 2 ms. Each test would hang to its long timeout (and
fail) if the wake did not come. And every wait on an fd works above fd 1023, where select() gives up."""
import os
import resource
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass

import pytest

from clirace.run import safefs
from clirace.run.launch import Launcher
from clirace.run.services.proxy import Proxy
from clirace.run.stopper import TraceChanges, ended, wait_ended

LONG = 60.0  # a wait that is never meant to last this long: returning means the wake came


def test_a_wait_ends_when_a_trace_file_is_written(tmp_path):
    trace = tmp_path / "run-0.123"
    trace.write_text("")
    changes = TraceChanges([tmp_path])
    try:
        writer = threading.Thread(target=lambda: trace.write_text('read(3</x/config.json>, "", 4096) = 0\n'))
        started = time.monotonic()
        writer.start()
        changes.wait(LONG)
        writer.join()
        assert time.monotonic() - started < LONG / 2
    finally:
        changes.close()


def test_a_wait_ends_when_strace_starts_a_trace_file_for_a_new_process(tmp_path):
    changes = TraceChanges([tmp_path])
    try:
        started = time.monotonic()
        (tmp_path / "run-0.456").write_text("")
        changes.wait(LONG)
        assert time.monotonic() - started < LONG / 2
    finally:
        changes.close()


def test_each_write_wakes_one_wait_and_is_then_drained(tmp_path):
    """A wake is used up by the wait it ends: the next wait, with nothing new written, lasts its timeout."""
    changes = TraceChanges([tmp_path])
    try:
        (tmp_path / "run-0.789").write_text("x\n")
        changes.wait(LONG)
        started = time.monotonic()
        changes.wait(0.05)
        assert time.monotonic() - started >= 0.04
    finally:
        changes.close()


def test_a_folder_that_is_gone_falls_back_to_short_sleeps(tmp_path):
    changes = TraceChanges([tmp_path / "never-made"])
    started = time.monotonic()
    changes.wait(LONG)  # (the old poll: one POLL)
    changes.close()
    assert time.monotonic() - started < LONG / 2


@dataclass
class _Started:
    proc: subprocess.Popen
    pid: int


@pytest.mark.timeout(30)
def test_wait_ended_wakes_when_the_process_exits():
    proc = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    running = _Started(proc, proc.pid)
    try:
        assert not ended(running)
        started = time.monotonic()
        threading.Thread(target=proc.stdin.close).start()  # its stdin closed: it reads EOF and exits
        wait_ended(running, time.monotonic() + LONG)
        assert ended(running) and time.monotonic() - started < LONG / 2
    finally:
        proc.kill()
        proc.wait()


def test_wait_ended_gives_up_at_its_deadline():
    proc = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    try:
        wait_ended(_Started(proc, proc.pid), time.monotonic() + 0.05)
        assert proc.poll() is None
    finally:
        proc.kill()
        proc.wait()


def test_the_waits_work_with_fds_above_what_select_takes(tmp_path):
    """A check 256 wide holds over 500 fds (two pipes an invocation, trace files), more beside other work in the
    same process (the pytest plugin): select() refuses any fd above 1023, poll() does not."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 1200:
        pytest.skip(f"this process may open only {hard} files")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 1200), hard))
    filler = [os.open(os.devnull, os.O_RDONLY) for _ in range(1100)]
    proc = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    changes = TraceChanges([tmp_path])
    try:
        assert changes._fd is not None and changes._fd > 1024
        (tmp_path / "run-0.1").write_text("x\n")
        started = time.monotonic()
        changes.wait(LONG)
        proc.stdin.close()
        wait_ended(_Started(proc, proc.pid), time.monotonic() + LONG)
        assert time.monotonic() - started < LONG / 2
        running = Launcher(dict(os.environ), str(tmp_path), {}, LONG).start("high-fd", [sys.executable, "-c", "pass"])
        assert running.wait(LONG)  # (launch.Running.wait waits on a pidfd too)
        running.finish()
        assert _through_the_proxy(b"*1\r\n$4\r\nPING\r\n") == b"+PONG\r\n"  # (its sockets are above 1023 too)
        assert _through_a_pipe(b"x" * 200_000) == b"x" * 200_000  # (safefs.write_all, as it feeds a parked reader)
    finally:
        changes.close()
        proc.kill()
        proc.wait()
        for fd in filler:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def _through_the_proxy(request: bytes) -> bytes:
    """Send `request` through a services Proxy to a one-answer server; what comes back (b"" if nothing did)."""
    server = socket.create_server(("127.0.0.1", 0))

    def answer() -> None:
        conn, _ = server.accept()
        with conn:
            conn.recv(65536)
            conn.sendall(b"+PONG\r\n")
            conn.recv(1)  # (until the proxy closes its side)

    threading.Thread(target=answer, daemon=True).start()
    proxy = Proxy("redis", server.getsockname()[1], frozenset())
    try:
        with socket.create_connection(("127.0.0.1", proxy.port), timeout=LONG / 4) as client:
            client.sendall(request)
            return client.recv(65536)
    finally:
        proxy.close()
        server.close()


def _through_a_pipe(data: bytes) -> bytes:
    """`data` written with safefs.write_all into a non-blocking pipe (more than it holds) and read on the other side."""
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)
    got: list[bytes] = []

    def drain() -> None:
        with os.fdopen(read_end, "rb") as reader:
            got.append(reader.read())

    reader = threading.Thread(target=drain)
    reader.start()
    try:
        safefs.write_all(write_end, data, timeout=LONG / 4)
    finally:
        os.close(write_end)
        reader.join(LONG / 4)
    return got[0] if got else b""
