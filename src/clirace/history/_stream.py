"""One JSON object read from a file a piece at a time: its members whole, except one array member whose elements come
one by one. A saved history is mostly its `trials` array (a 10,000-round history is hundreds of MB): reading the
whole text and then the whole tree of dicts it makes held both at once, several times the file's size. Here each
element is parsed by the standard library's own scanner (json.JSONDecoder.raw_decode, in C) from a window of the
file, handed on, and dropped, so that only the window and the caller's records are kept.

Hand-written rather than a streaming library: the element parser is the stdlib's C scanner, and this module only
walks the object's own braces, commas and colons. ijson's pure-Python backend is slower than that, and its C
backend needs libyajl on every machine.
"""
from __future__ import annotations

import codecs
import json
from collections.abc import Iterator
from typing import Any, BinaryIO

CHUNK = 1 << 20  # characters read at a time; a member or element larger than this grows the window
_WHITESPACE = " \t\n\r"


class StreamError(ValueError):
    """Not JSON, or not one JSON object: `offset` is the character offset in the file where it went wrong."""
    def __init__(self, message: str, offset: int):
        super().__init__(f"{message}: char {offset}")
        self.offset = offset


class NotAnObject(Exception):
    """The text starts with something other than a JSON object (an array, a string, a number, a word)."""


class TooLarge(Exception):
    """More than the bound of bytes was read."""


class _Window:
    """The file's text from `start` (its offset in the file, in characters) on, refilled on demand."""

    def __init__(self, handle: BinaryIO, limit: int):
        self._handle, self._limit, self._read = handle, limit, 0
        self._decoder = codecs.getincrementaldecoder("utf-8-sig")("strict")
        self.text, self.pos, self.start, self.ended = "", 0, 0, False

    def more(self) -> bool:
        """Read the next chunk onto the window (dropping what has been consumed); False at the end of the file."""
        if self.ended:
            return False
        raw = self._handle.read(CHUNK)
        self._read += len(raw)
        if self._read > self._limit:
            raise TooLarge
        try:
            text = self._decoder.decode(raw, final=not raw)
        except UnicodeDecodeError as exc:
            raise StreamError(f"not UTF-8 ({exc.reason})", self.start + len(self.text)) from None
        self.start += self.pos
        self.text, self.pos = self.text[self.pos:] + text, 0
        self.ended = not raw
        return True

    def skip_space(self) -> str:
        """The next character that is not whitespace ("" at the end of the file), left unconsumed."""
        while True:
            while self.pos < len(self.text) and self.text[self.pos] in _WHITESPACE:
                self.pos += 1
            if self.pos < len(self.text):
                return self.text[self.pos]
            if not self.more():
                return ""

    def expect(self, chars: str, what: str) -> str:
        found = self.skip_space()
        if not found or found not in chars:
            raise StreamError(f"Expecting {what}", self.start + self.pos)
        self.pos += 1
        return found

    def value(self, decoder: json.JSONDecoder) -> Any:
        """The next whole JSON value. The window grows until it holds it: a value cut by the window's end fails to
        parse and is tried again with more text (so a value costs its parse about twice, not once per chunk)."""
        self.skip_space()
        while True:
            try:
                value, end = decoder.raw_decode(self.text, self.pos)
            except json.JSONDecodeError as exc:
                if not self.ended and self._needs_more(exc):
                    grow = max(CHUNK, len(self.text) - self.pos)  # doubling: a large value is parsed O(log n) times
                    while len(self.text) - self.pos < 2 * grow and self.more():
                        pass
                    continue
                raise StreamError(exc.msg, self.start + exc.pos) from None
            # A number that ends exactly at the window's end may go on in the next chunk ("12" of "1234").
            if end == len(self.text) and not self.ended and isinstance(value, (int, float)):
                self.more()
                continue
            self.pos = end
            return value

    def _needs_more(self, exc: json.JSONDecodeError) -> bool:
        """Whether the error is the end of the window rather than of the text (any error near the end may be a token
        cut in two: "tru" of "true", a string's escape)."""
        return exc.pos >= len(self.text) - 16 or "Unterminated string" in exc.msg


def members(handle: BinaryIO, limit: int, streamed: str) -> Iterator[tuple[str, Any]]:
    """(key, value) for each member of the one JSON object in `handle`, in file order; the member named `streamed`,
    when it is an array, comes as (key, elements): an iterator of its elements, which must be consumed before the
    next member is read. At most `limit` bytes are read (TooLarge beyond); NotAnObject when the text starts with
    another value; StreamError where it is not JSON (a duplicate key comes twice; the caller keeps the last, as json.loads does)."""
    window = _Window(handle, limit)
    decoder = json.JSONDecoder()
    first = window.skip_space()
    if first and first != "{":
        raise NotAnObject
    window.expect("{", "value")
    if window.skip_space() == "}":
        window.pos += 1
    else:
        while True:
            if window.skip_space() != '"':
                raise StreamError("Expecting property name enclosed in double quotes", window.start + window.pos)
            key = window.value(decoder)
            window.expect(":", "':' delimiter")
            if key == streamed and window.skip_space() == "[":
                window.pos += 1
                yield key, _elements(window, decoder)
            else:
                yield key, window.value(decoder)
            if window.expect(",}", "',' delimiter") == "}":
                break
    if window.skip_space():
        raise StreamError("Extra data", window.start + window.pos)


def _elements(window: _Window, decoder: json.JSONDecoder) -> Iterator[Any]:
    if window.skip_space() == "]":
        window.pos += 1
        return
    while True:
        yield window.value(decoder)
        if window.expect(",]", "',' delimiter") == "]":
            return

