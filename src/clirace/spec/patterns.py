"""Regexes from a spec (a counter's `value`, a claim's `claimed`, a holder's `ready` stdout/stderr), run on what
a target printed: compiled once, and never allowed to hang clirace.

A target's output is untrusted and a spec's regex may backtrack catastrophically (`(?:a+)+ x` against a long
run of `a`s). So every search runs under a bound on the CPU time it may use (not wall time: a verdict must not change with
the machine's load; see `cpu_bounded`), and a search that does not finish raises `PatternTimeout`, which a check turns into "could not decide", never a hang. At load
time, `problem()` says why a pattern is unusable: invalid, a group 1 that can stay unmatched (the value would
be None), or catastrophic on a long run of the characters it repeats.

The syntax is Python's `re` (parsed by `re` for the static checks), run by `regex` in its compatible mode.
"""
from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from functools import lru_cache
from typing import TYPE_CHECKING, Any

import regex

from clirace.errors import PatternTimeout as PatternTimeout  # re-exported: raised here

# re's parser, whose trees the static checks walk. Typed through sre_*, the names typeshed knows them by; at run
# time re's own modules on 3.11+, where importing sre_* warns that they are deprecated.
if TYPE_CHECKING or sys.version_info < (3, 11):
    import sre_constants as _sre
    import sre_parse as _sre_parse
else:
    from re import _constants as _sre
    from re import _parser as _sre_parse

TIME_LIMIT = 1.0  # seconds of CPU one search may use on one target output
PROBE_LIMIT = 0.5  # seconds of CPU a probe search may use at load time
PROBE_LENGTH = 2048  # characters in a probe: a run of one character the pattern repeats
PROBE_BUDGET = 5.0  # seconds of CPU spent probing per pattern; past it the runtime bound alone guards
MAX_STRETCH = 16  # the longest wall-time bound a search is given, as a multiple of its CPU limit (1+2+...+16)
MAX_LENGTH = 10_000  # characters in a pattern; a spec's patterns are a line long


@lru_cache(maxsize=256)
def compiled(pattern: str, multiline: bool = True) -> regex.Pattern[str]:
    """The pattern compiled once (callers validated it at spec load; an invalid one raises regex.error)."""
    return regex.compile(pattern, (regex.MULTILINE if multiline else 0) | regex.VERSION0)


def search(pattern: str, text: str, *, multiline: bool = True, limit: float = TIME_LIMIT) -> regex.Match[str] | None:
    """The first match of `pattern` in `text` (a regex Match) or None; PatternTimeout once the search has used
    `limit` seconds of CPU."""
    try:
        return cpu_bounded(compiled(pattern, multiline), text, limit)
    except TimeoutError:
        raise PatternTimeout(pattern, limit, len(text.encode("utf-8", "surrogatepass"))) from None


def cpu_bounded(regex_: regex.Pattern[str], text: str, limit: float) -> regex.Match[str] | None:
    """regex_.search(text), raising TimeoutError once it has used `limit` seconds of this thread's CPU.

    Why CPU and not wall time: the regex module's own `timeout=` counts wall time, so on a loaded machine the
    same search on the same saved output would stop sooner, and `clirace judge` of one history would differ
    with the load. A search is cut at `timeout=` and run again with twice the wall time for as long as it has
    not used `limit` of CPU in all: a search that needs less always finishes, one that needs more never does.
    """
    started, wall = time.thread_time(), limit
    while True:
        try:
            return regex_.search(text, timeout=wall)
        except TimeoutError:
            if time.thread_time() - started >= limit or wall >= MAX_STRETCH * limit:
                raise  # (past MAX_STRETCH the thread got under 1/30 of a CPU: a machine that starved is no verdict)
            wall *= 2


def group1(pattern: str, text: str, *, multiline: bool = True, limit: float = TIME_LIMIT) -> str | None:
    """Group 1 of the first match (the whole match for a pattern without groups); None without a match.

    None also when group 1 did not take part in the match, which `problem()` refuses at load time for the
    fields whose value is group 1, so a None here means "no value", never a crash in the caller.
    """
    match = search(pattern, text, multiline=multiline, limit=limit)
    if match is None:
        return None
    found: str | None = match.group(1) if match.re.groups else match.group(0)  # (the regex module's stubs say Any)
    return found


def problem(pattern: str, *, needs_group1: bool = False) -> str | None:
    """Why `pattern` cannot be used on target output, or None when it can: a phrase that follows the field's name
    in a SpecError ("workloads[0].value is not a valid regular expression (...)").
    """
    if len(pattern) > MAX_LENGTH:
        return f"is {len(pattern):,} characters long; expected at most {MAX_LENGTH:,}"
    try:
        tree = _sre_parse.parse(pattern)
        compiled(pattern)
    except (regex.error, _sre.error) as exc:
        return f"is not a valid regular expression ({_reason(exc)})"
    except (OverflowError, ValueError, RecursionError) as exc:  # x{99999999999}, deeply nested groups
        return f"is not a valid regular expression ({exc})"
    if needs_group1 and tree.state.groups > 1 and not _always(tree, 1):
        return ("has a group 1 that a match can leave unset (it sits in an alternative, an optional part or a "
                "lookaround), so there would be no value to read; expected group 1 to take part in every match, "
                "e.g. 'count: (\\d+)', or (?:...) for the groups that are not the value")
    slow = _catastrophic(pattern, tree)
    if slow:
        return (f"backtracks catastrophically: {slow}, and a target's output may hold 64 KiB; expected a pattern "
                "without nested or overlapping repetition (such as (a+)+ or (a|aa)*)")
    return None


