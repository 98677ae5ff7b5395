"""A PostgreSQL server for the check, and a database of its own for every trial, its statements logged.

One server per check (initdb and start-up take about a second), on a free loopback port with trust
authentication and durability off (fsync, full_page_writes, synchronous_commit: nothing here must survive
a crash). A template database is filled once by the spec's `services.postgres.setup`; each trial gets
`CREATE DATABASE tN TEMPLATE ... STRATEGY FILE_COPY` (about 70 ms) and loses it at its end, so trials side
by side never share a row.

initdb refuses to run as root, and so does postgres: as root, both run as the user `postgres` (the Debian
package creates it) or else `nobody`, in a folder of their own under /tmp that the user can reach. That
folder is a run folder like the sandboxes' (clirace-PID-...): the postmaster carries its marker, and the
watchdog of a killed clirace and the next start's sweep end it and remove the folder (run/cleanup.py). The
backends are the postmaster's children, and exit when it dies.

Every statement is logged (log_statement=all) with a prefix naming its database, backend and virtual
transaction; a trial reads the lines of its own database, up to a mark it logs itself at its end.
"""
from __future__ import annotations

import dataclasses
import glob
import os
import pwd
import re
import shutil
import subprocess
import threading
import time
from pathlib import Path

from clirace.errors import PgError, ServiceFailed
from clirace.history import ServerOp
from clirace.run import _ending, cleanup
from clirace.run.services._pgwire import Client, literal
from clirace.run.services.redis import LINE_CAP, MAX_OPS, free_port

USER = "clirace"  # the database superuser initdb creates; the tool connects as it
TEMPLATE = "clirace_template"
READY_WITHIN = 30.0
LOG_SCAN_CAP = 16 << 20  # bytes of the server's log one trial reads at most
# log_line_prefix '%n %p %d %v ': epoch.ms, backend pid, database, virtual transaction id
_LINE = re.compile(r"^(\d+\.\d+) (\d+) (\S*) (\S*) (LOG|ERROR|DETAIL|STATEMENT|FATAL|WARNING|HINT|NOTICE):  (.*)$",
                   re.S)
_STATEMENT = re.compile(r"^(?:statement|execute [^:]*): (.*)$", re.S)


def binaries() -> tuple[str | None, str | None]:
    """initdb and postgres: on PATH, else Debian's /usr/lib/postgresql/VERSION/bin (the newest)."""
    found = [shutil.which("initdb"), shutil.which("postgres")]
    for folder in sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=_version, reverse=True):
        found = [f or (os.path.join(folder, name) if os.access(os.path.join(folder, name), os.X_OK) else None)
                 for f, name in zip(found, ("initdb", "postgres"), strict=False)]
    return found[0], found[1]


