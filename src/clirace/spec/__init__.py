"""Stage 1, spec: read a YAML spec, validate it against spec_schema.json, and return a `Spec`.

Every problem is a `SpecError` naming file:line:column, the offending value, what was expected and, for
misspelt keys and placeholders, the nearest valid name (messages: spec/messages.py). A spec whose paths point
at real files (the real home, /tmp, any literal absolute path) is refused unless the caller allows it.

The folder spec/: Stage 1, spec: reading a YAML spec (with file:line:column positions, and those of the sections
findings point at, recorded in the history: places.py), its messages, placeholders, patterns, config formats and
the starter spec.

May import: clirace.errors, clirace.history (the vocabulary, SpecPlace).
"""
from __future__ import annotations

import json
import math
import os
import shlex
import shutil
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any, Union

import jsonschema

from clirace.errors import SpecError
from clirace.history import SpecPlace
from clirace.history.vocab import ConfigFormat, HoldMode, LockKind, ReadyKind, WorkloadKind
from clirace.spec import _checks as _spec_checks
from clirace.spec import placeholders
from clirace.spec._yaml import START_HINT, KeyPath, Located, load_located
from clirace.spec.messages import check_sandbox, did_you_mean, dotted, schema_error, show
from clirace.spec.places import spec_places

Argv = tuple[str, ...]
SHELL = "/bin/sh"


@dataclass(frozen=True)
class OwnCommand:
    """A command that is not appended to tool.command: a program of its own (`run: [...]`) or a shell script
    (`sh: '...'`, run as /bin/sh -c SCRIPT). Setup commands, a workload's read, lock.contender and
    lock.error_command may take this form (the tool behind a dispatcher script, a read through another program)."""
    argv: Argv


SetupCommand = Union[Argv, OwnCommand]  # noqa: UP007 - a runtime alias; a plain command is appended to tool.command


def words(command: SetupCommand | None) -> Argv:
    """The arguments a command is given in the spec (an own command's program and arguments, or its script)."""
    if command is None:
        return ()
    return command.argv if isinstance(command, OwnCommand) else command

DEFAULT_TIMEOUT = 10.0
DEFAULT_PARALLEL = 8
DEFAULT_ROUNDS = 3
DEFAULT_WAIT = 1.0
DEFAULT_PROMPT = 5.0
MAX_DURATION = 600.0


@dataclass(frozen=True)
class ConfigFile:
    path: str
    format: ConfigFormat
    key: str = "{key}"  # a dotted path; with `query`, a JMESPath expression (configfile.lookup(query=True))
    query: bool = False


@dataclass(frozen=True)
class Workload:
    kind: WorkloadKind
    name: str
    run: Argv
    setup: tuple[SetupCommand, ...] = ()
    read: SetupCommand | None = None  # appended to tool.command, or a command of its own (run, sh)
    start: int | None = None
    config: ConfigFile | None = None
    add: Argv | None = None
    claimed: str | None = None
    list: Argv | None = None
    value: str | None = None  # counter: the regex that finds the counter in read's output
    key: str = "cliracek{i}"  # keys: the template of the i-th key's name ({i} keeps them distinct)

    def key_name(self, i: int) -> str:
        """The i-th key of a keys workload. A round of n writes keys 0..n-1 and the keys written before it take
        n and on; the atomic-config trials number theirs the same way: no two writes of one trial share a key."""
        return placeholders.expand(self.key, {"i": i})


@dataclass(frozen=True)
class Hold:
    """How clirace keeps the lock busy: 'command' (test hook), 'park' (FIFO) or 'take' (clirace locks)."""
    how: HoldMode
    command: Argv | None = None
    ready: tuple[ReadyKind, object] | None = None  # (kind, the file, regex or delay in seconds)
    fifo: str | None = None
    content: str | None = None
    invalid_content: str | None = None
    path: str | None = None
    kind: LockKind | None = None
    key: str | None = None  # take, on a server: the Redis key set with NX, the PostgreSQL advisory lock number
    row: str | None = None  # take pg-row: "TABLE WHERE CONDITION", locked with SELECT ... FOR UPDATE
    ttl: float = 30.0  # take redis-nx: the key's time to live (PX), as the tool's own lock would have
    env: tuple[tuple[str, str], ...] = ()  # extra environment of the hold command (a hook driven by a variable)
    own: bool = False  # `run`: the hold command is a helper program, not the tool (not appended to tool.command)


