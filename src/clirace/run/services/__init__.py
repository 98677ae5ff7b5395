"""Servers a spec declares (`services:`), started by clirace for the check from the binaries on PATH and stopped
at its end, leaving nothing behind; every trial gets fresh state of its own in them, and what the servers
saw of the trial's clients joins its record (`Trial.server_ops`).

- redis.py: a Redis server per trial, watched with MONITOR;
- postgres.py: a PostgreSQL server per check, a database per trial copied from a template, statements logged;
- _resp.py, _pgwire.py: the few words clirace itself says to them (no client library at run time).

The tool reaches them through `{redis_url}` and `{postgres_url}`, and the environment variables REDIS_URL,
DATABASE_URL, PGHOST, PGPORT, PGUSER and PGDATABASE.
"""
from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from clirace.errors import InternalError, PgError, RedisError, ServiceFailed, SpecError, TrialFailed
from clirace.history import ServerOp
from clirace.run import _ending
from clirace.run.services.meet import ServerAim
from clirace.run.services.postgres import TEMPLATE, PostgresServer, PostgresTrial, binaries
from clirace.run.services.proxy import Proxy
from clirace.run.services.redis import RedisTrial
from clirace.spec import Spec

if TYPE_CHECKING:
    from clirace.run.sandbox import Sandbox

__all__ = ["Services", "TrialServices", "ServiceFailed", "ServerError", "missing", "start", "stop"]

ServerError = (RedisError, PgError, ServiceFailed)  # what a server may answer clirace's own commands with

INSTALL = {"redis": "apt-get install redis-server", "postgres": "apt-get install postgresql"}


def _needed(spec: Spec) -> list[str]:
    services = spec.services
    return [name for name in ("redis", "postgres") if services is not None and getattr(services, name)]


def missing(spec: Spec) -> list[tuple[str, str]]:
    """(service, binary) for each server the spec declares whose binary is not installed."""
    out = []
    for service in _needed(spec):
        if service == "redis" and shutil.which("redis-server") is None:
            out.append((service, "redis-server"))
        if service == "postgres":
            initdb, postgres = binaries()
            out += [(service, name) for name, path in (("initdb", initdb), ("postgres", postgres)) if path is None]
    return out


def missing_message(spec: Spec, criteria: list[str]) -> str | None:
    """What `validate` says and `check` refuses with (exit 2) when a declared server cannot start here."""
    gone = missing(spec)
    if not gone:
        return None
    names = ", ".join(dict.fromkeys(binary for _, binary in gone))
    services = list(dict.fromkeys(service for service, _ in gone))
    install = "; ".join(INSTALL[s] for s in services)
    return (f"services.{' and services.'.join(services)} need{'s' if len(services) == 1 else ''} {names}, which "
            f"{'is' if len(gone) == 1 else 'are'} not installed (not on PATH"
            f"{', nor in /usr/lib/postgresql/*/bin' if 'postgres' in services else ''}), so no trial can run: "
            f"{', '.join(criteria) or 'every criterion'} cannot be tested. Install: {install}.")


def require(spec: Spec, criteria: list[str]) -> None:
    message = missing_message(spec, criteria)
    if message:
        raise SpecError(message, where=str(spec.path))


