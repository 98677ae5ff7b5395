"""A minimal Redis client (RESP2 over TCP): what clirace itself says to a trial's Redis server.

Why not redis-py: clirace must not depend at run time on the client library of the world it judges, and it
needs only a handful of commands (PING, MONITOR, SET NX PX, DEL, ECHO, SHUTDOWN) plus MONITOR's stream read
line by line in a thread, which a CLI (redis-cli) would hand over through a pipe and its buffering.
"""
from __future__ import annotations

import re
import socket

from clirace.errors import RedisError


class Client:
    def __init__(self, port: int, timeout: float = 5.0):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.buffer = b""

    @property
    def address(self) -> str:
        """This connection as the server names it in MONITOR ("127.0.0.1:53122")."""
        host, port = self.sock.getsockname()[:2]
        return f"{host}:{port}"

    def command(self, *words: str | int) -> object:
        parts = [str(w).encode() for w in words]
        self.sock.sendall(b"*%d\r\n" % len(parts) + b"".join(b"$%d\r\n%s\r\n" % (len(p), p) for p in parts))
        return self.reply()

    def reply(self) -> object:
        line = self._line()
        kind, rest = line[:1], line[1:]
        if kind == b"+":
            return rest.decode(errors="replace")
        if kind == b"-":
            raise RedisError(rest.decode(errors="replace"))
        if kind == b":":
            return int(rest)
        if kind == b"$":
            size = int(rest)
            if size < 0:
                return None
            data = self._exactly(size + 2)[:-2]
            return data.decode(errors="replace")
        if kind == b"*":
            size = int(rest)
            return None if size < 0 else [self.reply() for _ in range(size)]
        raise RedisError(f"unexpected reply {line[:40]!r}")

    def _line(self) -> bytes:
        while b"\r\n" not in self.buffer:
            self._fill()
        line, _, self.buffer = self.buffer.partition(b"\r\n")
        return line

    def _exactly(self, size: int) -> bytes:
        while len(self.buffer) < size:
            self._fill()
        data, self.buffer = self.buffer[:size], self.buffer[size:]
        return data

    def _fill(self) -> None:
        chunk = self.sock.recv(65536)
        if not chunk:
            raise RedisError("the server closed the connection")
        self.buffer += chunk

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass


# A MONITOR line: `1700000000.123456 [0 127.0.0.1:53122] "SET" "counter" "5"` (Lua: `[0 lua]`).
MONITOR_LINE = re.compile(r'^(\d+\.\d+) \[(\d+) ([^\]]*)\] (.*)$', re.S)
_WORD = re.compile(r'"((?:[^"\\]|\\.)*)"')
_ESCAPES = {"n": "\n", "r": "\r", "t": "\t", "a": "\a", "b": "\b", '"': '"', "\\": "\\"}


def monitor_words(quoted: str) -> tuple[str, ...]:
    """The arguments of a MONITOR line, unquoted (Redis quotes them with C escapes and \\xHH)."""
    def unescape(text: str) -> str:
        return re.sub(r'\\(x[0-9a-fA-F]{2}|.)', lambda m: chr(int(m.group(1)[1:], 16)) if m.group(1)[0] == "x"
                      and len(m.group(1)) == 3 else _ESCAPES.get(m.group(1), m.group(1)), text)
    return tuple(unescape(w) for w in _WORD.findall(quoted))
