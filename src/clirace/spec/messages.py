"""The spec problems that take more than a line to explain, as one-paragraph SpecErrors: JSON Schema errors
(`schema_error`) and paths that would leave the trial's sandbox (`check_sandbox`).

Each message says where (file:line:column), what was found, what was expected and, where it can, the nearest
valid name ("did you mean"). jsonschema reports many errors for one mistake (a misspelt key is also a missing
required key); `schema_error` picks the one that names the user's own words.
"""
from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Sequence
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from clirace.errors import SpecError
from clirace.errors import did_you_mean as did_you_mean  # re-exported: the spec's messages and loader use it
from clirace.spec import placeholders
from clirace.spec._yaml import KeyPath, Located
from clirace.spec.placeholders import LAYOUT as _LAYOUT

if TYPE_CHECKING:
    from jsonschema.exceptions import ValidationError

Schema = dict[str, Any]  # a JSON Schema node, as json.loads gives it

TYPE_NAMES = {"object": "a mapping", "array": "a list", "string": "a string", "integer": "a whole number",
              "number": "a number", "boolean": "true or false", "null": "nothing"}
HOLD_WAYS = ("command", "run", "park", "take")

# Lower ranks first: an unknown key usually explains the "missing" key next to it, a wrong type explains the rest.
_RANK = {"additionalProperties": 0, "type": 1, "enum": 2, "const": 2, "format": 3, "pattern": 3, "oneOf": 3,
         "anyOf": 3, "minimum": 4, "maximum": 4, "exclusiveMinimum": 4, "minItems": 4, "minLength": 4,
         "minProperties": 4, "maxProperties": 4, "required": 5}


def dotted(path: Iterable[str | int]) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def show(value: object) -> str:
    """'the string 'x'', 'the number 3', 'a mapping {...}': what was found, briefly."""
    if value is None:
        return "empty (null)"
    if isinstance(value, bool):
        return f"the boolean {str(value).lower()}"
    if isinstance(value, str):
        text = f"'{value}'" if value.isprintable() and "'" not in value else repr(value)
        kind = "the string"
    else:
        text = json.dumps(value, default=str)
        kind = _KINDS.get(type(value), "the number")
    return f"{kind} {text[:60]}{'…' if len(text) > 60 else ''}"


_KINDS: dict[type, str] = {dict: "a mapping", list: "a list"}


def schema_error(errors: Iterable[ValidationError], located: Located, schema: Schema) -> SpecError:
    """The most useful of `errors` (jsonschema ValidationErrors for one document), as a SpecError."""
    def rank(error: ValidationError) -> tuple[int, int, tuple[int, int]]:
        return (_RANK.get(error.validator, 6), -len(error.absolute_path), _position(located, error.absolute_path))
    return _translate(min(errors, key=rank), located, schema)


def _position(located: Located, path: Sequence[str | int]) -> tuple[int, int]:
    parts = located.where(path).rsplit(":", 2)
    try:
        return int(parts[-2]), int(parts[-1])
    except (ValueError, IndexError):
        return 0, 0


def _where(located: Located, path: KeyPath, value: object) -> str:
    # A mapping or list value starts on the line below its key; the key is where the reader looks.
    return located.where_key(path) if isinstance(value, (dict, list)) else located.where(path)


