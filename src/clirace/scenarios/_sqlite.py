"""A SQLite database as the next caller of the tool would find it, recorded as JSON text for the history.

A keys workload whose state is a SQLite database (config format `sqlite`) is read through SQLite itself, as the
tool's next invocation would read it: after a round, or after a writer was killed mid-write, from a private copy
of the database and its journal or write-ahead log (so a hot journal is rolled back, a WAL replayed, and nothing
in the sandbox changes); while writers run, from the live file, taking SQLite's own read lock like any reader.
The record is `{"tables": {name: [row, ...]}}` (rows sorted, so equal contents read the same), or
`{"unreadable": why}` when SQLite finds no database there (torn, or never one), or `{"too_large": why}`. What
the text means is the checks' business (configfile.parse); this module only reads.
"""
from __future__ import annotations

import base64
import json
import shutil
import sqlite3
from pathlib import Path

from clirace.errors import Busy as Busy  # raised here; re-exported for who imports it from here
from clirace.run import safefs

SIDE_FILES = ("", "-journal", "-wal")  # the database, and what SQLite replays or rolls back when it opens it
LIVE_TIMEOUT = 0.05  # seconds a sampling reader waits for a writer's lock before giving up on that sample
# What SQLite says when the file is not a whole database: a torn or never-valid state, not "could not look".
_TORN = ("not a database", "malformed", "file is encrypted")


def copy_and_read(root: Path, path: Path, scratch: Path, limit: int) -> tuple[str | None, str]:
    """(the record, "") of the database at `path` (inside the sandbox `root`), read from a copy made in
    `scratch` (clirace's private directory); (None, why) when there is no database file to read."""
    try:
        rel = safefs.within(root, path)
    except ValueError:
        return None, "outside the sandbox"
    scratch.mkdir(parents=True, exist_ok=True)
    copy = scratch / path.name
    for suffix in SIDE_FILES:
        found = safefs.read_capped(root, rel + suffix, limit)
        target = Path(f"{copy}{suffix}")
        if target.exists():
            target.unlink()
        if found is None:
            if not suffix:
                return None, "missing"
            continue
        if isinstance(found, safefs.Special):
            return None, f"not a regular file ({found})"
        if len(found) > limit:
            return _too_large(f"{path.name}{suffix} is larger than {limit:,} bytes"), ""
        target.write_bytes(found)
    try:
        return _read(f"file:{copy}?mode=rw", limit), ""
    except (Busy, sqlite3.Error) as exc:  # a copy nobody else opens is never busy; this is SQLite's refusal
        return None, f"SQLite could not read it ({exc})"
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def read_live(root: Path, path: Path, limit: int) -> str | None:
    """The record of the live database, read under SQLite's own shared lock; None when there is no database
    file. Raises Busy when a writer holds the lock, sqlite3.Error when SQLite cannot read it for another reason
    than a torn file (no sample either way)."""
    try:
        rel = safefs.within(root, path)
    except ValueError:
        return None
    kind = safefs.kind(root, rel)
    if kind != "a regular file":  # missing, or a link or pipe the target planted: never opened
        return None
    return _read(f"file:{path}?mode=rw", limit, timeout=LIVE_TIMEOUT)


def _read(uri: str, limit: int, timeout: float = 1.0) -> str:
    try:
        conn = sqlite3.connect(uri, uri=True, timeout=timeout, isolation_level=None)
    except sqlite3.Error as exc:
        return _unreadable(exc)
    try:
        conn.execute("BEGIN")  # one read transaction: every table from the same state
        return _dump(conn, limit)
    except sqlite3.OperationalError as exc:
        if "locked" in str(exc) or "busy" in str(exc):
            raise Busy(str(exc)) from None
        return _unreadable(exc)
    except sqlite3.Error as exc:
        return _unreadable(exc)
    finally:
        conn.close()


def _dump(conn: sqlite3.Connection, limit: int) -> str:
    tables: dict[str, list[dict[str, object]]] = {}
    size = 0
    names = [row[0] for row in conn.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name")]
    for name in names:
        cursor = conn.execute('SELECT * FROM "{}"'.format(name.replace('"', '""')))
        columns = [d[0] for d in cursor.description]
        rows = []
        for row in cursor:
            record = {column: _plain(value) for column, value in zip(columns, row, strict=False)}
            size += len(json.dumps(record))
            if size > limit:
                return _too_large(f"its tables hold more than {limit:,} bytes")
            rows.append(record)
        tables[name] = sorted(rows, key=lambda r: json.dumps(r, sort_keys=True))
    return json.dumps({"tables": tables}, sort_keys=True)


def _plain(value: object) -> object:
    return "base64:" + base64.b64encode(value).decode() if isinstance(value, bytes) else value


def _unreadable(exc: sqlite3.Error) -> str:
    text = str(exc)
    if any(marker in text for marker in _TORN):
        return json.dumps({"unreadable": f"SQLite: {text}"})
    raise exc


def _too_large(why: str) -> str:
    return json.dumps({"too_large": why})
