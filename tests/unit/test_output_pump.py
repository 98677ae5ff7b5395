"""run/launch.py's output pump: one thread reads every invocation's output, so a stream it cannot watch or read
ends that stream alone (its invocation says why), never the thread that every later invocation needs."""
from __future__ import annotations

import os
import socket
import struct
import subprocess
import sys
import time

import pytest

from clirace.history.vocab import Outcome
from clirace.run.launch import Launcher, Running, _Pump

PY = sys.executable


@pytest.fixture
def pump(monkeypatch):
    """A pump of the test's own, so that one the test breaks does not take the process's shared pump with it."""
    own = _Pump()
    monkeypatch.setattr(_Pump, "_shared", own)
    return own


def closed_stream(tmp_path):
    """A pipe's read end, already closed: its fileno() raises."""
    read_end, write_end = os.pipe()
    os.close(write_end)
    stream = os.fdopen(read_end, "rb", buffering=0)
    stream.close()
    return stream


def regular_file(tmp_path):
    """A regular file, which epoll refuses to watch (EPERM): its registration raises."""
    (tmp_path / "plain").write_bytes(b"")
    return open(tmp_path / "plain", "rb", buffering=0)  # noqa: SIM115 - the pump closes it


def reset_socket(tmp_path):
    """A TCP connection its peer reset: watchable, but reading it raises ConnectionResetError."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        client = socket.create_connection(server.getsockname())
        peer, _ = server.accept()
    peer.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    peer.close()  # with a zero linger: a reset, not an end
    return os.fdopen(client.detach(), "rb", buffering=0)


@pytest.mark.timeout(20)
@pytest.mark.parametrize("bad_stream,why", [(closed_stream, "could not be read: clirace could not watch it"),
                                            (regular_file, "could not be read: clirace could not watch it"),
                                            (reset_socket, "could not be read to its end (ConnectionResetError")],
                         ids=["closed", "unwatchable", "reset"])
def test_a_stream_the_pump_cannot_watch_or_read_ends_alone_and_later_invocations_still_complete(tmp_path, pump,
                                                                                                 bad_stream, why):
    err_read, err_write = os.pipe()
    proc = subprocess.Popen([PY, "-S", "-c", "import sys; sys.stderr.write('said')"], stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=err_write)
    os.close(err_write)
    broken = Running("broken", [PY], {}, str(tmp_path), proc, time.monotonic(),
                     output=(bad_stream(tmp_path), os.fdopen(err_read, "rb", buffering=0)))
    broken.deadline = time.monotonic() + 5
    pump.add(broken)
    started = time.monotonic()
    after = Launcher(dict(os.environ), str(tmp_path), {}, 1.0).run("after", [PY, "-S", "-c", "print('after')"])
    assert (after.stdout, after.exit_code, after.timed_out) == ("after\n", 0, False), after
    assert time.monotonic() - started < 1.0  # not at its deadline
    inv = broken.finish()
    assert inv.stderr == "said" and not inv.timed_out, inv  # the stream that could be read was read whole
    assert inv.unread.startswith(f"its stdout {why}"), inv
    assert inv.outcome is Outcome.UNKNOWN and inv.ending() == f"exit 0; {inv.unread}", inv
