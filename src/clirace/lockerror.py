"""Recognising a structured lock-conflict error in what a contender printed.

Accepted: a JSON object on stdout or stderr, possibly after an `Error: ` prefix and spread over several
lines, whose `code` is LOCK_HELD (or CONCURRENT_MODIFICATION: an optimistic refusal of a stale write, §58) at the
top level or under `"error"` (the CLI Agent Spec envelope
`{"ok": false, "data": null, "error": {...}}`). The object is validated against rubric/lock_held.schema.json.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from functools import lru_cache

import jsonschema

from .catalogue import lock_held_schema
from .history import Invocation
from .vocab import CONFLICT_CODES

_DECODER = json.JSONDecoder()


@dataclass
class PrintedError:
    error: dict | None = None  # the error object (code, message, retry_after_ms, ...)
    envelope: dict | None = None  # the whole object when the error sits under "error"
    stream: str = ""
    problems: list[tuple[str, dict]] = field(default_factory=list)  # (rule code, args) for the criterion

    @property
    def structured(self) -> bool:
        return self.error is not None and not self.problems

    @property
    def says_lock_held(self) -> bool:
        """It is a structured refusal of the change: LOCK_HELD, or CONCURRENT_MODIFICATION (which code: `code`)."""
        return self.error is not None and self.error.get("code") in CONFLICT_CODES

    @property
    def code(self) -> str:
        return str((self.error or {}).get("code"))


def succeeded(inv: Invocation) -> bool:
    """It exited 0 and did not report LOCK_HELD. A LOCK_HELD printed with exit status 0 is a refusal with a
    lying status (CR203 says so), not a success whose effect went missing: counting it as one would turn a
    level-1 defect into silent corruption."""
    return inv.ok and not find_error(inv.stdout, inv.stderr).says_lock_held


def json_objects(text: str):
    stripped = text.strip()
    try:
        whole = json.loads(stripped)
        if isinstance(whole, dict):
            yield whole
            return
    except ValueError:
        pass
    for match in re.finditer(r"\{", text):
        try:
            obj, _ = _DECODER.raw_decode(text, match.start())
        except ValueError:
            continue
        if isinstance(obj, dict):
            yield obj


def find_error(stdout: str, stderr: str) -> PrintedError:
    """The most relevant JSON error object printed, with what is wrong with it for §15 level 2."""
    candidates = []
    for stream, text in (("stdout", stdout), ("stderr", stderr)):
        for obj in json_objects(text):
            if isinstance(obj.get("error"), dict):
                candidates.append(PrintedError(obj["error"], obj, stream))
            elif "code" in obj:
                candidates.append(PrintedError(obj, None, stream))
    if not candidates:
        return PrintedError()
    best = next((c for c in candidates if c.error.get("code") in CONFLICT_CODES), candidates[0])
    best.problems = _problems(best.error)
    return best


@lru_cache(maxsize=1)
def _validator():
    return jsonschema.Draft202012Validator(lock_held_schema())


def _problems(error: dict) -> list[tuple[str, dict]]:
    problems = []
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


def advisories(printed: PrintedError, exit_code: int | None) -> list[tuple[str, dict]]:
    """What the CLI Agent Spec (REQ-F-033) adds beyond the rubric; never changes the score."""
    if not printed.says_lock_held:
        return []
    if printed.code == "CONCURRENT_MODIFICATION":  # §58's refusal: its exit status is 6
        return [] if exit_code == 6 else [("CR950", {"code": printed.code, "exit": exit_code})]
    out = []
    error = printed.error
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
