"""Stage 1, spec: read a YAML spec, validate it against spec_schema.json, and return a `Spec`.

Every problem is a `SpecError` naming file:line:column, the offending value, what was expected and, for
misspelt keys and placeholders, the nearest valid name.
"""
from __future__ import annotations

import difflib
import json
import re
import shlex
import shutil
import sys
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path

import jsonschema

from . import placeholders
from ._yaml import Located, load_located
from .errors import SpecError

Argv = tuple[str, ...]

DEFAULT_TIMEOUT = 10.0
DEFAULT_PARALLEL = 8
DEFAULT_ROUNDS = 3
DEFAULT_WAIT = 1.0
DEFAULT_PROMPT = 5.0
MAX_DURATION = 600.0


@dataclass(frozen=True)
class ConfigFile:
    path: str
    format: str
    key: str = "{key}"


@dataclass(frozen=True)
class Workload:
    kind: str
    name: str
    run: Argv
    setup: tuple[Argv, ...] = ()
    read: Argv | None = None
    start: int | None = None
    config: ConfigFile | None = None
    add: Argv | None = None
    claimed: str | None = None
    list: Argv | None = None


@dataclass(frozen=True)
class Hold:
    """How clirace keeps the lock busy: 'command' (test hook), 'park' (FIFO) or 'take' (clirace locks)."""
    how: str
    command: Argv | None = None
    ready: tuple[str, object] | None = None  # ("file"|"stdout"|"stderr"|"delay", value)
    fifo: str | None = None
    content: str | None = None
    invalid_content: str | None = None
    path: str | None = None
    kind: str | None = None


@dataclass(frozen=True)
class Lock:
    contender: Argv
    hold: Hold
    error_command: Argv | None = None
    wait_option: Argv | None = None
    wait: float = DEFAULT_WAIT
    prompt: float = DEFAULT_PROMPT


@dataclass(frozen=True)
class Session:
    flag: Argv | None = None
    env: str | None = None
    run: Argv | None = None
    temp_dirs: tuple[str, ...] = ("{tmp}", "{runtime_dir}")


@dataclass(frozen=True)
class Spec:
    path: Path
    command: Argv
    env: dict[str, str] = field(default_factory=dict)
    cwd: str = "{sandbox}"
    timeout: float = DEFAULT_TIMEOUT
    setup: tuple[Argv, ...] = ()
    parallel: int = DEFAULT_PARALLEL
    rounds: int = DEFAULT_ROUNDS
    workloads: tuple[Workload, ...] = ()
    lock: Lock | None = None
    session: Session | None = None
    raw: dict = field(default_factory=dict, compare=False, repr=False)

    @property
    def spec_dir(self) -> Path:
        return self.path.parent

    def workload(self, kind: str) -> Workload | None:
        return next((w for w in self.workloads if w.kind == kind), None)


@lru_cache(maxsize=1)
def schema() -> dict:
    return json.loads(resources.files("clirace").joinpath("spec_schema.json").read_text())


def load_spec(path: str | Path) -> Spec:
    path = Path(path).absolute()
    located = load_located(path)
    data = located.data
    if not isinstance(data, dict):
        kind = "a list" if isinstance(data, list) else f"a single value ({data!r})"[:80]
        raise SpecError(f"the spec is {kind}; expected a mapping with keys 'version' and 'tool'.",
                        where=located.where(()), hint="See the example spec in the README.")
    _validate_schema(located)
    _validate_placeholders(located)
    spec = _build(path, data)
    _validate_semantics(spec, located)
    return spec


# ---------------------------------------------------------------------------------------------- schema

def _validate_schema(located: Located) -> None:
    validator = jsonschema.Draft202012Validator(schema(), format_checker=jsonschema.FormatChecker())
    errors = list(validator.iter_errors(located.data))
    if not errors:
        return
    error = jsonschema.exceptions.best_match(errors, key=_error_rank)
    raise _spec_error_from_schema(error, located)


