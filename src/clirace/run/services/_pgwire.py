"""A minimal PostgreSQL client (protocol 3.0, simple queries, trust authentication): what clirace itself says to
the check's PostgreSQL server.

Why not psycopg or psql: clirace must not depend at run time on the client library of the world it judges;
and the lock experiments need a session that stays open holding a lock (pg_advisory_lock, SELECT ... FOR
UPDATE) and says when it holds it, which psql would tell through a pipe and its buffering. The server is
clirace's own, on loopback with trust authentication, so the startup exchange is short.
"""
from __future__ import annotations

import socket
import struct

from clirace.errors import PgError


class Client:
    def __init__(self, port: int, database: str, user: str, timeout: float = 10.0):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        body = struct.pack("!i", 196608) + b"".join(f"{k}\0{v}\0".encode() for k, v in
                                                     (("user", user), ("database", database))) + b"\0"
        self.sock.sendall(struct.pack("!i", len(body) + 4) + body)
        self._until_ready()

    def query(self, sql: str) -> list[tuple[str | None, ...]]:
        """Run one simple query; the rows of its last result set, as text. PgError on an error."""
        body = sql.encode() + b"\0"
        self.sock.sendall(b"Q" + struct.pack("!i", len(body) + 4) + body)
        return self._until_ready()

    def _until_ready(self) -> list[tuple[str | None, ...]]:
        rows: list[tuple[str | None, ...]] = []
        error = None
        while True:
            kind, body = self._message()
            if kind == b"R" and struct.unpack("!i", body[:4])[0] != 0:
                raise PgError("the server asks for a password; clirace's own server trusts loopback")
            if kind == b"T":
                rows = []
            elif kind == b"D":
                rows.append(_row(body))
            elif kind == b"E":
                error = _fields(body)
            elif kind == b"Z":
                if error is not None:
                    raise PgError(error)
                return rows

    def _message(self) -> tuple[bytes, bytes]:
        head = self._exactly(5)
        return head[:1], self._exactly(struct.unpack("!i", head[1:])[0] - 4)

    def _exactly(self, size: int) -> bytes:
        data = b""
        while len(data) < size:
            chunk = self.sock.recv(size - len(data))
            if not chunk:
                raise PgError("the server closed the connection")
            data += chunk
        return data

    def close(self) -> None:
        try:
            self.sock.sendall(b"X" + struct.pack("!i", 4))
            self.sock.close()
        except OSError:
            pass


def _row(body: bytes) -> tuple[str | None, ...]:
    count, at, values = struct.unpack("!h", body[:2])[0], 2, []
    for _ in range(count):
        size = struct.unpack("!i", body[at:at + 4])[0]
        at += 4
        values.append(None if size < 0 else body[at:at + size].decode(errors="replace"))
        at += max(size, 0)
    return tuple(values)


def _fields(body: bytes) -> str:
    """An ErrorResponse as one line: its severity, code and message."""
    fields = {part[:1]: part[1:].decode(errors="replace") for part in body.split(b"\0") if part}
    return f"{fields.get(b'S', 'ERROR')} {fields.get(b'C', '')}: {fields.get(b'M', '')}"


def literal(text: str) -> str:
    """A SQL string literal."""
    return "'" + text.replace("'", "''") + "'"
