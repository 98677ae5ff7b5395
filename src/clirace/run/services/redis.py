"""A Redis server of the trial's own, watched with MONITOR.

One server per trial, not a database number per trial: redis-server is ready in about 15 ms, and a server of
its own isolates everything a tool may do (FLUSHALL, SELECT 0, CONFIG SET, pub/sub, a URL without a database
number), so trials side by side never see each other. It listens on a free loopback port (MONITOR names a
TCP client by its port, so each connection's commands can be told apart; a unix socket names them all
alike), saves nothing to disk, and carries the trial's marker, so the trial's own end sweeps it if it
outlives its shutdown.
"""
from __future__ import annotations

import os
import socket
import subprocess
import threading
import time
from pathlib import Path

from clirace.errors import RedisError, ServiceFailed
from clirace.history import ServerOp
from clirace.run.services._resp import MONITOR_LINE, Client, monitor_words

READY_WITHIN = 5.0
MAX_OPS = 5000  # commands kept per trial; beyond, server_note says how many were dropped
LINE_CAP = 300  # characters of each MONITOR line kept for evidence


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class RedisTrial:
    """The trial's Redis server, from start to shutdown, with what MONITOR saw meanwhile."""

    def __init__(self, binary: str, private: Path, env: dict[str, str]):
        self.lines: list[str] = []
        self.dropped = 0
        self._mark = f"clirace-end-{os.urandom(6).hex()}"
        self._marked = threading.Event()
        for _ in range(5):  # another process may take the free port before the server binds it
            self.port = free_port()
            log = private / "redis.log"
            self.proc = subprocess.Popen(
                [binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                 "--set-proc-title", "no", "--daemonize", "no", "--dir", str(private), "--logfile", str(log),
                 "--loglevel", "warning"], env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL)
            try:
                self.control = self._connect()
                break
            except ServiceFailed:
                self.proc.kill()
                self.proc.wait()
                said = log.read_text(errors="replace")[-300:] if log.exists() else ""
                if "Address already in use" not in said:
                    raise ServiceFailed(f"redis-server did not start: {' '.join(said.split()) or 'no log'}") from None
        else:
            raise ServiceFailed("redis-server found no free loopback port in five tries")
        self.monitor = Client(self.port)
        self.monitor.command("MONITOR")
        # Then no timeout: a round's clients may send nothing for seconds (50 starting up on two busy cores), and
        # a reader that gave up then would lose the rest of the round unseen. stop() ends it (the server closes).
        self.monitor.sock.settimeout(None)
        self.lost = ""  # why MONITOR's reader stopped before the trial's end mark, if it did
        self._reader = threading.Thread(target=self._read_monitor, daemon=True)
        self._reader.start()

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def _connect(self) -> Client:
        deadline = time.monotonic() + READY_WITHIN
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise ServiceFailed(f"redis-server exited ({self.proc.returncode})")
            try:
                client = Client(self.port)
                if client.command("PING") == "PONG" and self._ours(client):
                    return client
                client.close()
            except (OSError, RedisError):
                pass
            time.sleep(0.002)
        raise ServiceFailed(f"redis-server did not answer PING within {READY_WITHIN:g}s")

    def _ours(self, client: Client) -> bool:
        """Whether `client` reached this trial's own server. Another check's server may have bound the free port
        first: it answers PING too, while this one fails to bind and exits, and the loop in __init__ then starts
        it again on another port (as PostgresServer does, by its data folder)."""
        info = client.command("INFO", "server")
        return isinstance(info, str) and f"process_id:{self.proc.pid}\r\n" in info

    def _read_monitor(self) -> None:
        try:
            while True:
                line = self.monitor.reply()
                if not isinstance(line, str):
                    continue
                if self._mark in line:
                    self._marked.set()
                elif len(self.lines) < MAX_OPS:
                    self.lines.append(line)
                else:
                    self.dropped += 1
        except (OSError, RedisError, ValueError) as exc:
            self.lost = str(exc) or type(exc).__name__
            self._marked.set()  # the server went away: nothing more will come

    def take_nx(self, key: str, value: str, ttl_ms: int) -> bool:
        return self.control.command("SET", key, value, "NX", "PX", ttl_ms) == "OK"

    def delete(self, key: str) -> None:
        self.control.command("DEL", key)

    def finish(self, epoch0: float) -> tuple[tuple[ServerOp, ...], str]:
        """What MONITOR saw from the trial's clients (clirace's own connections left out), then shut down.
        `epoch0`: the wall-clock time of the trial's start, which MONITOR's timestamps are counted from."""
        note = ""
        try:  # a mark through the server: once MONITOR shows it, every earlier command has been seen
            self.control.command("ECHO", self._mark)
            if not self._marked.wait(2.0):
                note = "MONITOR did not show clirace's end mark within 2 s: later commands may be missing"
        except (OSError, RedisError) as exc:
            note = f"the trial's Redis server was gone at the trial's end ({exc})"
        if self.lost and not note:
            note = f"MONITOR stopped before the trial's end ({self.lost}): later commands may be missing"
        ours = {self.control.address, self.monitor.address}
        ops = []
        for line in list(self.lines):
            found = MONITOR_LINE.match(line)
            if found is None or found.group(3) in ours:
                continue
            stamp, _db, client, quoted = found.groups()
            ops.append(ServerOp("redis", client, round(float(stamp) - epoch0, 6), monitor_words(quoted),
                                line=line[:LINE_CAP]))
        if self.dropped:
            note = "; ".join(filter(None, [note, f"{self.dropped} commands beyond the first {MAX_OPS} not kept"]))
        self.stop()
        return tuple(ops), note

    def stop(self) -> None:
        try:
            self.control.command("SHUTDOWN", "NOSAVE")
        except (OSError, RedisError):
            pass  # the reply to SHUTDOWN is the connection closing
        for client in (self.control, self.monitor):
            client.close()
        try:
            self.proc.wait(2.0)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