def _translate(error: ValidationError, located: Located, schema: Schema) -> SpecError:
    path: KeyPath = tuple(error.absolute_path)
    name = dotted(path)
    value = error.instance
    where = _where(located, path, value)
    sub = error.schema if isinstance(error.schema, dict) else {}
    hint = sub.get("description") or None
    v = error.validator

    if v == "additionalProperties":
        return _unknown_key(path, value, sub, located, schema)
    if v == "required":
        missing = next((m for m in re.findall(r"'([^']+)' is a required property", error.message)), error.message)
        owner = "the spec" if not path else name + _kind_note(path, value)
        described = sub.get("properties", {}).get(missing, {}).get("description")
        return SpecError(f"{owner} has no '{missing}'; expected the key '{missing}'"
                         f"{' at the top level' if not path else ''}, which is required.", where=where,
                         hint=f"{missing}: {described}" if described else None)
    if v == "type":
        expected = _expected_type(error.validator_value, sub)
        if isinstance(value, dict) and "array" in error.validator_value:
            hint = "Start each item of a list with '- '."
        return SpecError(f"{name} is {show(value)}; expected {expected}.", where=where, hint=hint)
    if v == "const" and path == ("version",):
        return SpecError(f"version is {show(value)}; this clirace reads spec version {error.validator_value} only, "
                         f"expected 'version: {error.validator_value}'.", where=where)
    if v in ("enum", "const"):
        options = error.validator_value if v == "enum" else [error.validator_value]
        guess = did_you_mean(value, options) if isinstance(value, str) else None
        return SpecError(f"{name} is {show(value)}; expected {'one of ' if len(options) > 1 else ''}"
                         f"{', '.join(map(str, options))}{f'; did you mean {guess}?' if guess else '.'}",
                         where=where, hint=hint)
    if v in ("minimum", "maximum", "exclusiveMinimum"):
        return SpecError(f"{name} is {show(value)}; expected {_expected_type(sub.get('type', 'number'), sub)}.",
                         where=where, hint=hint)
    if v == "oneOf" and path and path[-1] == "hold" and isinstance(value, dict):
        return _hold_ways(path, value, located)
    if v == "oneOf" and "duration" in (hint or "").lower():
        return _duration(name, value, where)
    if v == "oneOf" and "command" in (hint or "").lower():
        return _command(error, name, value, where, located)
    if v == "anyOf" and isinstance(value, dict) and value.get("kind") == "keys":
        return SpecError(f"{name} (a keys workload) has neither 'read' nor 'config'; expected one of them: 'read', a "
                         "command printing {key}'s value, or 'config', the file to read it from.", where=where)
    if v == "format":
        return _regex(name, value, where)
    if v in ("minItems", "minLength", "minProperties"):
        return SpecError(f"{name} is empty; expected {_expected_type(sub.get('type', 'string'), sub)} with "
                         f"{'at least one item' if v == 'minItems' else 'something in it'}.", where=where, hint=hint)
    if v == "maxProperties" and isinstance(value, dict):
        return SpecError(f"{name} gives {len(value)} entries ({', '.join(value)}); expected exactly one.", where=where,
                         hint=hint)
    if v == "pattern" and "propertyNames" in error.schema_path:
        return SpecError(f"{name} has the key '{value}'; expected an environment variable name (letters, digits "
                         "and _, not starting with a digit).", where=located.where_key(path + (value,)))
    if v == "pattern" and path and path[-1] == "env":
        return SpecError(f"{name} is {show(value)}; expected an environment variable name (letters, digits and _, "
                         "not starting with a digit).", where=where)
    return SpecError(f"{name or 'the spec'}: {error.message}.", where=where, hint=hint)


def _kind_note(path: KeyPath, value: object) -> str:
    if len(path) == 2 and path[0] == "workloads" and isinstance(value, dict) and isinstance(value.get("kind"), str):
        kind = value["kind"]
        return f" ({'an' if kind[:1] in 'aeiou' else 'a'} {kind} workload)"
    return ""


def _expected_type(types: str | Iterable[str], sub: Schema) -> str:
    names = [types] if isinstance(types, str) else list(types)
    text = " or ".join(TYPE_NAMES.get(t, t) for t in names)
    low, high = sub.get("minimum"), sub.get("maximum")
    if low is not None and high is not None:
        text += f" from {low} to {high}"
    elif low is not None:
        text += f" of at least {low}"
    elif sub.get("exclusiveMinimum") is not None:
        text += f" greater than {sub['exclusiveMinimum']}"
    return text


