"""What the commands a trial's servers saw mean (Trial.server_ops): reads, writes and deletes of one key or
table, transactions, and the evidence lines. Beside the checks, so a better reading applies to old histories.

Redis: a key read (GET, HGET, LRANGE...) and later written back (SET, HSET...) or deleted from (DEL, LREM,
SREM...) by the same connection is a read-modify-write in the client, unless the key was WATCHed before the
read and the write ran in MULTI/EXEC (optimistic, refused on conflict), or it all ran in a script (MONITOR
names a script's own commands `lua`). Atomic commands (INCR, LPOP, SET NX, GETDEL) are not reads here, and a
lock key (set with NX by any client of the trial) is no state: a GET of it and then its DEL is a release, not a
claim (run/services/ops.py reads the locks).
PostgreSQL: a SELECT from a table and a later UPDATE (or DELETE) of it by the same backend is one unless both
ran in one transaction that locked the rows it read (FOR UPDATE / FOR SHARE), checked a version in the
UPDATE's WHERE, or ran at REPEATABLE READ or SERIALIZABLE (refused on conflict), or the backend held an exclusive
advisory lock from before the SELECT (pg_advisory_lock, pg_try_advisory_lock: the log does not show the answer,
and a tool goes on only once it has the lock) until after the UPDATE.
"""
from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from clirace.history import ServerOp, Trial
from clirace.run.services.ops import (
    ADVISORY,
    ADVISORY_UNLOCK,
    CHATTER,
    REDIS_DELETES,
    REDIS_READS,
    REDIS_WRITES,
    conditional,
    lock_call,
    lock_keys,
    locking_read,
    redis_keys,
)
from clirace.run.services.ops import table as table_of

_TX = re.compile(r"^\s*(begin|commit|rollback|start transaction|end|set|show)\b", re.I)
_VERSION_CHECK = re.compile(r"\bwhere\b.*\b(version|revision|rev|etag|xmin|updated_at|modified_at)\b\s*=",
                            re.I | re.S)
_STRICT = re.compile(r"isolation\s+level\s+(repeatable\s+read|serializable)", re.I)


@dataclass(frozen=True)
class ReadThenWrite:
    """One client's read of a key or table, then its unprotected write (or delete) of the same."""
    service: str
    client: str
    target: str  # the key, or the table
    read: ServerOp
    write: ServerOp
    delete: bool  # the write removed what was read: a claim
    how: str  # why it is unprotected, in words


def shown(op: ServerOp) -> str:
    """One command as evidence: `127.0.0.1:53122 GET hits` / `backend 4711: UPDATE ...`."""
    if op.service == "redis":
        return f"{op.client} {' '.join(op.words)[:120]}"
    return f"backend {op.client}: {op.sql[:160]}" + (f" ({op.params[:80]})" if op.params else "")


def by_client(ops: tuple[ServerOp, ...], service: str) -> dict[str, list[ServerOp]]:
    clients: dict[str, list[ServerOp]] = {}
    for op in ops:
        if op.service == service and op.client != "lua":
            clients.setdefault(op.client, []).append(op)
    return clients


def redis_hazards(ops: tuple[ServerOp, ...]) -> list[ReadThenWrite]:
    found = []
    locks = lock_keys(ops)
    for client, mine in by_client(ops, "redis").items():
        watched: set[str] = set()
        in_multi = False
        read: dict[str, ServerOp] = {}
        for op in mine:
            name = op.words[0].upper() if op.words else ""
            keys = tuple(k for k in redis_keys(op.words) if k not in locks)
            if name == "WATCH":
                watched |= set(keys)
            elif name == "MULTI":
                in_multi = True
            elif name in ("EXEC", "DISCARD"):
                in_multi, watched = False, set()
            elif name == "UNWATCH":
                watched = set()
            elif name in REDIS_READS and not in_multi:
                for key in keys:
                    read.setdefault(key, op)
            elif (name in REDIS_WRITES and not conditional(op.words)) or name in REDIS_DELETES:
                for key in keys:
                    if key in read and not (key in watched and in_multi):
                        how = ("without WATCH or MULTI/EXEC" if not in_multi else
                               "in MULTI/EXEC, but the key was not WATCHed before the read")
                        found.append(ReadThenWrite("redis", client, key, read.pop(key), op,
                                                   name in REDIS_DELETES, how))
    return found


