"""YAML to plain data, remembering where every value came from (file:line:column) for error messages."""
from __future__ import annotations

from pathlib import Path

import yaml

from .errors import SpecError

# A spec is a few hundred nodes; an alias bomb ("billion laughs") expands to millions.
MAX_NODES = 20_000
MAX_BYTES = 1_000_000


class Located:
    """Parsed YAML plus a map from a JSON path (tuple of keys/indexes) to 'file:line:column'."""

    def __init__(self, data, marks: dict[tuple, str], key_marks: dict[tuple, str], origin: str):
        self.data = data
        self.marks = marks
        self.key_marks = key_marks
        self.origin = origin

    def where_key(self, path) -> str:
        return self.key_marks.get(tuple(path)) or self.where(path)

    def where(self, path) -> str:
        path = tuple(path)
        while path and path not in self.marks:
            path = path[:-1]
        return self.marks.get(path, self.origin)


def load_located(path: Path) -> Located:
    origin = str(path)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise SpecError("spec file not found.", where=origin,
                        hint="Pass the path of a clirace YAML spec, e.g. fixtures/level3/clirace.yaml.") from None
    except IsADirectoryError:
        raise SpecError("is a directory, not a spec file.", where=origin) from None
    except OSError as exc:
        raise SpecError(f"cannot read the spec: {exc.strerror}.", where=origin) from None
    if len(raw) > MAX_BYTES:
        raise SpecError(f"the spec is {len(raw):,} bytes; a spec is at most {MAX_BYTES:,} bytes.", where=origin,
                        hint="A spec describes commands; data belongs in setup files.")
    if b"\x00" in raw:
        raise SpecError("the spec contains NUL bytes: it is a binary file, not YAML.", where=origin)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SpecError(f"the spec is not UTF-8 text (byte {exc.start}).", where=origin) from None
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"{origin}:{mark.line + 1}:{mark.column + 1}" if mark else origin
        problem = " ".join(str(p) for p in (exc.context, exc.problem) if p)
        raise SpecError(f"YAML syntax error: {problem}.", where=where,
                        hint="Check indentation and quoting around that position.") from None
    except yaml.YAMLError as exc:
        raise SpecError(f"YAML error: {exc}.", where=origin) from None
    if node is None:
        raise SpecError("the spec is empty.", where=origin,
                        hint="Start from the example in the README (version: 1, tool: ..., workloads: ...).")
    builder = _Builder(origin)
    data = builder.construct(node, ())
    return Located(data, builder.marks, builder.key_marks, origin)


class _Builder:
    """Turns a composed YAML node tree into plain data, recording positions and spending a node budget."""

    def __init__(self, origin: str):
        self.origin = origin
        self.marks: dict[tuple, str] = {}
        self.key_marks: dict[tuple, str] = {}
        self.budget = MAX_NODES
        self.scalars = yaml.SafeLoader("")

    def _at(self, mark) -> str:
        return f"{self.origin}:{mark.line + 1}:{mark.column + 1}"

    def construct(self, node, path):
        self.budget -= 1
        if self.budget < 0:
            raise SpecError(f"the spec expands to more than {MAX_NODES:,} values (an alias bomb?).",
                            where=self.origin, hint="Use fewer or shallower YAML aliases.")
        where = self._at(node.start_mark)
        self.marks[path] = where
        if isinstance(node, yaml.MappingNode):
            out = {}
            for key_node, value_node in node.value:
                if not isinstance(key_node, yaml.ScalarNode):
                    raise SpecError("a mapping key must be a plain name.", where=where)
                key = key_node.value
                key_where = self._at(key_node.start_mark)
                if key == "<<":
                    raise SpecError("YAML merge keys (<<) are not supported in specs.", where=key_where)
                if key in out:
                    raise SpecError(f"key '{key}' appears twice in the same mapping.", where=key_where,
                                    hint="Remove one of them; YAML would silently keep only the last.")
                self.key_marks[path + (key,)] = key_where
                out[key] = self.construct(value_node, path + (key,))
            return out
        if isinstance(node, yaml.SequenceNode):
            return [self.construct(item, path + (i,)) for i, item in enumerate(node.value)]
        try:
            return self.scalars.construct_object(node)
        except yaml.YAMLError as exc:
            raise SpecError(f"invalid value: {exc}.", where=where) from None