def _error_rank(error):
    # Prefer errors deep in the document and about the user's own words (unknown keys, types) over
    # combinator summaries such as "is not valid under any of the given schemas".
    vague = error.validator in ("oneOf", "anyOf", "allOf", "if", "then", "not")
    return (-len(error.absolute_path), vague)


def _spec_error_from_schema(error, located: Located) -> SpecError:
    path = tuple(error.absolute_path)
    dotted = _dotted(path) or "the top level"
    value = error.instance
    where = located.where(path)
    if error.validator == "additionalProperties":
        allowed = sorted(error.schema.get("properties", {}))
        unexpected = sorted(set(value) - set(allowed)) if isinstance(value, dict) else []
        key = unexpected[0] if unexpected else "?"
        guess = difflib.get_close_matches(key, allowed, n=1)
        hint = f"Did you mean '{guess[0]}'?" if guess else f"Valid keys here: {', '.join(allowed)}."
        return SpecError(f"unknown key '{key}' in {dotted}.", where=located.where_key(path + (key,)), hint=hint)
    if error.validator == "required":
        missing = re.findall(r"'([^']+)' is a required property", error.message)
        name = missing[0] if missing else error.message
        return SpecError(f"{dotted} is missing the required key '{name}'.", where=where,
                         hint=_describe(error.schema.get("properties", {}).get(name, {})))
    if error.validator == "type" or (error.validator == "oneOf" and "command" in str(error.schema.get("description", ""))):
        expected = error.schema.get("description") or f"a value of type {error.validator_value}"
        return SpecError(f"{dotted} is {_show(value)}; expected {expected[0].lower() + expected[1:]}",
                         where=where)
    if error.validator in ("enum", "const"):
        options = error.validator_value if error.validator == "enum" else [error.validator_value]
        guess = difflib.get_close_matches(str(value), [str(o) for o in options], n=1)
        hint = f"Did you mean '{guess[0]}'?" if guess else ""
        return SpecError(f"{dotted} is {_show(value)}; expected one of {', '.join(map(repr, options))}.",
                         where=where, hint=hint)
    if error.validator in ("minimum", "maximum", "exclusiveMinimum", "minItems", "minLength", "minProperties",
                           "maxProperties"):
        return SpecError(f"{dotted} is {_show(value)}: {error.message}.", where=where,
                         hint=_describe(error.schema))
    if error.validator == "oneOf" and path and path[-1] == "hold":
        return SpecError("lock.hold must say exactly one way to keep the lock busy: 'command', 'park' or 'take'.",
                         where=where)
    if error.validator in ("oneOf", "pattern") and "duration" in str(error.schema.get("description", "")).lower():
        return SpecError(f"{dotted} is {_show(value)}; expected a duration such as 250ms, 1.5s or 2.", where=where)
    if error.validator == "anyOf" and path and isinstance(value, dict) and value.get("kind") == "keys":
        return SpecError(f"{dotted} (a keys workload) needs 'read' (a command printing {{key}}'s value) or "
                         "'config' (the file to read it from).", where=where)
    if error.validator == "format":
        return SpecError(f"{dotted} is not a valid regular expression: {_show(value)}.", where=where)
    return SpecError(f"{dotted}: {error.message}.", where=where, hint=_describe(error.schema))


def _describe(subschema: dict) -> str:
    text = subschema.get("description", "") if isinstance(subschema, dict) else ""
    return text


def _show(value) -> str:
    text = json.dumps(value) if not isinstance(value, str) else repr(value)
    kind = {dict: "a mapping", list: "a list", str: "the string", bool: "the boolean", int: "the number",
            float: "the number", type(None): "empty (null)"}.get(type(value), "the value")
    if value is None:
        return kind
    return f"{kind} {text[:60]}{'…' if len(text) > 60 else ''}"


def _dotted(path) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


# ---------------------------------------------------------------------------------------- placeholders

