"""Parsing config files that a target wrote, in the formats a spec may declare, and looking a key up in them.
A SQLite database comes as clirace recorded it (its tables as JSON, scenarios/_sqlite.py).

What a target wrote is untrusted: parsing is bounded in size (MAX_BYTES), nesting and, for YAML, alias
expansion. A file beyond those bounds raises `TooLarge`, which is not evidence of a torn write: a check must
report it as "could not decide", never as corruption. A failure the format's own reader reports is `Unparseable`
(torn or invalid); any other exception in clirace's readers is `ReaderFailed`: a bug in clirace, which says
nothing about the file, so it is never reported as a torn config (CR601, CR602, CR113).
"""
from __future__ import annotations

import configparser
import json
from typing import Any

import yaml

# raised here; the last three re-exported for the tests that import them from here
from clirace.errors import OverBudget
from clirace.errors import ReaderFailed as ReaderFailed
from clirace.errors import TooLarge as TooLarge
from clirace.errors import Unparseable as Unparseable
from clirace.spec._yaml import load_budgeted

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

# What a reader gives: JSON-like values (dict, list, str, int, float, bool, None) that the target chose. Any, not
# object: every caller walks it with isinstance checks of its own, and a value may be any of them.
Parsed = Any

MAX_BYTES = 1 << 20  # a config a tool rewrites on every call; beyond this clirace does not judge it
MAX_NODES = 100_000  # YAML values once aliases are expanded
MAX_DEPTH = 100  # nesting of YAML lists and mappings (JSON and TOML: as deep as their readers recurse)
MAX_DIGITS = 4000  # an integer longer than this stays a string (int() refuses 4,300+ digits)


def parse(text: str | bytes, fmt: str) -> Parsed:
    """Parse `text` as `fmt`; raise TooLarge past the bounds, Unparseable with the parser's reason otherwise.
    An empty file is unparseable. Bytes are decoded as UTF-8 (invalid UTF-8 is unparseable)."""
    size = len(text) if isinstance(text, bytes) else len(text.encode("utf-8", "surrogatepass"))
    if size > MAX_BYTES:
        raise TooLarge(f"the file is {size:,} bytes, more than the {MAX_BYTES:,} clirace judges")
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise Unparseable(f"not UTF-8: byte 0x{text[exc.start]:02X} at offset {exc.start}") from None
    if not text.strip():
        raise Unparseable("the file is empty")
    try:
        if fmt == "json":
            return _json(text)
        if fmt == "yaml":
            data = load_budgeted(text, max_nodes=MAX_NODES, max_depth=MAX_DEPTH)
            if not isinstance(data, dict):
                raise Unparseable(f"expected a mapping, found {type(data).__name__}")
            return data
        if fmt == "toml":
            return tomllib.loads(text)
        if fmt == "ini":
            return _parse_ini(text)
        if fmt == "sqlite":
            return _sqlite(text)
    except Unparseable:
        raise
    except OverBudget as exc:
        raise TooLarge(str(exc)) from None
    except RecursionError:
        raise TooLarge("lists or mappings nested too deeply to read") from None
    except _PARSE_ERRORS as exc:  # what each format's reader says of a torn or invalid file
        raise Unparseable(f"{type(exc).__name__}: {exc}") from None
    except ValueError as exc:
        if "Exceeds the limit" in str(exc):  # an integer longer than Python converts (tomllib): valid, too large
            raise TooLarge(f"an integer too long to read ({exc})") from None
        raise ReaderFailed(f"{type(exc).__name__}: {exc}") from None
    except Exception as exc:  # noqa: BLE001 - anything else is clirace's failure, not the file's
        raise ReaderFailed(f"{type(exc).__name__}: {exc}") from None
    raise ReaderFailed(f"no reader for the format {fmt!r}")


# The errors the formats' readers raise for a file that is not valid (json's is a ValueError; PyYAML's, the YAMLError
# that _yaml.load_budgeted also raises for a value it cannot build).
_PARSE_ERRORS = (json.JSONDecodeError, yaml.YAMLError, tomllib.TOMLDecodeError, configparser.Error)


def _json(text: str) -> Parsed:
    # A RecursionError from deep nesting ('[' * 100000) is caught by parse(): too deep to judge, not torn.
    return json.loads(text, parse_int=_int)


def _sqlite(text: str) -> Parsed:
    """A SQLite database as clirace recorded it (scenarios/_sqlite.py): its tables, each a list of rows."""
    record = _json(text)
    if isinstance(record, dict) and isinstance(record.get("too_large"), str):
        raise TooLarge(record["too_large"])
    if isinstance(record, dict) and isinstance(record.get("unreadable"), str):
        raise Unparseable(record["unreadable"])
    if not isinstance(record, dict) or not isinstance(record.get("tables"), dict):
        raise Unparseable("not a record of a SQLite database")
    return record["tables"]


def _int(digits: str) -> int | str:
    return int(digits) if len(digits) <= MAX_DIGITS else digits


def _parse_ini(text: str) -> dict[str, dict[str, str]]:
    """INI as git, pip and npm write it. Keys before any [section] belong to DEFAULT: many files (.npmrc) have no
    section at all, and such a file is not torn. `=` is tried as the only delimiter first, since keys may hold
    a colon (npm's `@scope:registry=URL`); a file that needs `key: value` as well is read with both."""
    first = next((line.strip() for line in text.splitlines() if line.strip() and line.strip()[0] not in "#;"), "")
    if not first.startswith("["):
        text = "[DEFAULT]\n" + text
    try:
        parser = configparser.ConfigParser(interpolation=None, delimiters=("=",))
        parser.read_string(text)
    except configparser.ParsingError:
        parser = configparser.ConfigParser(interpolation=None)
        parser.read_string(text)
    return {section: dict(parser[section]) for section in ["DEFAULT", *parser.sections()]}


def lookup(data: Parsed, expr: str, fmt: str, *, query: bool = False) -> Parsed:
    """The value that `expr` names in `data`, or None.

    expr: a dotted key path (the default; for ini, a key without a section is looked up in DEFAULT), or with
    `query` (the spec's `config.query`) a JMESPath expression such as
    `clusters[?name=='cliracek3'].cluster.server | [0]`, for files where the key is a value, not a name.
    """
    if query:
        import jmespath  # (here, not at the top: only a spec with config.query needs it; validate starts faster)
        import jmespath.exceptions

        try:
            return jmespath.search(expr, data)
        except jmespath.exceptions.JMESPathError:  # a type error on this data (the syntax was checked at load)
            return None
    if fmt == "ini" and "." not in expr:
        expr = f"DEFAULT.{expr}"
    node = data
    if isinstance(node, dict) and expr in node:  # keys that contain dots themselves
        return node[expr]
    for part in expr.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def key_paths(data: Parsed) -> set[tuple[str, ...]]:
    """Every key of a parsed config, as the path of names leading to it through mappings (lists are values:
    their entries are not followed). For ini, a key outside any section is ("DEFAULT", key)."""
    out: set[tuple[str, ...]] = set()
    stack: list[tuple[tuple[str, ...], object]] = [((), data)]
    while stack:
        path, node = stack.pop()
        if isinstance(node, dict):
            for name, child in node.items():
                out.add(path + (str(name),))
                stack.append((path + (str(name),), child))
    return out


def query_problem(expr: str) -> str | None:
    """Why `expr` is not a JMESPath expression (for a SpecError), or None."""
    import jmespath
    import jmespath.exceptions

    try:
        jmespath.compile(expr)
    except jmespath.exceptions.JMESPathError as exc:
        return " ".join(str(exc).split())
    except RecursionError:
        return "nested too deeply"
    return None