class Services:
    """The check's servers: PostgreSQL's, started once; Redis's, one per trial (see for_trial)."""

    def __init__(self, spec: Spec):
        self.spec = spec
        self.redis = shutil.which("redis-server") if spec.services and spec.services.redis else None
        self.postgres: PostgresServer | None = None
        if spec.services and spec.services.postgres:
            try:
                self.postgres = PostgresServer()
            except ServiceFailed as exc:  # the spec asked for a server the machine has: starting it is clirace's
                raise InternalError(f"services.postgres could not start on this machine ({exc}): clirace's or this "
                                    "machine's failure, not the spec's; nothing was run", where=str(spec.path),
                                    hint="Run `clirace validate` for what is installed.") from None

    def for_trial(self, private: Path, marker: str) -> TrialServices:
        return TrialServices(self, private, marker)

    def fill_template(self, workdir: Path, run_setup: Callable[[Spec, Sandbox, Any, Any], None]) -> None:
        """Run services.postgres.setup once, against the template every trial's database is copied from.
        `run_setup(spec, sandbox, served, commands)` runs them as a trial's setup is run (the caller hands it
        over: servers know no scenario) and raises SpecError when one fails, TrialFailed when one gave no answer.
        A command with no answer (killed at its deadline: a stalled client on a loaded machine, or a hung tool)
        is no answer about the spec: the setup runs once more, on a template made again (the first may have
        left half of its work there); with no answer twice, TrialFailed says both and nothing can run."""
        commands = self.spec.services.postgres_setup if self.spec.services else ()
        if self.postgres is None or not commands:
            return
        from clirace.run.sandbox import Sandbox
        first: TrialFailed | None = None
        for name in ("services-setup", "services-setup-again"):
            sandbox = Sandbox(workdir, name, self.spec.spec_dir)
            try:
                run_setup(self.spec, sandbox, _Template(self.postgres), commands)
                return
            except TrialFailed as exc:
                if first is not None:
                    raise TrialFailed(f"services.postgres.setup gave no answer twice, each time on a new template "
                                      f"database: {first.what}; then {exc.what}; so nothing could run",
                                      exc.failure) from None
                first = exc
                self.postgres.make_template_again()
            finally:
                sandbox.end()

    def stop(self) -> None:
        if self.postgres is not None:
            self.postgres.stop()


class _Template:
    """The template database's address, for services.postgres.setup."""

    def __init__(self, server: PostgresServer):
        self.server = server

    def values(self) -> dict[str, str]:
        return {"postgres_url": self.server.url(TEMPLATE)}

    def env(self) -> dict[str, str]:
        return self.server.env(TEMPLATE)


class TrialServices:
    """One trial's servers: its values for placeholders, its environment, and (finish) what they saw."""

    def __init__(self, services: Services, private: Path, marker: str):
        self.redis: RedisTrial | None = None
        self.postgres: PostgresTrial | None = None
        env = {**os.environ, _ending.MARKER: marker}  # the trial's marker: its end sweeps what outlives shutdown
        try:
            if services.redis:
                self.redis = RedisTrial(services.redis, private, env)
            if services.postgres is not None:
                self.postgres = services.postgres.trial()
        except ServiceFailed:
            self.finish(time.time())
            raise

    def values(self) -> dict[str, str]:
        values = {}
        if self.redis:
            values["redis_url"] = self.redis.url
        if self.postgres:
            values["postgres_url"] = self.postgres.url
        return values

    def env(self) -> dict[str, str]:
        env = {"REDIS_URL": self.redis.url} if self.redis else {}
        if self.postgres:
            env.update(self.postgres.server.env(self.postgres.name))
        return env

    def proxied(self, aim: ServerAim) -> tuple[Proxy, Callable[[str], str]]:
        """A rendezvous proxy in front of the server `aim` names, and what turns an address of the server in an
        argument or an environment value into the proxy's."""
        if aim.service == "redis" and self.redis:
            port = self.redis.port
        elif self.postgres:
            port = self.postgres.server.port
        else:  # an aim comes from what this trial's own servers saw
            raise InternalError(f"a rendezvous aimed at {aim.service}, a server this trial does not have")
        proxy = Proxy(aim.service, port, aim.targets)
        direct, via = f"127.0.0.1:{port}", f"127.0.0.1:{proxy.port}"
        return proxy, lambda text: str(proxy.port) if text == str(port) else text.replace(direct, via)

    def finish(self, epoch0: float) -> dict[str, Any]:
        """The record's server fields; the servers' state is gone afterwards."""
        ops: list[ServerOp] = []
        notes = []
        for server in (self.redis, self.postgres):
            if server is not None:
                seen, note = server.finish(epoch0)
                ops += seen
                notes.append(note)
        self.redis = self.postgres = None
        return {"server_ops": tuple(ops), "server_note": "; ".join(filter(None, notes))}


def start(spec: Spec) -> Services | None:
    return Services(spec) if _needed(spec) else None


def stop(services: Services | None) -> None:
    if services is not None:
        services.stop()