@dataclass(frozen=True)
class Lock:
    contender: SetupCommand  # appended to tool.command, or a command of its own (run, sh)
    hold: Hold
    error_command: SetupCommand | None = None
    wait_option: Argv | None = None
    wait_env: tuple[tuple[str, str], ...] = ()  # variables that set the lock-wait timeout, beside or instead of wait_option
    wait: float = DEFAULT_WAIT
    prompt: float = DEFAULT_PROMPT
    never_waits: bool = False  # fails fast: its prompt LOCK_HELD is its lock timeout (of 0)


@dataclass(frozen=True)
class Session:
    none: bool = False  # the tool has no session id (session-isolation then fails, with that reason)
    flag: Argv | None = None
    env: str | None = None
    run: Argv | None = None
    temp_dirs: tuple[str, ...] = ("{tmp}", "{runtime_dir}")


@dataclass(frozen=True)
class Services:
    """Servers clirace starts for the check (spec `services`): each trial gets fresh state of its own in them."""
    redis: bool = False
    postgres: bool = False
    postgres_setup: tuple[Argv, ...] = ()  # tool commands run once against the template database


@dataclass(frozen=True)
class Spec:
    path: Path
    command: Argv
    env: dict[str, str] = field(default_factory=dict)
    cwd: str = "{sandbox}"
    timeout: float = DEFAULT_TIMEOUT
    setup: tuple[SetupCommand, ...] = ()
    parallel: int = DEFAULT_PARALLEL
    rounds: int = DEFAULT_ROUNDS
    workloads: tuple[Workload, ...] = ()
    lock: Lock | None = None
    session: Session | None = None
    services: Services | None = None
    raw: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)  # the spec as YAML gave it
    # Where it declares what findings can be about (spec/places.py), for the history: reports place annotations
    places: dict[str, SpecPlace] = field(default_factory=dict, compare=False, repr=False)

    @property
    def spec_dir(self) -> Path:
        return self.path.parent

    def workload(self, kind: str) -> Workload | None:
        return next((w for w in self.workloads if w.kind == kind), None)


@lru_cache(maxsize=1)
def schema() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(resources.files("clirace.spec").joinpath("spec_schema.json").read_text())
    return loaded


def load_spec(path: str | Path, *, allow_outside_sandbox: bool = False, check_programs: bool = True) -> Spec:
    """Read, validate and build the spec at `path`; raise SpecError (one paragraph) on any problem.

    allow_outside_sandbox: accept paths that make the target touch real files (see `_spec_messages.check_sandbox`).
    check_programs: False (`validate --no-tool`) checks the spec alone, not that the tool and setup programs it
    names are installed (pre-commit.ci, a fresh clone).
    """
    path = Path(path).absolute()
    located = load_located(path)
    data = located.data
    if not isinstance(data, dict):
        kind = "a list" if isinstance(data, list) else f"a single value, {show(data)}"
        raise SpecError(f"the spec is {kind}; expected a mapping with the keys 'version' and 'tool'.",
                        where=located.where(()), hint=START_HINT)
    _spec_checks.strings(located)
    # No format checker: jsonschema's "regex" format compiles with re and lets OverflowError escape;
    # _spec_checks.regexes judges every pattern instead, with the engine that will run it.
    errors = list(jsonschema.Draft202012Validator(schema()).iter_errors(data))
    if errors:
        raise schema_error(errors, located, schema())
    _validate_placeholders(located)
    _spec_checks.durations(data, located)
    _spec_checks.regexes(data, located)
    _spec_checks.config_queries(data, located)
    _spec_checks.environment_size(data, located)
    spec = _build(path, data, located)
    _validate_semantics(spec, located, check_programs)
    _spec_checks.file_paths(data, located, str(spec.spec_dir))
    if not allow_outside_sandbox:
        check_sandbox(data, located)
    return spec


# ---------------------------------------------------------------------------------------- placeholders