def _unknown_key(path: KeyPath, value: object, sub: Schema, located: Located, schema: Schema) -> SpecError:
    allowed = list(sub.get("properties", {}))
    unexpected = [k for k in value if k not in allowed] if isinstance(value, dict) else []
    key = unexpected[0] if unexpected else "?"
    place = f"in {dotted(path)}" if path else "at the top level"
    where = located.where_key(path + (key,))
    guess = did_you_mean(key, allowed)
    if guess:
        return SpecError(f"unknown key '{key}' {place}; did you mean {guess}?", where=where,
                         hint=f"Keys allowed {place}: {', '.join(allowed)}.")
    homes = [home for home in _key_homes(json.dumps(schema, sort_keys=True)).get(key, ()) if home != dotted(path)]
    if homes:
        return SpecError(f"unknown key '{key}' {place}; '{key}' belongs in {' or '.join(homes)}.", where=where,
                         hint=f"Keys allowed {place}: {', '.join(allowed)}.")
    return SpecError(f"unknown key '{key}' {place}; expected one of {', '.join(allowed)}.", where=where)


@lru_cache(maxsize=2)
def _key_homes(schema_json: str) -> dict[str, list[str]]:
    """Every key the schema knows, with the places it may appear ('the top level', 'tool', 'workloads[]')."""
    schema: Schema = json.loads(schema_json)
    homes: dict[str, list[str]] = {}

    def resolve(node: object) -> object:
        ref = node.get("$ref", "") if isinstance(node, dict) else ""
        return schema["$defs"][ref.rsplit("/", 1)[1]] if ref.startswith("#/$defs/") else node

    def walk(given: object, place: str, seen: frozenset[int]) -> None:
        node = resolve(given)
        if not isinstance(node, dict) or id(node) in seen:
            return
        seen = seen | {id(node)}
        for key, child in node.get("properties", {}).items():
            where = place or "the top level"
            if where not in homes.setdefault(key, []):
                homes[key].append(where)
            walk(child, f"{place}.{key}" if place else key, seen)
        if isinstance(node.get("items"), dict):
            walk(node["items"], f"{place}[]", seen)
        for combinator in ("allOf", "oneOf", "anyOf"):
            for part in node.get(combinator, []):
                walk(part, place, seen)
        if isinstance(node.get("then"), dict):
            walk(node["then"], place, seen)
    walk(schema, "", frozenset())
    return homes


def _hold_ways(path: KeyPath, value: dict[str, Any], located: Located) -> SpecError:
    given = [way for way in HOLD_WAYS if way in value]
    expected = ("expected exactly one: command (a test hook that holds the lock), run (a helper program, not the "
                "tool, that holds it), park (a real invocation parked on a FIFO) or take (clirace takes the lock itself)")
    if not given:
        return SpecError(f"{dotted(path)} gives no way to keep the lock busy; {expected}.",
                         where=located.where_key(path))
    return SpecError(f"{dotted(path)} gives {len(given)} ways to keep the lock busy ({' and '.join(given)}); "
                     f"{expected}.", where=located.where_key(path + (given[1],)))


_WORDS = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*(ms|msecs?|milliseconds?|s|secs?|seconds?|m|mins?|minutes?|h|hours?)\s*$",
                    re.IGNORECASE)


def _duration(name: str, value: object, where: str) -> SpecError:
    suggestion = ""
    match = _WORDS.match(value) if isinstance(value, str) else None
    if match:
        number, unit = float(match.group(1)), match.group(2).lower()
        factor = 0.001 if unit.startswith("m") and unit not in ("m", "min", "mins", "minute", "minutes") else \
            60 if unit.startswith("m") else 3600 if unit.startswith("h") else 1
        seconds = number * factor
        suggestion = f"; did you mean '{round(seconds * 1000):d}ms'?" if seconds < 1 else f"; did you mean '{seconds:g}s'?"
    return SpecError(f"{name} is {show(value)}; expected a duration greater than zero such as 250ms, 1.5s or 2 "
                     f"(seconds){suggestion or '.'}", where=where)


