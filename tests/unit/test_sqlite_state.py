"""A SQLite database as state (issue 18): recorded as the next caller would find it (journal rolled back,
through SQLite's own lock while writers run), judged by the keys and atomic-config checks on literal records.
The databases here are made in-process with Python's sqlite3: no target process is launched."""
from __future__ import annotations

import dataclasses
import json
import sqlite3

import pytest

from clirace.checks import atomic_config
from clirace.history import KillPoint, WriterKilled
from clirace.history.vocab import ConfigFormat, EventKind
from clirace.scenarios import _sqlite
from clirace.spec.configfile import TooLarge, Unparseable, lookup, parse

from .histories import event, inv

QUERY = "tasks[?name=='{key}'].value | [0]"


def make_db(path, rows=(("TASK_0", "a"),)):
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE tasks(name TEXT PRIMARY KEY, value TEXT)")
        conn.executemany("INSERT INTO tasks VALUES (?, ?)", rows)
    conn.close()


def test_a_database_is_recorded_as_its_tables_and_looked_up_by_query(tmp_path):
    make_db(tmp_path / "t.db", [("TASK_1", "b"), ("TASK_0", "a")])
    text, why = _sqlite.copy_and_read(tmp_path, tmp_path / "t.db", tmp_path / "scratch", 1 << 20)
    tables = parse(text, "sqlite")
    assert why == "" and tables == {"tasks": [{"name": "TASK_0", "value": "a"}, {"name": "TASK_1", "value": "b"}]}
    assert lookup(tables, QUERY.format(key="TASK_1"), "sqlite", query=True) == "b"
    assert not (tmp_path / "scratch").exists()
    assert _sqlite.copy_and_read(tmp_path, tmp_path / "none.db", tmp_path / "scratch", 1 << 20) == (None, "missing")


def test_a_transaction_cut_short_reads_as_the_old_database_with_its_journal_and_torn_without(tmp_path):
    """A writer killed mid-transaction leaves pages of its change in the file and the old ones in its journal:
    the next caller rolls the journal back, and so does clirace's reading of a copy."""
    db = tmp_path / "t.db"
    rows = [(f"TASK_{n}", "a" * 500) for n in range(300)]
    make_db(db, rows)
    writer = sqlite3.connect(db, isolation_level=None)
    writer.execute("PRAGMA cache_size = 1")  # spill the change into the file before it commits
    writer.execute("BEGIN IMMEDIATE")
    writer.execute("UPDATE tasks SET value = ?", ("b" * 500,))
    kept = {suffix: (tmp_path / f"t.db{suffix}").read_bytes() for suffix in ("", "-journal")}
    writer.execute("ROLLBACK")
    writer.close()
    crashed = tmp_path / "crashed"
    crashed.mkdir()
    for suffix, data in kept.items():
        (crashed / f"t.db{suffix}").write_bytes(data)
    old = {"tasks": sorted(({"name": n, "value": v} for n, v in rows), key=lambda r: json.dumps(r, sort_keys=True))}
    text, _ = _sqlite.copy_and_read(crashed, crashed / "t.db", tmp_path / "scratch", 1 << 20)
    assert parse(text, "sqlite") == old
    assert (crashed / "t.db-journal").read_bytes() == kept["-journal"]  # the sandbox's files are left alone
    (crashed / "t.db-journal").unlink()
    alone, _ = _sqlite.copy_and_read(crashed, crashed / "t.db", tmp_path / "scratch", 1 << 20)
    try:
        assert parse(alone, "sqlite") != old  # half of the change, without the journal to undo it
    except Unparseable:
        pass


def test_a_file_that_is_no_database_is_torn_and_a_busy_one_is_no_sample(tmp_path):
    (tmp_path / "junk.db").write_bytes(b"SQLite format 3\x00" + b"\xff" * 200)
    text, _ = _sqlite.copy_and_read(tmp_path, tmp_path / "junk.db", tmp_path / "scratch", 1 << 20)
    with pytest.raises(Unparseable, match="SQLite"):
        parse(text, "sqlite")
    make_db(tmp_path / "t.db")
    writer = sqlite3.connect(tmp_path / "t.db", isolation_level=None)
    writer.execute("BEGIN EXCLUSIVE")
    with pytest.raises(_sqlite.Busy):
        _sqlite.read_live(tmp_path, tmp_path / "t.db", 1 << 20)
    writer.execute("COMMIT")
    assert "TASK_0" in _sqlite.read_live(tmp_path, tmp_path / "t.db", 1 << 20)
    (tmp_path / "link.db").symlink_to(tmp_path / "t.db")
    assert _sqlite.read_live(tmp_path, tmp_path / "link.db", 1 << 20) is None  # a planted link is never opened


def test_too_large_is_not_torn(tmp_path):
    make_db(tmp_path / "t.db", [(f"TASK_{n}", "v" * 100) for n in range(50)])
    text, _ = _sqlite.copy_and_read(tmp_path, tmp_path / "t.db", tmp_path / "scratch", 1000)
    with pytest.raises(TooLarge):
        parse(text, "sqlite")


def killed(old, after):
    def record(rows):
        return json.dumps({"tables": {"tasks": [{"name": n, "value": v} for n, v in rows],
                                      "meta": [{"tasks": len(rows)}]}})
    return WriterKilled(name="killed", invocations=(inv("killed-writer", None, signal=9),),
                        point=KillPoint("pwrite64", 1, "pwrite64 #1 to tasks.db itself"), format=ConfigFormat.SQLITE,
                        key_path=QUERY, query=True, key="TASK_1", value="after-kill", old=record(old),
                        after=None if after is None else record(after),
                        events=(event(EventKind.KILL_INJECTED, 0.01, "killed-writer"),))


def test_a_killed_writer_leaves_the_old_or_the_new_database():
    """The new content is the one a writer of the same key left when it ran to its end: here it also updated a
    count beside the row, which a query cannot point at."""
    old, new = [("TASK_0", "seeded")], [("TASK_0", "seeded"), ("TASK_1", "after-kill")]
    reference = killed(old, new).after
    assert atomic_config.kill_outcome(killed(old, old), reference) is None
    assert atomic_config.kill_outcome(killed(old, new), reference) is None
    half = json.dumps({"tables": {"tasks": [{"name": n, "value": v} for n, v in new], "meta": [{"tasks": 1}]}})
    assert atomic_config.kill_outcome(dataclasses.replace(killed(old, new), after=half), reference) == \
        "parseable but neither the old nor the new content"
    assert atomic_config.kill_outcome(killed(old, [("TASK_1", "after-kill")]), reference) == \
        "parseable but neither the old nor the new content"
