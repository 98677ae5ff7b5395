"""The server rendezvous: where to aim (the state a traced round showed in a server) and how long to wait at
the proxy (proxy.py) before letting the invocations go on one at a time.

Where: the keys (Redis) or tables (PostgreSQL) that invocations of an earlier round changed, lock keys set with
NX aside. When to stop waiting: the file rendezvous' wait (run/rendezvous.py, Meeting), with the server's rules for
the missing ones: every live invocation is held at the proxy, or waits on the server (blocked on a row lock: a
tool that locks before it reads has one invocation here); or at least one is held, `settle` s have passed since
the last arrival and every missing one has been idle meanwhile (polling a lock key); or the first has been held
HOLD_WAIT s; or `overall` s have passed. Then each held invocation goes on in arrival
order, once the one before it has ended: every one of them read the state before any wrote, so an
unprotected read-modify-write loses updates by construction.
"""
from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypedDict

from clirace.history import ServerOp, Trial
from clirace.run import procfs
from clirace.run.launch import Running
from clirace.run.rendezvous import OVERALL, SETTLE, Meeting
from clirace.run.services.ops import (
    REDIS_ATOMIC,
    REDIS_DELETES,
    REDIS_READS,
    REDIS_WRITES,
    conditional,
    lock_keys,
    redis_keys,
    table,
)
from clirace.run.services.proxy import Connection, Proxy
from clirace.run.stopper import POLL, cpu_ns, ended


@dataclass(frozen=True)
class ServerAim:
    service: str  # "redis" or "postgres"
    targets: frozenset[str]  # the state keys or tables
    why: str = "its first read of its state in the server"

    @property
    def shown(self) -> str:
        return f"{self.service}: {', '.join(sorted(self.targets))}"


def server_aim(trial: Trial) -> ServerAim | None:
    """The state a round's server saw a connection read and then change (a read-modify-write the proxy can hold
    between the two); None when it saw none. Lock keys (set with NX) are not state."""
    for service in ("redis", "postgres"):
        locks = lock_keys(trial.server_ops) if service == "redis" else set()
        targets: set[str] = set()
        read: dict[str, set[str]] = {}
        for op in trial.server_ops:
            if op.service != service:
                continue
            mine = read.setdefault(op.client, set())
            targets |= {t for t in _changed(op) if t in mine and t not in locks}
            mine |= set(_read(op))
        if targets:
            return ServerAim(service, frozenset(targets))
    return None


def _read(op: ServerOp) -> tuple[str, ...]:
    if op.service == "redis":
        return redis_keys(op.words) if op.words and op.words[0].upper() in REDIS_READS else ()
    found = table("select", op.sql)
    return (found,) if found else ()


def _changed(op: ServerOp) -> tuple[str, ...]:
    if op.service == "redis":
        name = op.words[0].upper() if op.words else ""
        changes = name in REDIS_DELETES | REDIS_ATOMIC or (name in REDIS_WRITES and not conditional(op.words))
        return redis_keys(op.words) if changes else ()
    return tuple(t for kind in ("update", "delete", "insert") if (t := table(kind, op.sql)))


# Clients give up on a server that does not answer: redis-py after 5 s by default. Nothing is held longer than
# this from the first hold (the rest are let go at once), and the waiting ends HOLD_WAIT after the first hold.
# The 2 s left before such a timeout matter: a client that gave up after its command was let through would have
# changed the state and reported failure, a phantom change that clirace itself would have caused.
HOLD_BUDGET = 3.0
HOLD_WAIT = 2.0
TURN = 0.5  # the longest one released invocation is waited for before the next goes on


class ServerSeen(TypedDict):
    """ServerRendezvous.record(): what the server rendezvous saw (times in s from its start)."""
    arrived: dict[str, float]
    stopped_at: dict[str, str]
    exited_before: tuple[str, ...]
    released_after: float | None
    why: str