def _allowed_names(path: tuple) -> frozenset[str] | None:
    """Which placeholders a string at `path` may use; None for strings that are not templates."""
    base = placeholders.SANDBOX
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
        }.get(field_name)
        return None if extra is None else base | frozenset(extra)
    if head == "lock":
        sub = path[1]
        if sub == "hold":
            return base | {"ready_file", "release_file", "hold_seconds", "pid", "now"}
        if sub == "wait_option":
            return base | {"timeout_ms", "timeout_s"}
        if sub in ("contender", "error_command"):
            return base
        return None
    if head == "session":
        if path[1] == "flag":
            return frozenset({"session_id"})
        if path[1] == "run":
            return base | placeholders.PER_INVOCATION | {"input", "output"}
        if path[1] == "temp_dirs":
            return base
    return None


def _validate_placeholders(located: Located) -> None:
    def walk(value, path):
        if isinstance(value, dict):
            for k, v in value.items():
                walk(v, path + (k,))
        elif isinstance(value, list):
            for i, v in enumerate(value):
                walk(v, path + (i,))
        elif isinstance(value, str):
            allowed = _allowed_names(path)
            if allowed is None:
                return
            for name in placeholders.names_in(value):
                if name not in allowed:
                    guess = difflib.get_close_matches(name, sorted(allowed), n=1)
                    hint = (f"Did you mean '{{{guess[0]}}}'? " if guess else "") + \
                        f"Placeholders allowed here: {', '.join('{' + a + '}' for a in sorted(allowed))}."
                    raise SpecError(f"unknown placeholder '{{{name}}}' in {_dotted(path)}.",
                                    where=located.where(path), hint=hint)
    walk(located.data, ())


# --------------------------------------------------------------------------------------------- building

def duration(value) -> float:
    if isinstance(value, (int, float)):
        return float(value)
    if value.endswith("ms"):
        return float(value[:-2]) / 1000
    return float(value[:-1])


def _argv(value) -> Argv:
    if isinstance(value, str):
        return tuple(shlex.split(value))
    return tuple(str(v) for v in value)


def _build(path: Path, data: dict) -> Spec:
    tool = data["tool"]
    workloads = []
    for index, w in enumerate(data.get("workloads", [])):
        config = w.get("config")
        workloads.append(Workload(
            kind=w["kind"], name=w.get("name", f"{w['kind']}#{index}"), run=_argv(w["run"]),
            setup=tuple(_argv(c) for c in w.get("setup", [])),
            read=_argv(w["read"]) if "read" in w else None,
            start=w.get("start"),
            config=ConfigFile(config["path"], config["format"], config.get("key", "{key}")) if config else None,
            add=_argv(w["add"]) if "add" in w else None,
            claimed=w.get("claimed"),
            list=_argv(w["list"]) if "list" in w else None,
        ))
    lock = None
    if "lock" in data:
        raw = data["lock"]
        h = raw["hold"]
        if "command" in h:
            ready = next(iter(h.get("ready", {"delay": 0.3}).items()))
            if ready[0] == "delay":
                ready = ("delay", duration(ready[1]))
            hold = Hold("command", command=_argv(h["command"]), ready=ready)
        elif "park" in h:
            p = h["park"]
            hold = Hold("park", command=_argv(p["command"]), fifo=p["fifo"], content=p.get("content"),
                        invalid_content=p.get("invalid_content"))
        else:
            t = h["take"]
            hold = Hold("take", path=t["path"], kind=t["kind"], content=t.get("content", "{pid}"))
        lock = Lock(contender=_argv(raw["contender"]), hold=hold,
                    error_command=_argv(raw["error_command"]) if "error_command" in raw else None,
                    wait_option=_argv(raw["wait_option"]) if "wait_option" in raw else None,
                    wait=duration(raw.get("wait", DEFAULT_WAIT)), prompt=duration(raw.get("prompt", DEFAULT_PROMPT)))
    session = None
    if "session" in data:
        s = data["session"]
        session = Session(flag=_argv(s["flag"]) if "flag" in s else None, env=s.get("env"),
                          run=_argv(s["run"]) if "run" in s else None,
                          temp_dirs=tuple(s.get("temp_dirs", Session.temp_dirs)))
    return Spec(
        path=path, command=_argv(tool["command"]), env=dict(tool.get("env", {})), cwd=tool.get("cwd", "{sandbox}"),
        timeout=duration(tool.get("timeout", DEFAULT_TIMEOUT)),
        setup=tuple(_argv(c) for c in data.get("setup", [])),
        parallel=data.get("parallel", DEFAULT_PARALLEL), rounds=data.get("rounds", DEFAULT_ROUNDS),
        workloads=tuple(workloads), lock=lock, session=session, raw=data,
    )