def _version(folder: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", folder)[:2])


def _run_as() -> tuple[int | None, int | None, str]:
    """(uid, gid, name) to run the server as: None as long as clirace is not root."""
    if os.geteuid() != 0:
        return None, None, ""
    for name in ("postgres", "nobody"):
        try:
            entry = pwd.getpwnam(name)
        except KeyError:
            continue
        return entry.pw_uid, entry.pw_gid, name
    raise ServiceFailed("clirace runs as root, and PostgreSQL refuses to: neither the user postgres nor nobody "
                        "exists to run it as")


class PostgresServer:
    def __init__(self) -> None:
        initdb, postgres = binaries()
        if not (initdb and postgres):
            raise ServiceFailed("initdb or postgres not found")
        uid, gid, self.user = _run_as()
        base = cleanup.SHARED_TMP if uid is not None else None  # the unprivileged user reaches it; swept too
        # A run folder of its own: a killed clirace's watchdog (or the next start's sweep) ends the server and
        # removes the folder.
        self.folder = cleanup.make_workdir(base, "pg-")
        self.marker = f"{os.getpid()}:{self.folder}/postgres"
        self.data, self.log = self.folder / "data", self.folder / "server.log"
        self._lock = threading.Lock()
        self._count = 0
        self.control: Client | None = None
        self.proc: subprocess.Popen[bytes] | None = None
        try:
            self._start(initdb, postgres, uid, gid)
        except OSError as exc:  # a binary it may not run, a folder it may not write: this machine's doing
            self.stop()
            raise ServiceFailed(f"{type(exc).__name__}: {exc}") from None
        except BaseException:  # a failed start, or Ctrl-C or SIGTERM meanwhile: nothing may be left behind
            self.stop()
            raise

    def _start(self, initdb: str, postgres: str, uid: int | None, gid: int | None) -> None:
        env = {**os.environ, _ending.MARKER: self.marker, "LC_ALL": "C"}
        extra_groups: list[int] | None = [] if uid is not None else None  # as another user: none of clirace's groups
        if uid is not None and gid is not None:
            os.chmod(self.folder, 0o711)
            self.data.mkdir(mode=0o700)
            os.chown(self.data, uid, gid)
            self.log.touch()
            os.chown(self.log, uid, gid)
        init = subprocess.run([initdb, "-D", str(self.data), "-U", USER, "-A", "trust", "--no-sync", "-E", "UTF8",
                               "--locale=C"], env=env, capture_output=True, text=True, user=uid, group=gid,
                              extra_groups=extra_groups)
        if init.returncode != 0:
            raise ServiceFailed(f"initdb failed ({init.returncode}): {' '.join(init.stderr.split())[-300:]}")
        for _ in range(5):  # another process may take the free port before the server binds it
            self.port = free_port()
            settings = {"listen_addresses": "127.0.0.1", "port": str(self.port), "unix_socket_directories": "",
                        "fsync": "off", "full_page_writes": "off", "synchronous_commit": "off",
                        "log_statement": "all", "log_line_prefix": "%n %p %d %v ", "log_min_messages": "warning",
                        "log_min_error_statement": "error", "update_process_title": "off", "max_connections": "200",
                        "dynamic_shared_memory_type": "mmap", "shared_buffers": "16MB", "autovacuum": "off"}
            args = [postgres, "-D", str(self.data), *(a for k, v in settings.items() for a in ("-c", f"{k}={v}"))]
            said_before = self.log.stat().st_size if self.log.exists() else 0
            with open(self.log, "ab") as out:
                self.proc = subprocess.Popen(args, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=out,
                                             start_new_session=True, user=uid, group=gid, extra_groups=extra_groups)
            cleanup.keep(self.proc.pid)  # lives across trials: not an orphan for end_adopted to end
            try:
                self.control = self._connect("postgres")
            except ServiceFailed:
                with open(self.log, "rb") as log:
                    log.seek(said_before)
                    if b"Address already in use" not in log.read():
                        raise
                self.proc.wait()  # it exited: _connect saw it gone
                cleanup.unkeep(self.proc.pid)
                continue
            if self._ours(self.control):
                break
            # Another check's server took the port between free_port() and this one's bind (and trusts loopback
            # too): this server cannot bind it and is ending. Its trials must never meet the other's databases.
            self.control.close()
            self.control = None
            self.proc.kill()
            self.proc.wait()
            cleanup.unkeep(self.proc.pid)
        else:
            raise ServiceFailed("postgres found no free loopback port in five tries")
        self._control().query(f"CREATE DATABASE {TEMPLATE}")

    def make_template_again(self) -> None:
        """An empty template again: a setup command killed at its deadline may have left part of its work."""
        with self._lock:
            try:
                self._control().query(f"DROP DATABASE IF EXISTS {TEMPLATE} WITH (FORCE)")
                self._control().query(f"CREATE DATABASE {TEMPLATE}")
            except (OSError, PgError) as exc:
                raise ServiceFailed(f"could not make the template database again: {exc}") from None

    def _ours(self, client: Client) -> bool:
        """Whether `client` reached this check's own server: the one whose data folder is ours."""
        try:
            rows = client.query("SHOW data_directory")
        except (OSError, PgError):
            return False
        return bool(rows) and rows[0][0] is not None and Path(rows[0][0]).resolve() == self.data.resolve()

    def _control(self) -> Client:
        """clirace's own session on the server, open from its start to its stop."""
        if self.control is None:  # __init__ raised before _start connected: no caller has this server
            raise ServiceFailed("the PostgreSQL server has not started")
        return self.control

    def _connect(self, database: str) -> Client:
        deadline = time.monotonic() + READY_WITHIN
        while True:
            if self.proc is not None and self.proc.poll() is not None:
                said = " ".join(self.log.read_text(errors="replace").split())[-300:]
                raise ServiceFailed(f"postgres exited ({self.proc.returncode}): {said}")
            try:
                return Client(self.port, database, USER)
            except (OSError, PgError) as exc:
                if time.monotonic() > deadline:
                    raise ServiceFailed(f"postgres did not accept a connection within {READY_WITHIN:g}s ({exc})") from exc
            time.sleep(0.01)

    def url(self, database: str) -> str:
        return f"postgresql://{USER}@127.0.0.1:{self.port}/{database}"

    def env(self, database: str) -> dict[str, str]:
        return {"DATABASE_URL": self.url(database), "PGHOST": "127.0.0.1", "PGPORT": str(self.port),
                "PGUSER": USER, "PGDATABASE": database}

    def trial(self) -> PostgresTrial:
        with self._lock:
            self._count += 1
            name = f"t{self._count}"
            offset = self.log.stat().st_size
            try:
                self._control().query(f"CREATE DATABASE {name} TEMPLATE {TEMPLATE} STRATEGY FILE_COPY")
            except (OSError, PgError) as exc:
                raise ServiceFailed(f"could not create the trial's database from the template: {exc}") from None
        return PostgresTrial(self, name, offset)

    def drop(self, name: str) -> None:
        with self._lock:
            try:
                self._control().query(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
            except (OSError, PgError):
                pass  # the server is going away; the folder goes with it

    def stop(self) -> None:
        try:
            if self.proc is not None:
                if self.control is not None:
                    self.control.close()
                self.proc.terminate()  # smart shutdown would wait for clients; SIGTERM is "fast": it ends them
                try:
                    self.proc.wait(10.0)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait()
                cleanup.unkeep(self.proc.pid)
        finally:  # whatever cut the above short, the server's processes (marked below its folder) and folder go
            cleanup.end_run(self.folder)


class PostgresTrial:
    """One trial's database, and what the server's log shows its clients did in it."""

    def __init__(self, server: PostgresServer, name: str, offset: int) -> None:
        self.server, self.name, self.offset = server, name, offset
        self.sessions: list[Client] = []  # clirace's own sessions holding a lock (lock.hold.take)

    @property
    def url(self) -> str:
        return self.server.url(self.name)

    def hold(self, sql: str) -> list[tuple[str | None, ...]]:
        """Run `sql` (taking a lock) in a session of clirace's own that stays open until release(); its rows."""
        session = self.server._connect(self.name)
        self.sessions.append(session)
        return session.query(sql)

    def lock_waits(self) -> list[str]:
        """What the trial's sessions now wait for a lock on (pg_stat_activity: wait event type Lock), each as
        "backend PID: its statement"; empty when none waits, or the server could not be asked."""
        try:
            session = self.server._connect(self.name)
        except (OSError, PgError, ServiceFailed):
            return []
        try:
            rows = session.query("SELECT pid, wait_event, left(query, 120) FROM pg_stat_activity "
                                 f"WHERE datname = {literal(self.name)} AND wait_event_type = 'Lock'")
        except (OSError, PgError):
            return []
        finally:
            session.close()
        return [f"backend {pid} waits for a {event} lock in {query!r}" for pid, event, query in rows]

    def release(self) -> None:
        for session in self.sessions:
            session.close()
        self.sessions.clear()

    def finish(self, epoch0: float) -> tuple[tuple[ServerOp, ...], str]:
        self.release()
        mark = f"clirace-end-{os.urandom(6).hex()}"
        note = ""
        try:  # logged in this database: once the log shows it, every earlier statement of its clients is there
            session = self.server._connect(self.name)
            session.query(f"SELECT {literal(mark)}")
            session.close()
        except (OSError, PgError, ServiceFailed) as exc:
            note = f"could not mark the end of the trial in the server's log ({exc})"
        ops, more = self._read_log(mark, epoch0)
        self.server.drop(self.name)
        return ops, "; ".join(filter(None, [note, more]))

    def _read_log(self, mark: str, epoch0: float) -> tuple[tuple[ServerOp, ...], str]:
        deadline = time.monotonic() + 2.0
        while True:
            with open(self.server.log, "rb") as handle:
                handle.seek(self.offset)
                text = handle.read(LOG_SCAN_CAP).decode(errors="replace")
            if mark in text or time.monotonic() > deadline:
                break
            time.sleep(0.01)
        ops: list[ServerOp] = []
        dropped = 0
        for record in _records(text):
            found = _LINE.match(record)
            if found is None or found.group(3) != self.name:
                continue
            stamp, pid, _db, vxid, level, message = found.groups()
            if mark in message:
                break
            statement = _STATEMENT.match(message) if level == "LOG" else None
            if level == "DETAIL" and message.startswith("parameters: ") and ops and ops[-1].client == pid:
                ops[-1] = dataclasses.replace(ops[-1], params=message[len("parameters: "):][:LINE_CAP])
                continue
            if statement is None and level != "ERROR":
                continue
            if len(ops) >= MAX_OPS:
                dropped += 1
                continue
            ops.append(ServerOp("postgres", pid, round(float(stamp) - epoch0, 6),
                                sql=statement.group(1).strip() if statement else "", xact=vxid,
                                line=f"{level}: {message}"[:LINE_CAP]))
        note = "" if mark in text else "the server's log did not show clirace's end mark: statements may be missing"
        if dropped:
            note = "; ".join(filter(None, [note, f"{dropped} statements beyond the first {MAX_OPS} not kept"]))
        return tuple(ops), note


def _records(text: str) -> list[str]:
    """The log's records: a line, and the lines after it that start with a tab (a statement over several lines)."""
    records: list[str] = []
    for line in text.split("\n"):
        if line.startswith("\t") and records:
            records[-1] += "\n" + line[1:]
        elif line:
            records.append(line)
    return records