def _allowed_names(path: KeyPath, undeclared: frozenset[str] = frozenset()) -> frozenset[str] | None:
    """Which placeholders a string at `path` may use; None for strings that are not templates. `undeclared`:
    the placeholders of services the spec does not declare ({redis_url} without services.redis)."""
    base = placeholders.SANDBOX - undeclared
    head = path[0] if path else None
    if head == "tool":
        return base if path[1] in ("command", "env", "cwd") else None
    if head == "setup":
        return base
    if head == "workloads" and len(path) >= 3:
        field_name = path[2]
        per = placeholders.PER_INVOCATION
        extra = {
            "run": per | {"key", "value", "input", "output"},
            "read": {"key"},
            "config": {"key"},
            "add": {"item", "i"},
            "setup": {"n"},
            "list": set(),
        }.get(str(field_name))
        if field_name == "key" and len(path) == 3:  # the keys' name template: only their number
            return frozenset({"i"})
        return None if extra is None else base | frozenset(extra)
    if head == "lock":
        sub = path[1]
        # A command that writes a key of its own ({key}, {value}) has it read back after the holder ended.
        writes = {"key", "value"}
        if sub == "hold":
            held = base | {"ready_file", "release_file", "hold_seconds", "hold_ms", "pid", "now"}
            runs = len(path) > 2 and (path[2] in ("command", "run", "env") or path[2:4] == ("park", "command"))
            return held | writes if runs else held
        if sub in ("wait_option", "wait_env"):
            return base | {"timeout_ms", "timeout_s"}
        if sub == "contender":
            return base | writes
        if sub == "error_command":
            return base
        return None
    if head == "services":
        return base if "setup" in path else None  # services.postgres.setup runs against the template database
    if head == "session":
        if path[1] == "flag":
            return frozenset({"session_id"})
        if path[1] == "run":
            return base | placeholders.PER_INVOCATION | {"input", "output"}
        if path[1] == "temp_dirs":
            return base
    return None


def _validate_placeholders(located: Located) -> None:
    declared = located.data.get("services") or {}
    undeclared = frozenset(name for name, service in placeholders.SERVICES.items() if service not in declared)

    def walk(value: object, path: KeyPath) -> None:
        if isinstance(value, dict):
            for k, v in value.items():
                walk(v, path + (k,))
        elif isinstance(value, list):
            for i, v in enumerate(value):
                walk(v, path + (i,))
        elif isinstance(value, str):
            allowed = _allowed_names(path, undeclared)
            if allowed is None:
                return
            for name in placeholders.names_in(value):
                if name in undeclared:
                    raise SpecError(f"{dotted(path)} uses '{{{name}}}', but the spec declares no services."
                                    f"{placeholders.SERVICES[name]}; expected it declared, so that clirace "
                                    "starts that server for every trial.", where=located.where(path),
                                    hint=f"Add `services: {{{placeholders.SERVICES[name]}: {{}}}}` to the spec.")
                if name not in allowed:
                    guess = did_you_mean(name, sorted(allowed), "'{{{}}}'")
                    found = f"unknown placeholder '{{{name}}}' in {dotted(path)}"
                    listed = ", ".join("{" + a + "}" for a in sorted(allowed))
                    raise SpecError(f"{found}; did you mean {guess}?" if guess else f"{found}; expected one of {listed}.",
                                    where=located.where(path),
                                    hint=f"Placeholders allowed here: {listed}." if guess else None)
    walk(located.data, ())


# --------------------------------------------------------------------------------------------- building

def duration(value: str | float) -> float:
    """'250ms', '1.5s' or a number of seconds, in seconds (the schema has checked the form)."""
    if isinstance(value, (int, float)):
        return float(value)
    if value.endswith("ms"):
        return float(value[:-2]) / 1000
    return float(value[:-1])