SETUP_WAYS = ("run", "sh")


def _command(error: ValidationError, name: str, value: object, where: str, located: Located) -> SpecError:
    expected = "a command: a list of arguments, or one string split like a shell would"
    path: KeyPath = tuple(error.absolute_path)
    if "setup" in path[-2:-1]:  # a setup command may also be a command of its own
        if isinstance(value, dict):
            return _setup_mapping(path, value, located)
        expected += ", or a mapping with run or sh"
    if isinstance(value, list):
        if not value:
            return SpecError(f"{name} is an empty list; expected {expected}, starting with the program.", where=where)
        for index, item in enumerate(value):
            if not isinstance(item, (str, int, float)) or isinstance(item, bool):
                path = tuple(error.absolute_path) + (index,)
                return SpecError(f"{name}[{index}] is {show(item)}; expected a string (one argument).",
                                 where=_where(located, path, item), hint="Quote arguments that YAML reads as something else.")
    if value == "":
        return SpecError(f"{name} is an empty string; expected {expected}.", where=where)
    return SpecError(f"{name} is {show(value)}; expected {expected}.", where=where)


def _setup_mapping(path: KeyPath, value: dict[str, Any], located: Located) -> SpecError:
    """A setup command given as a mapping that is neither {run: COMMAND} nor {sh: SCRIPT}."""
    name = dotted(path)
    ways = ("expected exactly one of run (a program and its arguments, run as they are, not appended to "
            "tool.command) or sh (a script for /bin/sh)")
    given = [way for way in SETUP_WAYS if way in value]
    other = next((key for key in value if key not in SETUP_WAYS), None)
    if other is not None:
        guess = did_you_mean(other, SETUP_WAYS)
        return SpecError(f"unknown key '{other}' in {name}; " + (f"did you mean {guess}?" if guess else f"{ways}."),
                         where=located.where_key(path + (other,)), hint=None if not guess else ways[0].upper() + ways[1:] + ".")
    if len(given) != 1:
        return SpecError(f"{name} gives {' and '.join(given) or 'nothing'}; {ways}.", where=located.where_key(path))
    way = given[0]
    found = value[way]
    if way == "sh":
        return SpecError(f"{name}.sh is {show(found)}; expected a shell script, as a string with something in it.",
                         where=located.where(path + ("sh",)))
    return SpecError(f"{name}.run is {show(found)}; expected a command: a list of arguments (the program first), or "
                     "one string split like a shell would.", where=located.where(path + ("run",)))


def _regex(name: str, value: object, where: str) -> SpecError:
    why = "not a string"
    if isinstance(value, str):
        try:
            re.compile(value)
            why = "invalid"
        except re.error as exc:
            why = str(exc)
    return SpecError(f"{name} is not a valid regular expression ({why}): found {show(value)}; expected a Python "
                     "regex such as '^claimed (\\S+)$'.", where=where)


# ---------------------------------------------------------------------------------------------- sandbox

# Placeholders that name directories inside the trial's sandbox (spec_dir and python are real paths).
_IN_SANDBOX = {name: f"/SANDBOX/{rel}" for name, rel in _LAYOUT.items()} | {"sandbox": "/SANDBOX"}
_SANDBOX_ENV = re.compile(r"HOME|TMPDIR|TMP|TEMP|TEMPDIR|XDG_[A-Z_]+")
_SUGGEST = {"HOME": "{home}", "TMPDIR": "{tmp}", "TMP": "{tmp}", "TEMP": "{tmp}", "TEMPDIR": "{tmp}",
            "XDG_CONFIG_HOME": "{config_home}", "XDG_CACHE_HOME": "{cache_home}", "XDG_STATE_HOME": "{state_home}",
            "XDG_DATA_HOME": "{data_home}",
            "XDG_RUNTIME_DIR": "{runtime_dir}", "cwd": "{sandbox}", "temp_dirs": "{tmp}"}