def postgres_hazards(ops: tuple[ServerOp, ...]) -> list[ReadThenWrite]:
    found = []
    for client, mine in by_client(ops, "postgres").items():
        strict = {op.xact for op in mine if _STRICT.search(op.sql)}
        read: dict[str, ServerOp] = {}
        advisory = False  # the backend holds an advisory lock: what it reads and writes meanwhile is serialised
        for op in mine:
            if ADVISORY.search(op.sql):
                advisory, read = True, {}
                continue
            if ADVISORY_UNLOCK.search(op.sql):
                advisory = False
                continue
            if advisory:
                continue
            for kind in ("select", "update", "delete"):
                table = table_of(kind, op.sql)
                if table is None:
                    continue
                if kind == "select":
                    read.setdefault(table, op)
                elif table in read:
                    before = read.pop(table)
                    one = before.xact == op.xact and before.xact not in ("", "0/0")
                    if not one:
                        how = "in separate transactions"
                    elif locking_read(before.sql) or op.xact in strict or _VERSION_CHECK.search(op.sql):
                        continue
                    else:
                        how = "in one transaction, but without FOR UPDATE on the read or a version check"
                    found.append(ReadThenWrite("postgres", client, table, before, op, kind == "delete", how))
                break
    return found


def locks_taken(trial: Trial) -> list[ServerOp]:
    """The lock calls the trial's servers saw (SET NX, advisory locks, FOR UPDATE): the tool locks, in a server."""
    return [op for op in trial.server_ops if lock_call(op.service, op.words, op.sql)]


def hazards(trial: Trial) -> list[ReadThenWrite]:
    return redis_hazards(trial.server_ops) + postgres_hazards(trial.server_ops)


def describe(trial: Trial, labels: Iterable[str] = (), limit: int = 16, since: float | None = None) -> str:
    """The servers' view of a trial, for evidence: its first commands on data from the time the invocations
    `labels` started, in the order the server ran them (a lost update shows as reads of every client before
    their writes)."""
    starts = [inv.started for inv in trial.invocations if inv.label in set(labels)]
    since = since if since is not None else min(starts) if starts else float("-inf")
    data = [op for op in trial.server_ops if op.at >= since and (op.words or op.sql) and not (
        op.words and op.words[0].upper() in CHATTER or op.sql and _TX.match(op.sql))]
    if not data:
        return ""
    service = "Redis MONITOR" if data[0].service == "redis" else "PostgreSQL's statement log"
    pieces = _runs_shortened(data)
    lines = " | ".join(pieces[:limit])
    more = f" | ... ({len(pieces) - limit} more)" if len(pieces) > limit else ""
    return f"{service}: {lines}{more}"


def _verb(op: ServerOp) -> str:
    return op.words[0].upper() if op.words else op.sql.split(None, 1)[0].upper()


def _runs_shortened(data: list[ServerOp], keep: int = 3) -> list[str]:
    """Commands as evidence with each long run of one verb cut to its first few: fifty clients that all read
    before any writes show as three GETs, "47 more GET", then the first SET, so the write that loses the
    others' updates is never cut off the end by the reads before it."""
    pieces: list[str] = []
    start = 0
    while start < len(data):
        end = start
        while end < len(data) and _verb(data[end]) == _verb(data[start]):
            end += 1
        pieces.extend(shown(op) for op in data[start:min(end, start + keep)])
        if end - start > keep:
            pieces.append(f"... ({end - start - keep} more {_verb(data[start])})")
        start = end
    return pieces
