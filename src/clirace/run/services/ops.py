"""What a command sent to a server does to the state, read once for those who need it: the server hazards
(checks/_served.py) and the server rendezvous (scenarios aim at the first read of the state, proxy.py holds the
invocation there).

Redis: the commands that read a key, write one from what the client computed, or delete from one; atomic
read-modify-writes (INCR, LPOP, GETDEL, SET NX) are none of these. PostgreSQL: the table a SELECT reads from, an
UPDATE or DELETE changes. And the server locks a tool takes: a Redis key set with NX (SET key v NX [PX ms],
SETNX), PostgreSQL's advisory locks (pg_advisory_lock, pg_try_advisory_lock and their _xact_ and _shared forms)
and rows locked with SELECT ... FOR UPDATE / FOR NO KEY UPDATE / FOR SHARE. A lock key is no state: reading it
(whose token is it?) and deleting it (the release) is no read-modify-write and no claim.
"""
from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

REDIS_READS = {"GET", "MGET", "HGET", "HMGET", "HGETALL", "HKEYS", "HVALS", "HEXISTS", "LRANGE", "LINDEX", "LLEN",
               "SMEMBERS", "SISMEMBER", "SCARD", "ZRANGE", "ZRANGEBYSCORE", "ZSCORE", "EXISTS", "STRLEN",
               "GETRANGE", "XRANGE"}
REDIS_WRITES = {"SET", "SETEX", "PSETEX", "MSET", "HSET", "HMSET", "LSET", "SADD", "ZADD", "RPUSH", "LPUSH",
                "APPEND", "SETRANGE"}
REDIS_DELETES = {"DEL", "UNLINK", "HDEL", "LREM", "SREM", "ZREM", "LTRIM"}
# Atomic changes: they make a key state too (the rendezvous aims at its reads), but are no hazard themselves.
REDIS_ATOMIC = {"INCR", "INCRBY", "DECR", "DECRBY", "INCRBYFLOAT", "HINCRBY", "LPOP", "RPOP", "SPOP", "GETDEL",
                "GETSET", "LMOVE", "RPOPLPUSH", "ZINCRBY"}
# Connection chatter, shown in no evidence: what client libraries say on connecting.
CHATTER = {"CLIENT", "HELLO", "PING", "SELECT", "INFO", "COMMAND", "AUTH", "ECHO", "QUIT", "READONLY"}
TABLE = {"select": re.compile(r"^\s*(?:with\b.*?\)\s*)?select\b.*?\bfrom\s+([\w.\"]+)", re.I | re.S),
         "update": re.compile(r"^\s*(?:with\b.*?\)\s*)?update\s+(?:only\s+)?([\w.\"]+)", re.I | re.S),
         "delete": re.compile(r"^\s*(?:with\b.*?\)\s*)?delete\s+from\s+(?:only\s+)?([\w.\"]+)", re.I | re.S),
         "insert": re.compile(r"^\s*(?:with\b.*?\)\s*)?insert\s+into\s+([\w.\"]+)", re.I | re.S)}


def redis_keys(words: tuple[str, ...] | list[str]) -> tuple[str, ...]:
    """The keys a command names (its first argument; every argument for MGET, DEL, UNLINK, WATCH, EXISTS)."""
    name = words[0].upper() if words else ""
    return tuple(words[1:]) if name in ("MGET", "DEL", "UNLINK", "WATCH", "EXISTS") else tuple(words[1:2])


def table(kind: str, sql: str) -> str | None:
    """The table a statement of `kind` (select, update, delete, insert) names, or None when it is not one."""
    verb = sql.lstrip().split(None, 1)[0].lower() if sql.strip() else ""
    found = TABLE[kind].match(sql) if verb in (kind, "with") else None
    return found.group(1).strip('"').lower() if found else None


def conditional(words: tuple[str, ...] | list[str]) -> bool:
    """SET ... NX (or XX): the server decides, atomically: a lock or a claim, not a blind write."""
    return any(str(w).upper() in ("NX", "XX") for w in words[3:])


# --- server locks: what takes one is decided here only (the hazards and the rendezvous read it) --------------
# FOR UPDATE, FOR NO KEY UPDATE, FOR SHARE: row locks that serialise a read-modify-write of the rows read (two
# FOR SHARE readers deadlock at their writes, and one is refused: nothing is lost silently). Not FOR KEY SHARE:
# it does not block an UPDATE of the row's other columns, so two readers holding it both write from what they
# read, and one update is lost.
_LOCKING_READ = re.compile(r"\bfor\s+(?:no\s+key\s+)?(?:update|share)\b", re.I)
_ADVISORY_ANY = re.compile(r"\bpg_(?:try_)?advisory_(?:xact_)?lock(?:_shared)?\s*\(", re.I)
ADVISORY = re.compile(r"\bpg_(?:try_)?advisory_(?:xact_)?lock\s*\(", re.I)  # exclusive: _shared ones serialise nothing
ADVISORY_UNLOCK = re.compile(r"\bpg_advisory_unlock(?:_all)?\s*\(", re.I)


def locking_read(sql: str) -> bool:
    """SELECT ... FOR UPDATE (NO KEY UPDATE, SHARE): the rows read stay locked until the transaction ends, so no
    other transaction writes them between this read and its write. Also a lock call (lock_call)."""
    return bool(_LOCKING_READ.search(sql))


def redis_lock(words: tuple[str, ...] | list[str]) -> bool:
    """SET key value NX [PX ms | EX s] or SETNX: a lock (or a claim) taken atomically by the server."""
    name = words[0].upper() if words else ""
    return name == "SETNX" or (name == "SET" and any(str(w).upper() == "NX" for w in words[3:]))


def lock_call(service: str, words: tuple[str, ...] | list[str], sql: str) -> bool:
    """Whether a command asks a server for a lock (whatever the answer, which MONITOR and the log do not show)."""
    return redis_lock(words) if service == "redis" else bool(_ADVISORY_ANY.search(sql)) or locking_read(sql)


_ANSWERED_AT_ONCE = re.compile(r"\bpg_try_advisory|\bnowait\b|\bskip\s+locked\b", re.I)


def waits_for_lock(service: str, words: tuple[str, ...] | list[str], sql: str) -> bool:
    """Whether the server makes a lock call wait while another client holds the lock: PostgreSQL's
    pg_advisory_lock and SELECT ... FOR UPDATE without NOWAIT or SKIP LOCKED. A Redis SET NX, a
    pg_try_advisory_lock, a NOWAIT are answered at once: asked again and again, they are a retry loop."""
    return service == "postgres" and lock_call(service, words, sql) and not _ANSWERED_AT_ONCE.search(sql)


def lock_keys(ops: Iterable[Any]) -> set[str]:
    """The Redis keys a trial's clients set with NX: lock keys, not state."""
    return {key for op in ops if op.service == "redis" and redis_lock(op.words) for key in redis_keys(op.words)}