class ServerRendezvous(Meeting):
    every = POLL * 5  # the proxy's threads need the interpreter too

    def __init__(self, proxy: Proxy, runnings: Sequence[Running], settle: float = SETTLE,
                 overall: float = OVERALL) -> None:
        self.proxy, self.runnings, self.settle, self.overall = proxy, runnings, settle, overall
        self.started = time.monotonic()
        self.owner: dict[int, Running | None] = {}  # a connection's client port -> the invocation it is from
        self.arrived: dict[str, tuple[float, Connection]] = {}
        self.released: float | None = None
        self.why, self.timed_out = "", False

    def _missing(self, now: float) -> list[str]:
        for conn in self.proxy.held():
            running = self._owner(conn)
            if running is not None and running.label not in self.arrived:
                self.arrived[running.label] = (conn.held_at or now, conn)
        return [r.label for r in self.runnings if r.label not in self.arrived and not ended(r)]

    def _not_coming(self, missing: list[str], now: float) -> str:
        if not self.arrived:
            return ""
        blocked = {r.label for c in self.proxy.waiting_on_server(self.settle) if (r := self._owner(c))}
        if all(label in blocked for label in missing):
            return "the others wait on the server (a lock)"
        held = [at for at, _ in self.arrived.values()]
        if now - min(held) >= HOLD_WAIT:
            return f"the first had been held {HOLD_WAIT:g} s (clients time out)"
        if now - max(held) >= self.settle and all(self.idle_for(label, now) >= self.settle for label in missing):
            return "the others idle"
        return ""

    def _cpu(self, label: str) -> int:
        return cpu_ns(next(r for r in self.runnings if r.label == label).pid)

    def _owner(self, conn: Connection) -> Running | None:
        if conn.peer_port not in self.owner:
            inode = _socket_inode(conn.peer_port, self.proxy.port)
            # The invocation itself first; its process group (a shell script's children) only if need be: a scan
            # of /proc per invocation would starve the proxy's threads of the interpreter.
            self.owner[conn.peer_port] = next((r for r in self.runnings if _has_socket(r.pid, inode)), None) or next(
                (r for r in self.runnings if any(_has_socket(pid, inode) for pid in procfs.group(r.pid))),
                None) if inode else None
        return self.owner[conn.peer_port]

    def release_in_turn(self) -> None:
        """Each held invocation goes on once the one before has closed its connection (or ended, or TURN s
        passed); once the first has been held HOLD_BUDGET s, all the rest at once."""
        self.released = time.monotonic()
        by_label = {r.label: r for r in self.runnings}
        first = min((at for at, _ in self.arrived.values()), default=self.released)
        for label, (_, conn) in sorted(self.arrived.items(), key=lambda item: item[1][0]):
            if time.monotonic() - first >= HOLD_BUDGET:
                break
            conn.go.set()
            deadline = time.monotonic() + TURN
            while not (ended(by_label[label]) or conn.closed.is_set()) and time.monotonic() < deadline:
                time.sleep(POLL * 5)
        self.proxy.disarm()

    def close(self) -> None:
        self.proxy.disarm()

    def record(self) -> ServerSeen:
        return {"arrived": {label: round(at - self.started, 4) for label, (at, _) in self.arrived.items()},
                "stopped_at": {label: conn.read for label, (_, conn) in self.arrived.items()},
                "exited_before": tuple(r.label for r in self.runnings if r.label not in self.arrived),
                "released_after": round(self.released - self.started, 4) if self.released else None,
                "why": self.why}


def _socket_inode(local_port: int, remote_port: int) -> str | None:
    """The inode of the loopback TCP socket from `local_port` to `remote_port` (/proc/net/tcp, tcp6)."""
    for table_path in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table_path) as handle:
                lines = handle.read().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) > 9 and int(fields[1].rsplit(":", 1)[1], 16) == local_port \
                    and int(fields[2].rsplit(":", 1)[1], 16) == remote_port:
                return fields[9]
    return None


def _has_socket(pid: int, inode: str) -> bool:
    return f"socket:[{inode}]" in procfs.fd_links(pid)
