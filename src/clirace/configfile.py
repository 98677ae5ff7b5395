"""Parsing config files in the formats a spec may declare, and looking a dotted key up in them."""
from __future__ import annotations

import configparser
import json

import yaml

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib


class Unparseable(ValueError):
    pass


def parse(text: str, fmt: str):
    """Parse `text` as `fmt`; raise Unparseable with the parser's reason. An empty file is unparseable."""
    if not text.strip():
        raise Unparseable("the file is empty")
    try:
        if fmt == "json":
            return json.loads(text)
        if fmt == "yaml":
            data = yaml.safe_load(text)
            if not isinstance(data, dict):
                raise Unparseable(f"expected a mapping, found {type(data).__name__}")
            return data
        if fmt == "toml":
            return tomllib.loads(text)
        if fmt == "ini":
            return _parse_ini(text)
    except Unparseable:
        raise
    except Exception as exc:  # each parser has its own error types; all mean "torn or invalid"
        raise Unparseable(f"{type(exc).__name__}: {exc}") from None
    raise Unparseable(f"unknown format {fmt}")


def _parse_ini(text: str) -> dict:
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


_MISSING = object()


def lookup(data, dotted: str, fmt: str):
    """The value at a dotted key path, or None. For ini, a key without a section is looked up in DEFAULT."""
    if fmt == "ini" and "." not in dotted:
        dotted = f"DEFAULT.{dotted}"
    node = data
    if isinstance(node, dict) and dotted in node:  # keys that contain dots themselves
        return node[dotted]
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node