def check_sandbox(data: dict[str, Any], located: Located) -> None:
    """Refuse paths that make the target (or clirace, for park.fifo and take.path) touch real files.

    Fields holding paths (tool.cwd, keys config.path, lock.hold.park.fifo, lock.hold.take.path,
    session.temp_dirs) must stay inside the sandbox: a literal path never does (an absolute one is a real
    file, a relative one resolves against wherever clirace was started), nor one that climbs out with '..'.
    tool.env values may not be the root directory, nor lie in the real home, /tmp or /var/tmp; HOME, TMPDIR
    and XDG_* must point inside the sandbox. In the path fields {spec_dir}/... is refused too: it is the user's
    own directory, and clirace replaces a park FIFO's file, takes a lock file, the target writes its config
    there. Only literal strings and sandbox placeholders are judged, nothing is expanded.
    """
    tool = data["tool"]
    fields: list[tuple[KeyPath, object]] = [(("tool", "cwd"), tool.get("cwd"))]
    fields += [(("workloads", i, "config", "path"), w["config"]["path"])
               for i, w in enumerate(data.get("workloads", [])) if "config" in w]
    hold = data.get("lock", {}).get("hold", {})
    fields += [(("lock", "hold", "park", "fifo"), hold.get("park", {}).get("fifo")),
               (("lock", "hold", "take", "path"), hold.get("take", {}).get("path"))]
    fields += [(("session", "temp_dirs", i), d) for i, d in enumerate(data.get("session", {}).get("temp_dirs", []))]
    for path, value in fields:
        if isinstance(value, str) and (why := _outside(value, strict=True)):
            _refuse(path, value, why, _SUGGEST.get(str(path[1]), "{sandbox}/" + Path(value).name), located)
    for name, value in tool.get("env", {}).items():
        why = _outside(value, strict=bool(_SANDBOX_ENV.fullmatch(name)))
        if why:
            _refuse(("tool", "env", name), value, why, _SUGGEST.get(name, "{sandbox}/..."), located)


def _outside(value: str, strict: bool) -> str | None:
    """Why `value` lands outside the trial's sandbox, or None.

    strict: any literal path is outside; otherwise only the real home, /tmp, /var/tmp and / count.
    """
    first = re.match(r"\{(\w+)\}", value)
    if first and first.group(1) in _IN_SANDBOX:
        shape = os.path.normpath(_IN_SANDBOX[first.group(1)] + placeholders.PATTERN.sub("x", value[first.end():]))
        return None if shape == "/SANDBOX" or shape.startswith("/SANDBOX/") else "which climbs out of the sandbox with '..'"
    if strict and value.startswith("{spec_dir}"):
        return "which is in the spec's own directory, outside the sandbox"
    if placeholders.names_in(value):
        return "which is not inside the sandbox" if strict else None
    if os.path.isabs(value):
        area = _real_area(value)
        if area or strict:
            return f"which is {area or 'a real path'}, outside the sandbox"
        return None
    return "a relative path, which resolves against the directory clirace is started from, outside the sandbox" \
        if strict else None


def _real_area(value: str) -> str | None:
    home = os.path.expanduser("~")
    areas = [(home, f"in the real home directory ({home})"), ("/tmp", "in the real /tmp"), ("/var/tmp", "in the real /var/tmp")]
    for candidate in {os.path.normpath(value), os.path.realpath(value)}:
        if candidate == "/":
            return "the root directory"
        for root, label in areas:
            for form in {os.path.normpath(root), os.path.realpath(root)}:
                if form != "/" and (candidate == form or candidate.startswith(form + "/")):
                    return label
    return None


def _refuse(path: KeyPath, value: str, why: str, suggestion: str, located: Located) -> None:
    raise SpecError(f"{dotted(path)} is {value!r}, {why}: the target would touch real files instead of a fresh "
                    f"sandbox; expected a path inside the sandbox, such as '{suggestion}'. If that is really meant, "
                    "pass --allow-outside-sandbox.", where=located.where(path))