def _build(path: Path, data: dict[str, Any], located: Located) -> Spec:
    def argv(value: Any, *where: str | int) -> Argv:
        if not isinstance(value, str):
            return tuple(str(v) for v in value)
        try:
            return tuple(shlex.split(value))
        except ValueError as exc:  # "No closing quotation", "No escaped character"
            raise SpecError(f"{dotted(where)} is {value!r}, which cannot be split into arguments ({exc}); expected "
                            "balanced quotes, or a list of arguments.", where=located.where(where)) from None

    def setup(value: Any, *where: str | int) -> SetupCommand:
        if not isinstance(value, dict):
            return argv(value, *where)
        if "run" in value:
            return OwnCommand(argv(value["run"], *where, "run"))
        return OwnCommand((SHELL, "-c", value["sh"]))

    tool = data["tool"]
    workloads = []
    for index, w in enumerate(data.get("workloads", [])):
        at = ("workloads", index)
        config = w.get("config")
        workloads.append(Workload(
            kind=WorkloadKind(w["kind"]), name=w.get("name", f"{w['kind']}#{index}"), run=argv(w["run"], *at, "run"),
            setup=tuple(setup(c, *at, "setup", n) for n, c in enumerate(w.get("setup", []))),
            read=setup(w["read"], *at, "read") if "read" in w else None,
            start=int(w["start"]) if "start" in w else None,
            config=ConfigFile(config["path"], ConfigFormat(config["format"]),
                              config.get("query", config.get("key", "{key}")), query="query" in config)
            if config else None,
            add=argv(w["add"], *at, "add") if "add" in w else None,
            claimed=w.get("claimed"),
            list=argv(w["list"], *at, "list") if "list" in w else None,
            value=w.get("value"),
            key=w.get("key", Workload.key),
        ))
    lock = None
    if "lock" in data:
        raw = data["lock"]
        h = raw["hold"]
        if "command" in h or "run" in h:
            kind, value = next(iter(h.get("ready", {"delay": 0.3}).items()))
            ready = (ReadyKind(kind), duration(value) if kind == "delay" else value)
            way = "command" if "command" in h else "run"
            hold = Hold(HoldMode.COMMAND, command=argv(h[way], "lock", "hold", way), ready=ready, own=way == "run",
                        env=tuple((str(k), str(v)) for k, v in (h.get("env") or {}).items()))
        elif "park" in h:
            p = h["park"]
            hold = Hold(HoldMode.PARK, command=argv(p["command"], "lock", "hold", "park", "command"), fifo=p["fifo"],
                        content=p.get("content"), invalid_content=p.get("invalid_content"))
        else:
            t = h["take"]
            hold = Hold(HoldMode.TAKE, path=t.get("path"), kind=LockKind(t["kind"]), content=t.get("content", "{pid}"),
                        key=None if t.get("key") is None else str(t["key"]), row=t.get("row"),
                        ttl=duration(t.get("ttl", Hold.ttl)))
        lock = Lock(contender=setup(raw["contender"], "lock", "contender"), hold=hold,
                    error_command=setup(raw["error_command"], "lock", "error_command") if "error_command" in raw else None,
                    wait_option=argv(raw["wait_option"], "lock", "wait_option") if "wait_option" in raw else None,
                    wait_env=tuple((str(k), str(v)) for k, v in (raw.get("wait_env") or {}).items()),
                    wait=duration(raw.get("wait", DEFAULT_WAIT)), prompt=duration(raw.get("prompt", DEFAULT_PROMPT)),
                    never_waits=bool(raw.get("never_waits", False)))
    session = None
    if "session" in data:
        s = data["session"]
        session = Session(none=bool(s.get("none", False)),
                          flag=argv(s["flag"], "session", "flag") if "flag" in s else None, env=s.get("env"),
                          run=argv(s["run"], "session", "run") if "run" in s else None,
                          temp_dirs=tuple(s.get("temp_dirs", Session.temp_dirs)))
    services = None
    if "services" in data:
        raw_services = data["services"]
        services = Services(redis="redis" in raw_services, postgres="postgres" in raw_services,
                            postgres_setup=tuple(argv(c, "services", "postgres", "setup", n) for n, c in
                                                 enumerate((raw_services.get("postgres") or {}).get("setup", []))))
    return Spec(
        path=path, command=argv(tool["command"], "tool", "command"), env=dict(tool.get("env", {})),
        cwd=tool.get("cwd", "{sandbox}"), timeout=duration(tool.get("timeout", DEFAULT_TIMEOUT)),
        setup=tuple(setup(c, "setup", n) for n, c in enumerate(data.get("setup", []))),
        parallel=int(data.get("parallel", DEFAULT_PARALLEL)), rounds=int(data.get("rounds", DEFAULT_ROUNDS)),
        workloads=tuple(workloads), lock=lock, session=session, services=services, raw=data,
        places=spec_places(located),
    )


