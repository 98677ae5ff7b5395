"""Spec checks that no JSON Schema can express, each raising a one-paragraph SpecError at file:line:column.

They guard what clirace does with the values later: an argument the kernel cannot pass (a NUL, a lone
surrogate, a string over the kernel's 128 KiB per-argument limit), a duration that the schema's ECMA `$`
lets through with a trailing newline, a regex that is invalid in Python, leaves its group 1 unset or
backtracks without end, a program that the spec's own PATH does not hold, a file path that names a
directory or passes through a file.
"""
from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterable, Iterator
from typing import Any, NoReturn

from clirace.errors import SpecError
from clirace.spec import configfile, patterns, placeholders
from clirace.spec._yaml import KeyPath, Located
from clirace.spec.messages import dotted, show
from clirace.spec.placeholders import LAYOUT as _LAYOUT

MAX_STRING = 100_000  # bytes in one value; the kernel refuses an argument or variable of 128 KiB (E2BIG)
_DURATION = re.compile(r"[0-9]+(?:\.[0-9]+)?(?:ms|s)")
DURATIONS = (("tool", "timeout"), ("lock", "wait"), ("lock", "prompt"), ("lock", "hold", "ready", "delay"))
# Fields holding regexes, and whether their group 1 is the value read (it must then be set by every match).
_PATTERNS = {"value": True, "claimed": True, "stdout": False, "stderr": False}


def strings(located: Located) -> None:
    """Every string (keys too) can be passed to a program: no NUL, no lone surrogate, not absurdly long."""
    def check(text: str, path: KeyPath, where: str) -> None:
        if "\0" in text:
            raise SpecError(f"{dotted(path) or 'a key'} holds a NUL character (\\0); expected text without it: no "
                            "program can receive a NUL in an argument, a path or the environment.", where=where)
        bad = next((c for c in text if "\ud800" <= c <= "\udfff"), None)
        if bad is not None:
            raise SpecError(f"{dotted(path) or 'a key'} holds the lone surrogate \\u{ord(bad):04x}, which is not a "
                            "character; expected valid Unicode text.", where=where,
                            hint="A \\uD800-\\uDFFF escape in a double-quoted YAML string makes one.")
        size = len(text.encode())
        if size > MAX_STRING:
            raise SpecError(f"{dotted(path)} is {size:,} bytes long; expected at most {MAX_STRING:,} bytes: the "
                            "kernel refuses to start a program with an argument or environment variable over "
                            "128 KiB (E2BIG).", where=where,
                            hint="Have a setup command write large data to a file, and pass its path.")

    def walk(value: object, path: KeyPath) -> None:
        if isinstance(value, dict):
            for key, item in value.items():
                check(str(key), path + (key,), located.where_key(path + (key,)))
                walk(item, path + (key,))
        elif isinstance(value, list):
            for index, item in enumerate(value):
                walk(item, path + (index,))
        elif isinstance(value, str):
            check(value, path, located.where(path))
    walk(located.data, ())


def environment_size(data: dict[str, Any], located: Located) -> None:
    """The environment clirace passes (its own, plus tool.env) and the longest command line fit the kernel's
    ARG_MAX, with room for the sandbox's variables and the strace wrapper."""
    try:
        limit = os.sysconf("SC_ARG_MAX")
    except (ValueError, OSError):
        limit = 2 * 1024 * 1024
    inherited = sum(len(os.fsencode(k)) + len(os.fsencode(v)) + 2 for k, v in os.environ.items())
    env = data["tool"].get("env", {})
    added = sum(len(k.encode()) + len(v.encode()) + 2 for k, v in env.items())
    base = len(_argv_bytes(data["tool"]["command"]))
    longest = max((len(_argv_bytes(c)) for c in _commands(data)), default=0)
    total = inherited + added + base + longest + 64 * 1024
    if total > limit:
        biggest = max(env, key=lambda k: len(env[k]), default=None)
        where = located.where(("tool", "env", biggest)) if biggest else located.where(("tool", "command"))
        raise SpecError(f"the environment and the longest command line come to about {total:,} bytes; expected "
                        f"at most {limit:,} bytes (the kernel's ARG_MAX), or no program can be started (E2BIG).",
                        where=where, hint="Shorten tool.env, or have setup write large values to files.")


