"""YAML to plain data, remembering where every value came from (file:line:column) for error messages.

Every failure is a one-paragraph SpecError that points at the defect: the first NUL or non-UTF-8 byte, the
opening quote or bracket that is never closed (not where the parser finally gave up), the tab, the key that
appears twice.
"""
from __future__ import annotations

import datetime
import os
import re
import stat
import unicodedata
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from clirace.errors import OverBudget, SpecError

# A spec is a few hundred nodes; an alias bomb ("billion laughs") expands to millions.
MAX_NODES = 20_000
MAX_BYTES = 1_000_000
MAX_DIGITS = 18  # an integer in a spec is a count or a duration; int() of 4,300+ digits raises
MAX_DEPTH = 32  # lists and mappings nested in each other: a spec needs about 6; PyYAML's scanner is quadratic in it
_BRACKETS = re.compile(r"[\[\]{}]")
# Where a value is in the spec: the keys and list indexes leading to it from the top, () for the whole spec.
KeyPath = tuple[str | int, ...]
START_HINT = "Run `clirace schema` for the format; a spec starts with 'version: 1' and 'tool: {command: ...}'."


class Located:
    """Parsed YAML plus a map from a JSON path (tuple of keys/indexes) to 'file:line:column'."""

    def __init__(self, data: Any, marks: dict[KeyPath, str], key_marks: dict[KeyPath, str], origin: str) -> None:
        self.data = data  # plain data as YAML gives it (mappings, lists, strings, numbers), checked by the loader
        self.marks = marks
        self.key_marks = key_marks
        self.origin = origin

    def where_key(self, path: Sequence[str | int]) -> str:
        return self.key_marks.get(tuple(path)) or self.where(path)

    def where(self, path: Sequence[str | int]) -> str:
        at = tuple(path)
        while at and at not in self.marks:
            at = at[:-1]
        return self.marks.get(at, self.origin)


def load_located(path: Path) -> Located:
    from clirace.spec._paths import shown_path
    origin = shown_path(path)  # every error and annotation names the spec as the user would
    raw = _read_spec(path, origin)
    if b"\x00" in raw:
        at = raw.index(b"\x00")
        raise SpecError("found a NUL byte: this is a binary file, not YAML; expected a UTF-8 text file.",
                        where=_byte_where(origin, raw, at))
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        bad = raw[exc.start:exc.start + 1].hex().upper()
        raise SpecError(f"found the byte 0x{bad}, which is not UTF-8; expected UTF-8 text.",
                        where=_byte_where(origin, raw, exc.start),
                        hint="Re-save the file as UTF-8 (it is probably Latin-1 or Windows-1252).") from None
    _check_brackets(text, origin)
    try:
        node = _compose(text)
    except yaml.reader.ReaderError as exc:  # a character YAML does not allow: it says where only as an index
        raise _unacceptable(exc, text, origin) from None
    except yaml.MarkedYAMLError as exc:
        raise _syntax_error(exc, text, origin) from None
    except yaml.YAMLError as exc:
        raise SpecError(f"YAML error: {' '.join(str(exc).split())}.", where=origin) from None
    except RecursionError:
        raise _too_deep(text, origin) from None
    if node is None:
        what = "empty" if not text.strip() else "only comments and blank lines"
        raise SpecError(f"the spec is {what}; expected a mapping with the keys 'version' and 'tool'.",
                        where=origin, hint=START_HINT)
    builder = _Builder(origin)
    try:
        data = builder.construct(node, ())
    except RecursionError:
        raise _too_deep(text, origin) from None
    return Located(data, builder.marks, builder.key_marks, origin)


_NOT_REGULAR = {stat.S_IFDIR: "a directory", stat.S_IFCHR: "a character device", stat.S_IFBLK: "a block device",
                stat.S_IFIFO: "a named pipe (FIFO)", stat.S_IFSOCK: "a socket"}