def _reason(exc: Exception) -> str:
    text = str(exc)
    return text.split(" at position")[0] if " at position" in text else text


# ------------------------------------------------------------------------------------------ group 1

# One node of re's parse tree: (op, its argument), the argument's shape depending on the op (a number, a tuple
# holding sub-trees, a list of alternatives), which the walkers below take apart op by op.
_Node = tuple[object, Any]


def _nodes(tree: _sre_parse.SubPattern) -> Sequence[_Node]:
    return tree.data


_ATOMIC_GROUP = getattr(_sre, "ATOMIC_GROUP", None)  # (?>...), Python 3.11+
_REPEATS = {_sre.MAX_REPEAT, _sre.MIN_REPEAT} | ({_sre.POSSESSIVE_REPEAT} if hasattr(_sre, "POSSESSIVE_REPEAT") else set())


def _always(items: _sre_parse.SubPattern, group: int) -> bool:
    """Whether every match of the sequence `items` (an re parse tree) sets `group`."""
    for op, av in _nodes(items):
        if op is _sre.SUBPATTERN:
            number, _add, _remove, body = av
            if number == group or _always(body, group):
                return True
        elif op in _REPEATS:
            low, _high, body = av
            if low >= 1 and _always(body, group):
                return True
        elif op is _sre.BRANCH:
            if all(_always(alternative, group) for alternative in av[1]):
                return True
        elif op is _sre.ASSERT:  # a positive lookaround that succeeded has set its groups
            if _always(av[1], group):
                return True
        elif _ATOMIC_GROUP is not None and op is _ATOMIC_GROUP:
            if _always(av, group):
                return True
        elif op is _sre.GROUPREF_EXISTS:
            _cond, yes, no = av
            if _always(yes, group) and no is not None and _always(no, group):
                return True
    return False


# ---------------------------------------------------------------------------------- catastrophic probes

_CATEGORY_SAMPLE = {
    _sre.CATEGORY_DIGIT: "1", _sre.CATEGORY_NOT_DIGIT: "a", _sre.CATEGORY_SPACE: " ",
    _sre.CATEGORY_NOT_SPACE: "a", _sre.CATEGORY_WORD: "a", _sre.CATEGORY_NOT_WORD: " ",
}


def _characters(items: _sre_parse.SubPattern, out: dict[str, None]) -> None:
    """Characters the pattern can consume, in order of appearance (one sample per class)."""
    for op, av in _nodes(items):
        if op is _sre.LITERAL:
            out[chr(av)] = None
        elif op is _sre.ANY:
            out["a"] = None
        elif op is _sre.IN:
            for kind, value in av:
                if kind is _sre.LITERAL:
                    out[chr(value)] = None
                    break
                if kind is _sre.RANGE:
                    out[chr(value[0])] = None
                    break
                if kind is _sre.CATEGORY and value in _CATEGORY_SAMPLE:
                    out[_CATEGORY_SAMPLE[value]] = None
                    break
        elif op is _sre.SUBPATTERN:
            _characters(av[3], out)
        elif op in _REPEATS:
            _characters(av[2], out)
        elif op is _sre.BRANCH:
            for alternative in av[1]:
                _characters(alternative, out)
        elif op in (_sre.ASSERT, _sre.ASSERT_NOT):
            _characters(av[1], out)
        elif op is _sre.GROUPREF_EXISTS:
            for branch in av[1:]:
                if branch is not None:
                    _characters(branch, out)
        elif _ATOMIC_GROUP is not None and op is _ATOMIC_GROUP:
            _characters(av, out)


def _catastrophic(pattern: str, tree: _sre_parse.SubPattern) -> str | None:
    """Why `pattern` backtracks catastrophically on a long run of a character it consumes, or None.

    The probes: a run of PROBE_LENGTH of each such character, ending in NUL (which the pattern is unlikely to
    accept), the input that drives a backtracking engine through every way to split the run. A search that
    does not finish within PROBE_LIMIT, twice, is catastrophic. Measured here (2 busy cores): quadratic
    patterns such as `\\s*(\\d+)\\s*$` take 0.15 s on such a run, and pass (the runtime bound covers their worst
    case); nested repetition takes 20 s or more ((a+)+x), or never ends ((a|aa)+$).
    """
    found: dict[str, None] = {}
    _characters(tree, found)
    regex_ = compiled(pattern)
    budget = time.thread_time() + PROBE_BUDGET  # CPU, as each probe: the same characters probed at any load
    for char in list(found)[:32]:
        text = char * PROBE_LENGTH + "\x00"
        try:  # CPU time, so that the same spec is refused or accepted whatever the machine's load
            cpu_bounded(regex_, text, PROBE_LIMIT)
        except TimeoutError:
            return f"on a run of {PROBE_LENGTH:,} {char!r} it did not finish within {PROBE_LIMIT:g} s of CPU"
        if time.thread_time() > budget:
            break
    return None
