"""A rendezvous inside the race window when the state is in a server: a loopback proxy in front of the trial's
server that holds each connection just after its first read of the state.

strace stops a process at a file read; a read from Redis or PostgreSQL is a message on a socket. So for a
rendezvous round the invocations connect to this proxy instead (the round's URLs are rewritten), which
forwards every byte both ways and reads the client's side as commands (RESP arrays; PostgreSQL's typed
messages). Once a connection has read the state (a Redis read command on one of `targets`, the state keys;
a SELECT from one of the state tables), the next command it sends is held back: its client has the reply to
its read and is about to write what it computed from it. The rendezvous (meet.py) waits until every live
invocation is held there or waits on the server (a locked tool: SELECT ... FOR UPDATE blocks the others in the
server), then releases them one at a time. An unprotected read-modify-write then loses updates by construction.
"""
from __future__ import annotations

import socket
import struct
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from clirace.run._waits import ready
from clirace.run.services.ops import REDIS_READS, redis_keys, table

_SSL_CODES = (80877103, 80877104)  # SSLRequest, GSSENCRequest: answered by the server, then a startup again


@dataclass
class Connection:
    client: socket.socket
    upstream: socket.socket
    peer_port: int  # the client's own port: which process it is (meet.owner)
    read: str = ""  # the read that armed it, for evidence
    held_at: float | None = None  # when its next command was held back
    waiting_since: float | None = None  # a command forwarded, no reply byte back yet
    go: threading.Event = field(default_factory=threading.Event)
    closed: threading.Event = field(default_factory=threading.Event)


class Proxy:
    def __init__(self, service: str, upstream_port: int, targets: frozenset[str]):
        self.service, self.upstream_port, self.targets = service, upstream_port, targets
        self.armed = True  # holding connections after their first read; released ones never are again
        self.connections: list[Connection] = []
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self.listener.getsockname()[1])
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, (_, peer_port) = self.listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(("127.0.0.1", self.upstream_port))
            except OSError:
                client.close()
                continue
            conn = Connection(client, upstream, int(peer_port))
            with self._lock:
                self.connections.append(conn)
            threading.Thread(target=self._to_server, args=(conn,), daemon=True).start()
            threading.Thread(target=self._to_client, args=(conn,), daemon=True).start()

    # --- client to server: framed, read, maybe held ----------------------------------------------------------
    def _to_server(self, conn: Connection) -> None:
        frames = _redis_frames if self.service == "redis" else _pg_frames()
        buffer, armed, after_read = b"", False, False
        try:
            while True:
                chunk = conn.client.recv(65536)
                if not chunk:
                    break
                buffer += chunk
                while True:
                    found = frames(buffer)
                    if found is None:
                        break
                    frame, command, buffer = found
                    if after_read and self.armed and not conn.go.is_set() and _starts_command(self.service, frame,
                                                                                                command):
                        conn.held_at = time.monotonic()
                        conn.go.wait()
                        if _gave_up(conn.client):  # its client stopped waiting: what it sent must not apply now
                            break
                    armed = armed or self._arms(conn, command)
                    # A read sent as a parse ('P') is over at its batch's Sync ('S'); a query or a command at once.
                    after_read = after_read or armed and (self.service == "redis" or frame[:1] in (b"Q", b"S"))
                    if conn.waiting_since is None:
                        conn.waiting_since = time.monotonic()
                    conn.upstream.sendall(frame)
        except (OSError, ValueError):  # ValueError: the other side closed the socket meanwhile (fd -1)
            pass
        finally:
            _close(conn)

    def _arms(self, conn: Connection, command: tuple[str, ...]) -> bool:
        """Whether this command reads the state (and so arms the hold of the connection's next command)."""
        if conn.read or not command:
            return False
        if self.service == "redis":
            reads = command[0].upper() in REDIS_READS and any(k in self.targets for k in redis_keys(command))
        else:
            reads = table("select", command[0]) in self.targets
        if reads:
            conn.read = " ".join(command)[:160]
        return reads

    # --- server to client: forwarded as it comes ---------------------------------------------------------------
    def _to_client(self, conn: Connection) -> None:
        try:
            while True:
                answered = ready(conn.upstream, 0.5)
                if conn.closed.is_set():
                    break
                if not answered:
                    continue
                chunk = conn.upstream.recv(65536)
                if not chunk:
                    break
                conn.waiting_since = None
                conn.client.sendall(chunk)
        except (OSError, ValueError):  # ValueError: the other side closed the socket meanwhile (fd -1)
            pass
        finally:
            _close(conn)

    # --- for the rendezvous ------------------------------------------------------------------------------------
    def held(self) -> list[Connection]:
        with self._lock:
            return [c for c in self.connections if c.held_at is not None and not c.go.is_set()]

    def waiting_on_server(self, at_least: float) -> list[Connection]:
        """Connections with a command at the server and no answer for `at_least` s: blocked there, on a lock."""
        now = time.monotonic()
        with self._lock:
            return [c for c in self.connections if c.held_at is None and not c.closed.is_set()
                    and c.waiting_since is not None and now - c.waiting_since >= at_least]

    def disarm(self) -> None:
        """Hold nothing more, and let every held connection go."""
        self.armed = False
        with self._lock:
            for conn in self.connections:
                conn.go.set()

    def close(self) -> None:
        self.disarm()
        try:
            self.listener.close()
        except OSError:
            pass
        with self._lock:
            for conn in self.connections:
                _close(conn)


