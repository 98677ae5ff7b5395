"""Recognising a structured lock-conflict error in what a contender printed.

Accepted: a JSON object on stdout or stderr, possibly after an `Error: ` prefix and spread over several
lines, whose `code` is LOCK_HELD (or CONCURRENT_MODIFICATION: an optimistic refusal of a stale write, §58) at the
top level or under `"error"` (the CLI Agent Spec envelope
`{"ok": false, "data": null, "error": {...}}`). The object is validated against rubric/lock_held.schema.json.
"""
from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import jsonschema

from clirace.checks.catalogue import lock_held_schema
from clirace.history import OUTPUT_CAP, Invocation
from clirace.history.vocab import CONFLICT_CODES

_DECODER = json.JSONDecoder()


@dataclass
class PrintedError:
    error: dict[str, Any] | None = None  # the error object (code, message, retry_after_ms, ...)
    envelope: dict[str, Any] | None = None  # the whole object when the error sits under "error"
    stream: str = ""
    problems: list[tuple[str, dict[str, Any]]] = field(default_factory=list)  # (rule code, args) for the criterion

    @property
    def structured(self) -> bool:
        return self.error is not None and not self.problems

    cut: str = ""  # set when what was kept of the output was cut short: "stdout (10485760 bytes)"

    @property
    def says_lock_held(self) -> bool:
        """It is a structured refusal of the change: LOCK_HELD, or CONCURRENT_MODIFICATION (which code: `code`)."""
        return self.error is not None and self.error.get("code") in CONFLICT_CODES

    @property
    def code(self) -> str:
        return str((self.error or {}).get("code"))

    @property
    def undecidable(self) -> bool:
        """No LOCK_HELD error in what was kept, but the output was cut: the rest may have held one, so nothing
        about its structure can be decided (evidence cut short decides nothing it could not decide whole)."""
        return bool(self.cut) and not self.says_lock_held


def succeeded(inv: Invocation) -> bool:
    """It exited 0 and did not report LOCK_HELD. A LOCK_HELD printed with exit status 0 is a refusal with a
    lying status (CR203 says so), not a success whose effect went missing: counting it as one would turn a
    level-1 defect into silent corruption."""
    printed = inv.stdout + inv.stderr
    return inv.ok and not (any(code in printed for code in CONFLICT_CODES)
                           and find_error(inv.stdout, inv.stderr).says_lock_held)


MAX_DESCENT = 8  # levels of an unparseable object looked into for objects inside it (`Error: {not json {...}}`)
MAX_SCANNED = 1 << 20  # characters of one stream looked at: a history clirace wrote keeps 64 KiB of each
_SPECIAL = re.compile(r'[{}"\\]')


_Span = tuple[int, int, list["_Span"]]  # start, end, the closed {...} directly inside


def json_objects(text: str) -> Iterator[dict[str, Any]]:
    """The JSON objects printed in `text`, outermost first: a target's output is untrusted, so one pass finds the
    balanced braces (no parse from every `{`, quadratic on a line of them), each outermost one is parsed once,
    and only one that does not parse (30,000 `{"a":` exhaust the parser's recursion: caught) is looked into,
    at most MAX_DESCENT levels deep, for whole objects inside it. What closes inside a brace that never
    closes stands on its own."""
    text = text[:MAX_SCANNED]
    yield from _parsed(text, _outermost(text), 0)


def _outermost(text: str) -> list[_Span]:
    """The balanced {...} not inside another balanced one, braces within JSON strings aside; those inside a
    brace that never closes count as outermost. (Plain ints and lists: a line of a million `{` stays cheap.)"""
    starts: list[int] = []  # the braces open now
    inners: list[list[_Span]] = []  # for each, the spans closed directly inside it
    roots: list[_Span] = []
    in_string = False
    pos = 0
    while (match := _SPECIAL.search(text, pos)) is not None:
        char, pos = match.group(), match.end()
        if in_string:
            if char == "\\":
                pos += 1  # the escaped character, whatever it is
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = bool(starts)  # quotes in plain text around the JSON open no string
        elif char == "{":
            starts.append(match.start())
            inners.append([])
        elif char == "}" and starts:
            span = (starts.pop(), pos, inners.pop())
            (inners[-1] if inners else roots).append(span)
    for inner in inners:  # never closed: what closed inside it stands on its own
        roots.extend(inner)
    return sorted(roots)