def _validate_semantics(spec: Spec, located: Located, check_programs: bool = True) -> None:
    raw = spec.raw
    for where in (("tool", "timeout"), ("lock", "wait"), ("lock", "prompt"), ("lock", "hold", "ready", "delay")):
        value = _spec_checks._get(raw, where)
        if value is None:
            continue
        seconds = duration(value)
        if not math.isfinite(seconds) or seconds > MAX_DURATION:
            found = f"{value!r}" if isinstance(value, str) else "not a number" if math.isnan(seconds) else f"{value:g}s"
            raise SpecError(f"{dotted(where)} is {found}; expected a duration of at most {MAX_DURATION:g}s.",
                            where=located.where(where),
                            hint="clirace waits this long for a stuck target; keep it to seconds.")
    for index, w in enumerate(raw.get("workloads", [])):
        if isinstance(w, dict) and w.get("kind") == "keys" and "read" in w and "config" in w:
            raise SpecError(f"workloads[{index}] (keys) gives both 'read' and 'config'; expected one: 'config' (the "
                            "file is parsed, each key looked up with config.key or config.query) or 'read' (a command "
                            "printing the key's value).", where=located.where_key(("workloads", index, "read")),
                            hint="With both, it would be unclear which one decides whether a key was lost.")
    static = {"spec_dir": spec.spec_dir, "python": sys.executable}
    if check_programs:
        _check_program(spec, spec.command, ("tool", "command"), located)
    for at, command in _setup_commands(spec) if check_programs else ():
        if isinstance(command, OwnCommand) and command.argv[0] != SHELL:
            _check_program(spec, command.argv, at, located)
    cwd = placeholders.expand(spec.cwd, static)
    if not placeholders.names_in(cwd) and os.path.isabs(cwd) and not os.path.isdir(cwd):
        found = "is not a directory" if os.path.exists(cwd) else "does not exist"
        raise SpecError(f"tool.cwd is {spec.cwd!r}, which {found}; expected an existing directory.",
                        where=located.where(("tool", "cwd")),
                        hint="Leave tool.cwd out to run in the trial's sandbox ({sandbox}), or use {home}.")
    if spec.session and spec.session.none and (spec.session.flag or spec.session.env or spec.session.run):
        raise SpecError("session says none (the tool has no session id) and also how to pass one; expected one of "
                        "the two.", where=located.where_key(("session",)))
    if spec.lock and spec.lock.wait_option and isinstance(spec.lock.contender, OwnCommand):
        raise SpecError("lock.wait_option is given, but lock.contender is a command of its own (run or sh), where no "
                        "option can be put after tool.command; expected lock.wait_env, or the option written into the "
                        "command (with {timeout_ms}) and lock.wait_option left out.",
                        where=located.where_key(("lock", "wait_option")))
    if spec.lock and spec.lock.never_waits and (spec.lock.wait_option or spec.lock.wait_env):
        given = "wait_option" if spec.lock.wait_option else "wait_env"
        raise SpecError(f"lock gives both never_waits and {given}; expected one: a tool that never waits has no "
                        "option to set its wait.", where=located.where_key(("lock", "never_waits")))
    if spec.lock and spec.lock.wait_env and not any(
            "{timeout_ms}" in value or "{timeout_s}" in value for _, value in spec.lock.wait_env):
        raise SpecError(f"lock.wait_env is {dict(spec.lock.wait_env)}, which never uses {{timeout_ms}} or {{timeout_s}}; "
                        "expected one of them where the timeout goes.", where=located.where_key(("lock", "wait_env")),
                        hint='Write it like {TOOL_LOCK_TIMEOUT_MS: "{timeout_ms}"}.')
    for index, workload in enumerate(spec.workloads):
        if workload.kind is WorkloadKind.KEYS and "{i}" not in workload.key:
            raise SpecError(f"workloads[{index}].key is {workload.key!r}, which never uses {{i}}; expected {{i}} where "
                            "each key's number goes, so that the keys written together are distinct.",
                            where=located.where(("workloads", index, "key")), hint='Write it like "task{i}".')
    if spec.session and not spec.session.none and spec.session.run is None and spec.workload("output") is None:
        raise SpecError("session has no 'run' (the command whose temp files are watched); expected one, since the "
                        "spec has no output workload to borrow it from.", where=located.where_key(("session",)))
    if spec.session and spec.session.flag and not any("{session_id}" in a for a in spec.session.flag):
        raise SpecError(f"session.flag is {list(spec.session.flag)}, which never uses {{session_id}}; expected the "
                        "placeholder where the id goes.", where=located.where(("session", "flag")),
                        hint='Write it like ["--session-id", "{session_id}"].')
    if spec.lock and spec.lock.wait_option and not any(
            "{timeout_ms}" in a or "{timeout_s}" in a for a in spec.lock.wait_option):
        raise SpecError(f"lock.wait_option is {list(spec.lock.wait_option)}, which never uses {{timeout_ms}} or "
                        "{timeout_s}; expected one of them where the timeout goes.",
                        where=located.where(("lock", "wait_option")),
                        hint='Write it like ["--lock-timeout", "{timeout_ms}"].')
    hold = spec.lock.hold if spec.lock else None
    if hold and hold.kind is not None and hold.kind.on_server:
        service = "redis" if hold.kind is LockKind.REDIS_NX else "postgres"
        if not getattr(spec.services, service, False):
            raise SpecError(f"lock.hold.take.kind is {hold.kind}, a lock in {service}, but the spec declares no "
                            f"services.{service}; expected it declared, so that clirace starts the server the "
                            "lock lives in.", where=located.where(("lock", "hold", "take", "kind")),
                            hint=f"Add `services: {{{service}: {{}}}}` to the spec.")
    if spec.lock and spec.lock.hold.how == "command":
        argv = " ".join([*(spec.lock.hold.command or ()), *(value for _, value in spec.lock.hold.env)])
        if not any(p in argv for p in ("{release_file}", "{hold_seconds}", "{hold_ms}")):
            way = "run" if spec.lock.hold.own else "command"
            raise SpecError(f"lock.hold.{way} uses neither " "{release_file} nor {hold_seconds} (nor {hold_ms} in "
                            "lock.hold.env); expected one: "
                            "{release_file} (clirace creates it to let the holder finish) or {hold_seconds} (how "
                            "long to hold).", where=located.where(("lock", "hold", way)))


