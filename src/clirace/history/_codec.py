"""The typed, validating decoder of a saved history: JSON values into records, checked all the way down, refused with
the JSON path of the first value that is not what its field says.

Each type's decoder is built once from its annotations and kept (a 10,000-round history decodes millions of values:
asking `typing` about every one of them, and spelling every value's JSON path in case it is wrong, cost more than
reading the JSON). A path is spelled only when a value is refused: each level adds its own step to the error on its
way out. Short texts are interned as they are decoded, so that the paths, labels and flags a round repeats in every
file operation are held once.
"""
from __future__ import annotations

import dataclasses
import json
import sys
import types
import typing
from collections.abc import Callable
from enum import Enum
from typing import Any, Union

# Numbers, bounded like strings and nesting: no value clirace records comes near them (times in seconds, byte
# counts, pids, seeds), and a larger one would overflow where it is used as a float (10**400: OverflowError).
MAX_NUMBER = 1e15
MAX_INTEGER = 2**63 - 1
SHARED_LENGTH = 256  # texts up to this long are interned as they are read (_shared)

Decoder = Callable[[Any], Any]


class _Bad(Exception):
    """A value that is not what its field says; `at` grows from the value outwards into its JSON path."""
    def __init__(self, at: str, expected: str, found: Any):
        super().__init__(at)
        self.at, self.expected, self.found = at, expected, found


class _Missing:
    pass


def _show(value: Any) -> str:
    text = json.dumps(value) if not isinstance(value, _Missing) else "missing"
    return text if len(text) <= 60 else text[:57] + "..."


def _expect(data: dict[str, Any], key: str, kind: type, at: str) -> Any:
    value = data.get(key, _Missing())
    if not isinstance(value, kind):
        raise _Bad(f"{at}.{key}", kind.__name__, value)
    return value


def _whole(text: str) -> str:
    """The text with any lone surrogate (JSON may escape one: "\\ud800") shown as U+FFFD: clirace itself never
    writes one (what a target printed is decoded with replacement), and one left in would make every report
    that quotes it fail to print."""
    if text.isascii():  # (kept by CPython as a flag: no scan)
        return text
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def _shared(text: str) -> str:
    """One copy of each short text: a round's paths, labels, flags and arguments come back in every file operation
    and invocation of it (and its labels and calls in every round), so a big history holds each once."""
    return sys.intern(text) if len(text) <= SHARED_LENGTH else text


def _decode(tp: Any, value: Any, at: str) -> Any:
    """`value` from JSON as type `tp`, checked all the way down; _Bad(at + its path below, expected, found) where
    it is not."""
    try:
        return _decoder(tp)(value)
    except _Bad as bad:
        bad.at = at + bad.at
        raise


_DECODERS: dict[Any, Decoder] = {}


def _decoder(tp: Any) -> Decoder:
    found = _DECODERS.get(tp)
    if found is None:
        found = _DECODERS[tp] = _build(tp)
    return found


def _build(tp: Any) -> Decoder:
    origin = typing.get_origin(tp)
    if origin in (Union, types.UnionType):
        inner = [o for o in typing.get_args(tp) if o is not type(None)]
        if len(inner) == len(typing.get_args(tp)):
            return _decoder(inner[0])
        return _optional(inner[0])
    if tp is Any:
        return _any
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        return _record(tp)
    if isinstance(tp, type) and issubclass(tp, Enum):
        return _enum(tp)
    if origin is tuple:
        args = typing.get_args(tp)
        return _sequence(args[0]) if len(args) == 2 and args[1] is Ellipsis else _fixed(args)
    if origin is dict:
        return _mapping(typing.get_args(tp)[1])
    scalar = {float: _float, int: _int, str: _str, bool: _bool}.get(tp)
    if scalar is not None:
        return scalar

    def untaught(value: Any) -> Any:
        raise _Bad("", f"a {tp}", value)  # a type this decoder was not taught: a bug, shown as data
    return untaught