def _gave_up(client: socket.socket) -> bool:
    """Whether the client has closed its end (timed out, exited) while its command was held."""
    try:
        return ready(client, 0) and client.recv(1, socket.MSG_PEEK) == b""
    except OSError:
        return True


def _close(conn: Connection) -> None:
    conn.closed.set()
    conn.go.set()
    for sock in (conn.client, conn.upstream):
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        try:
            sock.close()
        except OSError:
            pass


def _starts_command(service: str, frame: bytes, command: tuple[str, ...]) -> bool:
    """A frame that starts a new command: any Redis command but QUIT; a PostgreSQL query, parse, bind or call."""
    if service == "redis":
        return bool(command) and command[0].upper() != "QUIT"
    return frame[:1] in (b"Q", b"P", b"B", b"F")


def _redis_frames(buffer: bytes) -> tuple[bytes, tuple[str, ...], bytes] | None:
    """The first whole command in `buffer` (a RESP array of bulk strings, or an inline command), its words, and
    the rest; None when it is not all there yet."""
    if not buffer:
        return None
    if buffer[:1] != b"*":
        line, sep, rest = buffer.partition(b"\r\n")
        return (line + sep, tuple(w.decode(errors="replace") for w in line.split()), rest) if sep else None
    end = buffer.find(b"\r\n")
    if end < 0:
        return None
    count, at, words = int(buffer[1:end]), end + 2, []
    for _ in range(max(count, 0)):
        end = buffer.find(b"\r\n", at)
        if end < 0 or buffer[at:at + 1] != b"$":
            return None
        size = int(buffer[at + 1:end])
        if len(buffer) < end + 2 + size + 2:
            return None
        words.append(buffer[end + 2:end + 2 + size].decode(errors="replace"))
        at = end + 2 + size + 2
    return buffer[:at], tuple(words), buffer[at:]


# Splits the first whole message off a connection's buffer: (message, its command words, the rest); None until
# a whole message is there.
Framer = Callable[[bytes], tuple[bytes, tuple[str, ...], bytes] | None]


def _pg_frames() -> Framer:
    """A framer of one PostgreSQL connection's client side: the startup message (no type byte, maybe after an
    SSL request), then typed messages. A query ('Q', or the statement of a 'P' parse) is given as the command;
    a read by 'P' arms at its batch's Sync, so the held command is the next batch."""
    state = {"started": False}

    def frames(buffer: bytes) -> tuple[bytes, tuple[str, ...], bytes] | None:
        if not state["started"]:
            if len(buffer) < 8:
                return None
            size, code = struct.unpack("!ii", buffer[:8])
            if len(buffer) < size:
                return None
            state["started"] = code not in _SSL_CODES
            return buffer[:size], (), buffer[size:]
        if len(buffer) < 5:
            return None
        size = struct.unpack("!i", buffer[1:5])[0] + 1
        if len(buffer) < size:
            return None
        frame, kind, body = buffer[:size], buffer[:1], buffer[5:size]
        if kind == b"Q":
            return frame, (body.rstrip(b"\0").decode(errors="replace"),), buffer[size:]
        if kind == b"P":
            query = body.split(b"\0", 2)[1] if body.count(b"\0") >= 2 else b""
            return frame, (query.decode(errors="replace"),), buffer[size:]
        return frame, (), buffer[size:]
    return frames