def _setup_commands(spec: Spec) -> Iterator[tuple[KeyPath, SetupCommand]]:
    """(where, command) of every command that may be one of its own (run, sh): setup commands of the spec and its
    workloads, workloads' reads, lock.contender and lock.error_command."""
    yield from ((("setup", n, "run"), c) for n, c in enumerate(spec.setup))
    for index, workload in enumerate(spec.workloads):
        yield from ((("workloads", index, "setup", n, "run"), c) for n, c in enumerate(workload.setup))
        if workload.read is not None:
            yield ("workloads", index, "read", "run"), workload.read
    if spec.lock is not None:
        yield ("lock", "contender", "run"), spec.lock.contender
        if spec.lock.error_command is not None:
            yield ("lock", "error_command", "run"), spec.lock.error_command


def _check_program(spec: Spec, command: Argv, at: KeyPath, located: Located) -> None:
    """The program a command starts exists and can be run: tool.command's, or a setup command's `run`.

    tool.command's program may not depend on the sandbox; a setup command's may (an earlier setup command can
    install it there), and is then not checked."""
    name, where = dotted(at), located.where(at)
    if not command or not command[0]:
        raise SpecError(f"{name} has no program; expected the program first, e.g. [\"{{python}}\", \"tool.py\"].",
                        where=where)
    program = placeholders.expand(command[0], {"spec_dir": spec.spec_dir, "python": sys.executable})
    if placeholders.names_in(program):
        if at[0] == "tool":
            raise SpecError(f"{name} starts with {command[0]!r}, which depends on the sandbox; expected the program "
                            "as a fixed path or a name on PATH.", where=where)
        return
    if "/" in program:
        resolved = Path(program) if Path(program).is_absolute() else spec.spec_dir / program
        if not resolved.exists():
            raise SpecError(f"{name} names the program {program!r}, which does not exist; expected an existing "
                            "executable.", where=where,
                            hint="Relative paths are resolved against the spec's directory; {spec_dir} names it.")
        if not resolved.is_file() or not os.access(resolved, os.X_OK):
            raise SpecError(f"{name} names {program!r}, which is not executable; expected an executable file.",
                            where=where,
                            hint=f"chmod +x it, or run it through its interpreter (e.g. [\"{{python}}\", \"{program}\"]).")
    elif not _spec_checks.program_on_path(program, spec.env, str(spec.spec_dir), located) and \
            shutil.which(program) is None:
        raise SpecError(f"{name} names the program {program!r}, which is not on PATH; expected an installed "
                        "program.", where=where, hint="Install it, or give its absolute path.")