def _parsed(text: str, spans: list[_Span], descent: int) -> Iterator[dict[str, Any]]:
    for start, end, inner in spans:
        try:
            obj = json.loads(text[start:end])
        except (ValueError, RecursionError):
            if descent < MAX_DESCENT:
                yield from _parsed(text, inner, descent + 1)
            continue
        if isinstance(obj, dict):
            yield obj


def find_error(stdout: str, stderr: str) -> PrintedError:
    """The most relevant JSON error object printed, with what is wrong with it for §15 level 2."""
    candidates: list[tuple[dict[str, Any], dict[str, Any] | None, str]] = []  # (error, envelope, stream)
    for stream, text in (("stdout", stdout), ("stderr", stderr)):
        for obj in json_objects(text):
            if isinstance(obj.get("error"), dict):
                candidates.append((obj["error"], obj, stream))
            elif "code" in obj:
                candidates.append((obj, None, stream))
    if not candidates:
        return PrintedError()
    error, envelope, stream = next((c for c in candidates if c[0].get("code") in CONFLICT_CODES), candidates[0])
    return PrintedError(error, envelope, stream, _problems(error))


def printed_error(inv: Invocation) -> PrintedError:
    """find_error on what the invocation printed, noting a stream the history kept only the start of."""
    printed = find_error(inv.stdout, inv.stderr)
    printed.cut = ", ".join(f"{name} ({max(total, len(kept))} bytes)" for name, total, kept in (
        ("stdout", inv.stdout_bytes, inv.stdout), ("stderr", inv.stderr_bytes, inv.stderr))
        if total > OUTPUT_CAP or len(kept) > MAX_SCANNED)
    return printed


@lru_cache(maxsize=1)
def _validator() -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(lock_held_schema())


def _problems(error: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    problems: list[tuple[str, dict[str, Any]]] = []
    for issue in _validator().iter_errors(error):
        where = list(issue.absolute_path)
        if issue.validator in ("const", "enum") and where == ["code"]:
            problems.append(("CR206", {"code": error.get("code")}))
        elif issue.validator == "required" and "retry_after_ms" in issue.message:
            problems.append(("CR204", {}))
        elif where == ["retry_after_ms"]:
            problems.append(("CR205", {"value": json.dumps(error.get("retry_after_ms"))}))
        elif issue.validator == "required" and "code" in issue.message:
            problems.append(("CR206", {"code": None}))
    if any(code == "CR206" for code, _ in problems):
        # Not a LOCK_HELD error at all: what its other fields lack is beside the point, and saying "no
        # retry_after_ms" would send the maintainer to fix the wrong thing.
        return [(code, args) for code, args in problems if code == "CR206"][:1]
    return problems


def advisories(printed: PrintedError, exit_code: int | None) -> list[tuple[str, dict[str, Any]]]:
    """What the CLI Agent Spec (REQ-F-033) adds beyond the rubric; never changes the score."""
    error = printed.error
    if error is None or not printed.says_lock_held:  # (says_lock_held has an error)
        return []
    if printed.code == "CONCURRENT_MODIFICATION":  # §58's refusal: its exit status is 6
        return [] if exit_code == 6 else [("CR950", {"code": printed.code, "exit": exit_code})]
    out: list[tuple[str, dict[str, Any]]] = []
    text = json.dumps(error)
    names_pid = any("pid" in k.lower() for k in error) or re.search(r"\bpid\W{0,3}\d+", text, re.I)
    names_age = any(w in k.lower() for k in error for w in ("age", "held_for", "started", "since")) or \
        re.search(r"\d+\s*(ms|s|sec|seconds|minutes?)\s+ago|for \d+\s*(ms|s)", text, re.I)
    if not (names_pid and names_age):
        out.append(("CR901", {}))
    if error.get("retryable") is not True:
        out.append(("CR902", {}))
    if exit_code != 4:
        out.append(("CR903", {"code": exit_code}))
    env = printed.envelope
    if not (env and env.get("ok") is False and "data" in env):
        out.append(("CR904", {}))
    return out