def _any(value: Any) -> Any:
    return value


def _optional(tp: Any) -> Decoder:
    def decode(value: Any) -> Any:
        return None if value is None else _decoder(tp)(value)
    return decode


def _record(tp: type) -> Decoder:
    hints = typing.get_type_hints(tp)
    fields = [f for f in dataclasses.fields(tp) if f.init]
    names = {f.name for f in fields}
    required = [f.name for f in fields
                if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
    # Field decoders are looked up on first use (a record's fields may name a type built after it).
    decoders: list[tuple[str, Decoder]] = []

    def decode(value: Any) -> Any:
        if not isinstance(value, dict):
            raise _Bad("", f"an object ({tp.__name__})", value)
        if not names.issuperset(value):
            first = sorted(set(value) - names)[0]
            raise _Bad(f".{first}", f"one of the fields of {tp.__name__}", value[first])
        if not decoders:
            decoders.extend((f.name, _decoder(hints[f.name])) for f in fields)
        kwargs = {}
        for name, field_decoder in decoders:
            if name in value:
                try:
                    kwargs[name] = field_decoder(value[name])
                except _Bad as bad:
                    bad.at = f".{name}{bad.at}"
                    raise
        for name in required:
            if name not in kwargs:
                raise _Bad(f".{name}", "a value", _Missing())
        return tp(**kwargs)
    return decode


def _enum(tp: type[Enum]) -> Decoder:
    members = {m.value: m for m in tp}

    def decode(value: Any) -> Any:
        try:
            return members[value]
        except (KeyError, TypeError):  # (TypeError: a list or an object, which no member is)
            raise _Bad("", f"one of {', '.join(str(m.value) for m in tp)}", value) from None
    return decode


def _sequence(tp: Any) -> Decoder:
    def decode(value: Any) -> Any:
        if not isinstance(value, list):
            raise _Bad("", "a list", value)
        item = _decoder(tp)
        try:
            return tuple([item(v) for v in value])
        except _Bad:
            for n, v in enumerate(value):  # which one, spelled only now (decoding is pure: the same one fails)
                try:
                    item(v)
                except _Bad as bad:
                    bad.at = f"[{n}]{bad.at}"
                    raise
            raise
    return decode


def _fixed(args: tuple[Any, ...]) -> Decoder:
    def decode(value: Any) -> Any:
        if not isinstance(value, list):
            raise _Bad("", "a list", value)
        if len(value) != len(args):
            raise _Bad("", f"a list of {len(args)}", value)
        out = []
        for n, (tp, v) in enumerate(zip(args, value, strict=True)):
            try:
                out.append(_decoder(tp)(v))
            except _Bad as bad:
                bad.at = f"[{n}]{bad.at}"
                raise
        return tuple(out)
    return decode


def _mapping(tp: Any) -> Decoder:
    def decode(value: Any) -> Any:
        if not isinstance(value, dict):
            raise _Bad("", "an object", value)
        item = _decoder(tp)
        out = {}
        for k, v in value.items():
            try:
                out[_shared(k)] = item(v)
            except _Bad as bad:
                bad.at = f".{k}{bad.at}"
                raise
        return out
    return decode


def _float(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _Bad("", "a number", value)
    if not -MAX_NUMBER <= value <= MAX_NUMBER:  # also NaN (JSON's NaN), which no comparison holds for
        raise _Bad("", f"a finite number of at most {MAX_NUMBER:.0e}", value)
    return float(value)


def _int(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise _Bad("", "an integer", value)
    if not -MAX_INTEGER <= value <= MAX_INTEGER:
        raise _Bad("", f"an integer of at most {len(str(MAX_INTEGER))} digits", value)
    return value


def _str(value: Any) -> str:
    if not isinstance(value, str):
        raise _Bad("", "a string", value)
    return _shared(_whole(value))


def _bool(value: Any) -> bool:
    if not isinstance(value, bool):
        raise _Bad("", "true or false", value)
    return value