def _argv_bytes(command: object) -> bytes:
    items = command if isinstance(command, list) else [command]
    return b"\0".join(str(item).encode() for item in items)


def _commands(data: dict[str, Any]) -> Iterator[object]:
    def setup(commands: Iterable[object]) -> Iterator[object]:  # a command of its own is a mapping: {run: [...]} or {sh: "..."}
        return (next(iter(c.values()), "") if isinstance(c, dict) else c for c in commands)

    yield from setup(data.get("setup", []))
    for workload in data.get("workloads", []):
        for name in ("run", "read", "add", "list"):
            if name in workload:
                yield workload[name]
        yield from setup(workload.get("setup", []))
    lock = data.get("lock", {})
    for name in ("contender", "error_command"):
        if name in lock:
            yield lock[name]
    hold = lock.get("hold", {})
    for command in (hold.get("command"), hold.get("run"), hold.get("park", {}).get("command")):
        if command is not None:
            yield command


def durations(data: dict[str, Any], located: Located) -> None:
    """Each duration is exactly '<number>ms', '<number>s' or a number, and more than zero.

    Why here: the schema's pattern ends in '$', which Python's re also matches before a trailing newline
    ("1s\\n"), and it accepts "0ms".
    """
    for path in DURATIONS:
        value = _get(data, path)
        if value is None:
            continue
        if isinstance(value, str) and not _DURATION.fullmatch(value):
            raise SpecError(f"{dotted(path)} is {show(value)}; expected a duration greater than zero such as "
                            "250ms, 1.5s or 2 (seconds).", where=located.where(path))
        seconds = float(value[:-2]) / 1000 if isinstance(value, str) and value.endswith("ms") else \
            float(value[:-1]) if isinstance(value, str) else float(value)
        if seconds <= 0:
            raise SpecError(f"{dotted(path)} is {show(value)}; expected a duration greater than zero such as "
                            "250ms, 1.5s or 2 (seconds).", where=located.where(path),
                            hint="A zero deadline would judge every invocation late before it starts.")


def regexes(data: dict[str, Any], located: Located) -> None:
    """Every regex compiles in Python, sets its group 1 whenever it matches (where group 1 is the value),
    and finishes quickly on a long run of the characters it repeats."""
    found: list[tuple[KeyPath, str]] = [(("workloads", i, name), w[name]) for i, w in enumerate(data.get("workloads", []))
             for name in ("value", "claimed") if isinstance(w, dict) and isinstance(w.get(name), str)]
    ready = data.get("lock", {}).get("hold", {}).get("ready", {})
    found += [(("lock", "hold", "ready", name), ready[name]) for name in ("stdout", "stderr")
              if isinstance(ready.get(name), str)]
    for path, pattern in found:
        why = patterns.problem(pattern, needs_group1=_PATTERNS[str(path[-1])])
        if why:
            raise SpecError(f"{dotted(path)} {why}: found {show(pattern)}.", where=located.where(path))


def config_queries(data: dict[str, Any], located: Located) -> None:
    """A keys config names its key one way: `key` (a dotted path) or `query` (a JMESPath expression); a sqlite
    database (tables of rows, no dotted paths) only by `query`."""
    for index, workload in enumerate(data.get("workloads", [])):
        config = workload.get("config") if isinstance(workload, dict) else None
        at: KeyPath = ("workloads", index, "config")
        if isinstance(config, dict) and config.get("format") == "sqlite" and "query" not in config:
            raise SpecError(f"{dotted(at)} is a sqlite database without a query; expected query: a JMESPath "
                            "expression over its tables, each a list of rows, that finds {key}'s value, e.g. "
                            "\"settings[?name=='{key}'].value | [0]\".", where=located.where_key(at + ("format",)))
        if not isinstance(config, dict) or "query" not in config:
            continue
        if "key" in config:
            raise SpecError(f"{dotted(at)} gives both 'key' and 'query'; expected one: 'key', a dotted path such as "
                            "'settings.{key}', or 'query', a JMESPath expression.", where=located.where_key(at + ("query",)))
        why = configfile.query_problem(placeholders.expand(config["query"], {"key": "cliracek0"}))
        if why:
            raise SpecError(f"{dotted(at + ('query',))} is not a JMESPath expression ({why}): found "
                            f"{show(config['query'])}; expected one such as "
                            "\"clusters[?name=='{key}'].cluster.server | [0]\".", where=located.where(at + ("query",)))
        if "{key}" not in config["query"]:
            raise SpecError(f"{dotted(at + ('query',))} never uses {{key}}; expected the placeholder where the key "
                            "goes, so that each run's key is looked up.", where=located.where(at + ("query",)))