def _validate_semantics(spec: Spec, located: Located) -> None:
    for key, value in (("tool.timeout", spec.timeout), ("lock.wait", spec.lock and spec.lock.wait),
                       ("lock.prompt", spec.lock and spec.lock.prompt)):
        if value and value > MAX_DURATION:
            path = tuple(key.split("."))
            raise SpecError(f"{key} is {value:g}s; at most {MAX_DURATION:g}s is allowed.", where=located.where(path),
                            hint="clirace waits this long for a stuck target; keep it to seconds.")
    program = placeholders.expand(spec.command[0], {"spec_dir": spec.spec_dir, "python": sys.executable})
    if placeholders.names_in(program):
        raise SpecError(f"tool.command starts with {spec.command[0]!r}, which depends on the sandbox; the program "
                        "itself must be a fixed path or a name on PATH.", where=located.where(("tool", "command")))
    if "/" in program:
        resolved = Path(program) if Path(program).is_absolute() else spec.spec_dir / program
        if not resolved.exists():
            raise SpecError(f"tool.command names the program {program!r}, which does not exist.",
                            where=located.where(("tool", "command")),
                            hint="Relative paths are resolved against the spec's directory; {spec_dir} names it.")
        if not resolved.is_file() or not _executable(resolved):
            raise SpecError(f"tool.command names {program!r}, which is not an executable file.",
                            where=located.where(("tool", "command")),
                            hint=f"chmod +x it, or run it through its interpreter (e.g. [\"{{python}}\", \"{program}\"]).")
    elif shutil.which(program) is None:
        raise SpecError(f"tool.command names the program {program!r}, which is not on PATH.",
                        where=located.where(("tool", "command")),
                        hint="Install it, or give its absolute path.")
    if spec.session and spec.session.run is None and spec.workload("output") is None:
        raise SpecError("session needs 'run' (the command whose temp files are watched), since the spec has no "
                        "output workload to borrow it from.", where=located.where(("session",)))
    if spec.session and spec.session.flag and not any("{session_id}" in a for a in spec.session.flag):
        raise SpecError("session.flag never uses {session_id}.", where=located.where(("session", "flag")),
                        hint='Write it like ["--session-id", "{session_id}"].')
    if spec.lock and spec.lock.wait_option and not any(
            "{timeout_ms}" in a or "{timeout_s}" in a for a in spec.lock.wait_option):
        raise SpecError("lock.wait_option never uses {timeout_ms} or {timeout_s}.",
                        where=located.where(("lock", "wait_option")), hint='Write it like ["--lock-timeout", "{timeout_ms}"].')
    if spec.lock and spec.lock.hold.how == "command":
        argv = " ".join(spec.lock.hold.command)
        if not any(p in argv for p in ("{release_file}", "{hold_seconds}")):
            raise SpecError("lock.hold.command must use {release_file} (clirace creates it to let the holder "
                            "finish) or {hold_seconds} (how long to hold).", where=located.where(("lock", "hold", "command")))


def _executable(path: Path) -> bool:
    import os
    return os.access(path, os.X_OK)