def _read_spec(path: Path, origin: str) -> bytes:
    """The spec's bytes, from a regular file of at most MAX_BYTES. Opened without blocking and checked before
    reading: a FIFO would block forever, /dev/urandom never ends, /dev/zero fills memory."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise SpecError("spec file not found.", where=origin,
                        hint="Pass the path of a clirace YAML spec; `clirace init` writes a commented starter.") from None
    except OSError as exc:
        raise SpecError(f"cannot read the spec: {exc.strerror}.", where=origin) from None
    try:
        info = os.fstat(fd)
        kind = stat.S_IFMT(info.st_mode)
        if kind == stat.S_IFDIR:
            raise SpecError("is a directory, not a spec file.", where=origin)
        if kind != stat.S_IFREG:
            raise SpecError(f"is {_NOT_REGULAR.get(kind, 'not a regular file')}, not a spec file; expected a "
                            "regular YAML file.", where=origin)
        if info.st_size > MAX_BYTES:
            raise _too_big(info.st_size, origin)
        chunks, size = [], 0
        while size <= MAX_BYTES:  # the file may grow while it is read
            chunk = os.read(fd, MAX_BYTES + 1 - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except OSError as exc:
        raise SpecError(f"cannot read the spec: {exc.strerror}.", where=origin) from None
    finally:
        os.close(fd)
    if size > MAX_BYTES:
        raise _too_big(size, origin)
    return b"".join(chunks)


def _unacceptable(exc: yaml.reader.ReaderError, text: str, origin: str) -> SpecError:
    """A control character (DEL, ESC, C1), a BOM or U+FFFE inside the text: YAML refuses it; say where."""
    at = min(max(exc.position, 0), len(text))
    line_start = text.rfind("\n", 0, at) + 1
    code = exc.character if isinstance(exc.character, int) else ord(str(exc.character)[:1] or "\0")
    what = "a control character" if unicodedata.category(chr(code)) == "Cc" else "not a character"
    escape = f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"
    return SpecError(f"found U+{code:04X} ({what}), which YAML does not allow in a file; expected printable text.",
                     where=f"{origin}:{text.count(chr(10), 0, at) + 1}:{at - line_start + 1}",
                     hint=f'Remove it, or write it as an escape inside a double-quoted string ("{escape}").')


def _too_big(size: int, origin: str) -> SpecError:
    return SpecError(f"the spec is {size:,} bytes; expected at most {MAX_BYTES:,} bytes.", where=origin,
                     hint="A spec describes commands; data belongs in files that setup commands create.")


def _byte_where(origin: str, raw: bytes, index: int) -> str:
    line_start = raw.rfind(b"\n", 0, index) + 1
    column = len(raw[line_start:index].decode("utf-8", errors="replace")) + 1
    line = raw.count(b"\n", 0, index) + 1
    return f"{origin}:{line}:{column}"


def _check_brackets(text: str, origin: str) -> None:
    """Refuse deep [ { nesting before PyYAML sees it: its scanner is quadratic in the nesting depth."""
    at = _too_deep_bracket(text, MAX_DEPTH)
    if at is not None:
        line_start = text.rfind("\n", 0, at) + 1
        raise _deep(f"{origin}:{text.count(chr(10), 0, at) + 1}:{at - line_start + 1}")


def _too_deep_bracket(text: str, limit: int) -> int | None:
    """The index of the first '[' or '{' nested deeper than `limit`, or None.

    Counts brackets outside comment lines; a quoted '[' counts too, which only matters past 100 of them.
    """
    depth = 0
    for match in _BRACKETS.finditer(text):
        line_start = text.rfind("\n", 0, match.start()) + 1
        if text[line_start:match.start()].lstrip().startswith("#"):
            continue
        depth = max(0, depth + (1 if match.group() in "[{" else -1))
        if depth > limit:
            return match.start()
    return None


# ------------------------------------------------------------------------------- files a target wrote

def load_budgeted(text: str, *, max_nodes: int = 100_000, max_depth: int = 100) -> Any:
    """A YAML document (safe tags only) as plain data, for a file a target wrote; raises yaml.YAMLError when
    it is invalid and OverBudget when it nests deeper than `max_depth` or expands to more than `max_nodes`
    values through its aliases. The spec's own loader spends the same kind of budget (_Builder)."""
    if _too_deep_bracket(text, max_depth) is not None:
        raise OverBudget(f"lists or mappings nested more than {max_depth} levels deep")
    try:
        node = _compose(text)
    except RecursionError:
        raise OverBudget("lists or mappings nested too deeply to read") from None
    if node is None:
        return None
    _spend(node, max_nodes, max_depth)
    loader = yaml.SafeLoader("")
    try:
        return loader.construct_document(node)
    except RecursionError:
        raise OverBudget("lists or mappings nested too deeply to read") from None
    except (ValueError, KeyError, IndexError, TypeError, AttributeError, OverflowError) as exc:  # !!int abc and the like
        raise yaml.YAMLError(f"a value YAML cannot build: {type(exc).__name__}: {exc}") from None


def _spend(root: yaml.Node, max_nodes: int, max_depth: int) -> None:
    """Walk the node graph as construction would expand it (an alias visits its anchor's nodes again)."""
    budget = max_nodes
    stack = [(root, 0)]
    while stack:
        node, depth = stack.pop()
        budget -= 1
        if budget < 0:
            raise OverBudget(f"more than {max_nodes:,} values once its aliases are expanded")
        if depth > max_depth:
            raise OverBudget(f"lists or mappings nested more than {max_depth} levels deep")
        if isinstance(node, yaml.MappingNode):
            stack.extend((part, depth + 1) for pair in node.value for part in pair)
        elif isinstance(node, yaml.SequenceNode):
            stack.extend((item, depth + 1) for item in node.value)


def _too_deep(text: str, origin: str) -> SpecError:
    """Nesting too deep for a recursive reader (block nesting), located at the first token that deep."""
    depth, where = 0, origin
    opening = (yaml.FlowSequenceStartToken, yaml.FlowMappingStartToken, yaml.BlockMappingStartToken,
               yaml.BlockSequenceStartToken)
    closing = (yaml.FlowSequenceEndToken, yaml.FlowMappingEndToken, yaml.BlockEndToken)
    try:
        for token in yaml.scan(text, Loader=yaml.SafeLoader):
            depth += isinstance(token, opening) - isinstance(token, closing)
            if depth > MAX_DEPTH:
                where = f"{origin}:{token.start_mark.line + 1}:{token.start_mark.column + 1}"
                break
    except yaml.YAMLError:
        pass
    return _deep(where)


def _deep(where: str) -> SpecError:
    return SpecError(f"found lists or mappings nested more than {MAX_DEPTH} levels deep; expected a spec a few "
                     "levels deep.", where=where)


# ------------------------------------------------------------------------------------------ syntax errors

_TOKENS = {
    "<block mapping start>": "a key indented differently from the keys before it",
    "<block sequence start>": "a list item ('-') indented differently from the lines before it",
    "<block entry>": "a list item ('-')",
    "<scalar>": "a value",
    "<block end>": "the end of an indented block",
    "<flow sequence start>": "'['",
    "<flow mapping start>": "'{'",
    "<document start>": "'---'",
    "<stream end>": "the end of the file",
    "?": "'?'",
    ":": "':'",
}


def _found(problem: str) -> str:
    match = re.search(r"but (?:found|got) '([^']*)'", problem)
    return _TOKENS.get(match.group(1), repr(match.group(1))) if match else "something unexpected"


def _syntax_error(exc: yaml.MarkedYAMLError, text: str, origin: str) -> SpecError:
    context, problem = exc.context or "", exc.problem or ""
    pmark, cmark = exc.problem_mark, exc.context_mark

    def at(mark: yaml.Mark | None) -> str:
        return f"{origin}:{mark.line + 1}:{mark.column + 1}" if mark else origin

    def pos(mark: yaml.Mark | None) -> str:  # PyYAML gives its marks to these errors, but types them optional
        return f"line {mark.line + 1}, column {mark.column + 1}" if mark else "a place YAML does not name"

    lines = text.splitlines()
    bad_line = lines[pmark.line] if pmark and pmark.line < len(lines) else ""
    if pmark and ("'\\t'" in problem or "tab" in problem or "\t" in bad_line[:len(bad_line) - len(bad_line.lstrip())]):
        column = bad_line.index("\t") if "\t" in bad_line else pmark.column
        return SpecError("YAML syntax error: found a tab character; YAML indents with spaces only.",
                         where=f"{origin}:{pmark.line + 1}:{column + 1}", hint="Replace the tab with spaces.")
    if context.startswith("while scanning a quoted scalar"):
        quote = text[cmark.index] if cmark and cmark.index < len(text) else '"'
        return SpecError(f"YAML syntax error: the quoted string that starts here is never closed (found {_found(problem)}"
                         f" at {pos(pmark)}); expected a closing {quote}.", where=at(cmark))
    runaway = _runaway_quote(text, pmark)
    if runaway is not None:
        return SpecError(f"YAML syntax error: the quoted string that starts here runs on to line "
                         f"{runaway.end_mark.line + 1}, where YAML gives up; expected its closing {runaway.style} on "
                         f"line {runaway.start_mark.line + 1}.", where=at(runaway.start_mark))
    if context.startswith("while parsing a flow"):
        opener = "[" if "sequence" in context else "{"
        closer = "]" if opener == "[" else "}"
        return SpecError(f"YAML syntax error: the '{opener}' opened here is never closed: at {pos(pmark)} found "
                         f"{_found(problem)}; expected ',' or '{closer}'.", where=at(cmark))
    if "expected <block end>" in problem:
        return SpecError(f"YAML syntax error: found {_found(problem)}; expected the next key of the block that "
                         f"starts at {pos(cmark)}, in the same column as the keys before it.", where=at(pmark),
                         hint="Check this line's indentation.")
    if "mapping values are not allowed here" in problem:
        return SpecError("YAML syntax error: found a second ': ' inside a value; expected one 'key: value' per line.",
                         where=at(pmark), hint="Quote the value if it contains ': '.")
    if "could not find expected ':'" in problem:
        return SpecError("YAML syntax error: this line is neither 'key: value' nor a list item; expected 'key: value'.",
                         where=at(cmark or pmark))
    if "expected a single document" in context:
        return SpecError("YAML syntax error: found a second YAML document ('---'); expected a single document.",
                         where=at(pmark))
    if "undefined alias" in problem:
        return SpecError(f"YAML syntax error: {problem}; expected an anchor (&name) defined earlier in the file.",
                         where=at(pmark))
    detail = " ".join(part for part in (context, problem) if part)
    return SpecError(f"YAML syntax error: {detail}.", where=at(pmark or cmark),
                     hint="Check indentation and quoting around that position.")


def _runaway_quote(text: str, mark: yaml.Mark | None) -> yaml.ScalarToken | None:
    """The quoted string, spanning lines, that ends on the line where parsing failed: its quote is unclosed."""
    if mark is None:
        return None
    last = None
    try:
        for token in yaml.scan(text, Loader=yaml.SafeLoader):
            if token.start_mark.index >= mark.index:
                break
            if isinstance(token, yaml.ScalarToken):
                last = token
    except yaml.YAMLError:
        pass
    if (last is not None and last.style in ('"', "'") and last.start_mark.line < last.end_mark.line
            and last.end_mark.line == mark.line):
        return last
    return None


# ---------------------------------------------------------------------------------------------- building

def _compose(text: str) -> yaml.Node | None:
    """The node tree of a YAML document: libyaml's parser (about 40 times faster) where PyYAML has it, and the
    pure-Python one for any document libyaml refuses, so that a defect is always reported in the one set of
    words and places the messages here were written for (the two disagree on a few inputs: libyaml refuses a
    lone surrogate escape, and reports deep nesting as a scanner error rather than running out of stack).
    On a document both accept they build the same nodes, marks included (a test holds them equal)."""
    fast = getattr(yaml, "CSafeLoader", None)
    if fast is not None:
        try:
            return yaml.compose(text, Loader=fast)
        except (yaml.YAMLError, UnicodeError):
            pass
    return yaml.compose(text, Loader=yaml.SafeLoader)


_PLAIN_TAGS = {"str", "int", "float", "bool", "null", "seq", "map", "merge", "timestamp"}


class _Builder:
    """Turns a composed YAML node tree into plain data, recording positions and spending a node budget."""

    def __init__(self, origin: str) -> None:
        self.origin = origin
        self.marks: dict[KeyPath, str] = {}
        self.key_marks: dict[KeyPath, str] = {}
        self.budget = MAX_NODES
        self.seen: set[int] = set()
        self.aliased = False
        self.scalars = yaml.SafeLoader("")

    def _at(self, mark: yaml.Mark) -> str:
        return f"{self.origin}:{mark.line + 1}:{mark.column + 1}"

    def construct(self, node: yaml.Node, path: KeyPath) -> Any:
        self.budget -= 1
        self.aliased = self.aliased or id(node) in self.seen
        self.seen.add(id(node))
        if self.budget < 0 and self.aliased:
            raise SpecError(f"the spec's YAML aliases (*name) expand to more than {MAX_NODES:,} values, an alias "
                            "bomb (\"billion laughs\"); expected a spec of at most a few hundred values.",
                            where=self.origin, hint="Use fewer or shallower YAML aliases.")
        if self.budget < 0:
            raise SpecError(f"the spec holds more than {MAX_NODES:,} values; expected at most a few hundred.",
                            where=self.origin, hint="A spec describes commands; data belongs in files that setup "
                            "commands create.")
        where = self._at(node.start_mark)
        self.marks[path] = where
        if node.tag.startswith("!") or node.tag.rsplit(":", 1)[-1] not in _PLAIN_TAGS:
            raise SpecError(f"found the YAML tag {node.tag.replace('tag:yaml.org,2002:', '!!')!r}; expected plain "
                            "values (strings, numbers, lists, mappings) without tags.", where=where)
        if isinstance(node, yaml.MappingNode):
            out: dict[str, Any] = {}
            for key_node, value_node in node.value:
                key_where = self._at(key_node.start_mark)
                if not isinstance(key_node, yaml.ScalarNode):
                    raise SpecError("found a list or mapping used as a key; expected a plain name.", where=key_where)
                key = key_node.value
                if key == "<<" and key_node.tag == "tag:yaml.org,2002:merge":
                    raise SpecError("found a YAML merge key (<<); specs do not support merge keys, expected the "
                                    "keys written out.", where=key_where,
                                    hint="Copy the keys in, or share whole values with an anchor (&name) and alias (*name).")
                if key in out:
                    raise SpecError(f"key '{key}' appears twice in the same mapping; expected each key once.",
                                    where=key_where, hint="Remove one of them; YAML would silently keep only the last.")
                self.key_marks[path + (key,)] = key_where
                out[key] = self.construct(value_node, path + (key,))
            return out
        if isinstance(node, yaml.SequenceNode):
            return [self.construct(item, path + (i,)) for i, item in enumerate(node.value)]
        tag = node.tag.rsplit(":", 1)[-1]
        if isinstance(node, yaml.ScalarNode) and tag == "int" and len(node.value) > MAX_DIGITS:
            raise SpecError(f"found a number of {len(node.value):,} characters; expected a number of at most "
                            f"{MAX_DIGITS} digits.", where=where)
        try:
            value = self.scalars.construct_object(node)
        except yaml.YAMLError as exc:
            problem = getattr(exc, "problem", None) or str(exc)
            raise SpecError(f"found a value YAML cannot build ({problem}); expected a plain string, number, "
                            "list or mapping.", where=where) from None
        except (ValueError, KeyError, IndexError, TypeError, AttributeError, OverflowError):
            # An explicit tag on a value that does not fit it (!!int abc, !!bool maybe, !!timestamp x):
            # PyYAML's constructors raise whatever their conversion raises.
            raise SpecError(f"found {_short(node.value)} tagged !!{tag}, which is not a valid {tag}; expected a "
                            "plain value without a tag.", where=where) from None
        if isinstance(value, (datetime.date, datetime.datetime)):
            return node.value  # a date-looking string stays a string: the spec has no dates
        if isinstance(value, int) and not isinstance(value, bool) and not -2**63 <= value < 2**63:
            raise SpecError(f"found the number {_short(node.value)}, which is too large; expected a number "
                            f"of at most {MAX_DIGITS} digits.", where=where)
        return value


def _short(text: str) -> str:
    return repr(text) if len(text) <= 40 else repr(text[:40]) + "…"