def program_on_path(program: str, env: dict[str, str], spec_dir: str, located: Located) -> bool:
    """Whether `program` (a bare name) is found on the PATH that tool.env sets; raises SpecError when it is not.
    False when tool.env sets no PATH, or one with sandbox placeholders (setup may install the program there):
    the caller then looks on clirace's own PATH.

    Why: the target runs with the spec's PATH, so a program that is on clirace's PATH only cannot start.
    """
    if "PATH" not in env:
        return False
    value = placeholders.expand(env["PATH"], {"spec_dir": spec_dir})
    if placeholders.names_in(value):
        return True
    if shutil.which(program, path=value) is None:
        raise SpecError(f"tool.command names the program {program!r}, which is not on the PATH that tool.env sets "
                        f"({value!r}), so the target cannot be found; expected a PATH that holds it.",
                        where=located.where(("tool", "env", "PATH")),
                        hint="Add the program's directory to tool.env.PATH, or give its absolute path.")
    return True


# ------------------------------------------------------------------------------------------------ paths

_SANDBOX_DIRS = {"/SANDBOX", "/SANDBOX/io"} | {f"/SANDBOX/{rel}" for rel in _LAYOUT.values()}
_IN_SANDBOX = {name: f"/SANDBOX/{rel}" for name, rel in _LAYOUT.items()} | {"sandbox": "/SANDBOX"}


def file_paths(data: dict[str, Any], located: Located, spec_dir: str) -> None:
    """A path where clirace expects a regular file (the keys config, the park FIFO, the take lock) names
    neither a directory nor a path through a file."""
    fields: list[tuple[KeyPath, object]] = [(("workloads", i, "config", "path"), w["config"].get("path"))
              for i, w in enumerate(data.get("workloads", [])) if isinstance(w.get("config"), dict)]
    hold = data.get("lock", {}).get("hold", {})
    fields += [(("lock", "hold", "park", "fifo"), hold.get("park", {}).get("fifo")),
               (("lock", "hold", "take", "path"), hold.get("take", {}).get("path"))]
    for path, value in fields:
        if not isinstance(value, str):
            continue
        where = located.where(path)
        first = re.match(r"\{(\w+)\}", value)
        if value.endswith(("/", "/.", "/..")) or value in (".", ".."):
            _directory(path, value, where)
        if first and first.group(1) in _IN_SANDBOX:
            shape = os.path.normpath(_IN_SANDBOX[first.group(1)] + placeholders.PATTERN.sub("x", value[first.end():]))
            if shape in _SANDBOX_DIRS:
                _directory(path, value, where)
            continue
        real = placeholders.expand(value, {"spec_dir": spec_dir})
        if placeholders.names_in(real) or not os.path.isabs(real):
            continue
        if os.path.isdir(real):
            _directory(path, value, where)
        parent = os.path.dirname(real)
        while parent != "/" and not os.path.lexists(parent):
            parent = os.path.dirname(parent)
        if parent != "/" and not os.path.isdir(parent):
            raise SpecError(f"{dotted(path)} is {value!r}, which passes through {parent!r}, a file, not a "
                            "directory; expected a path whose parent directories are directories.", where=where)


def _directory(path: KeyPath, value: str, where: str) -> NoReturn:
    raise SpecError(f"{dotted(path)} is {value!r}, which names a directory; expected the path of a file.",
                    where=where, hint="Name the file itself, e.g. '{config_home}/tool/config.json'.")


def _get(data: Any, path: Iterable[str | int]) -> Any:
    for part in path:
        if not isinstance(data, dict) or part not in data:
            return None
        data = data[part]
    return data
