"""The spec loader parses with libyaml where PyYAML has it and falls back to the pure-Python parser on any
document libyaml refuses: on every document both accept, the two must build the same nodes at the same
places, or an error message would point somewhere else depending on how PyYAML was installed."""
from __future__ import annotations

import pytest
import yaml

from clirace.spec import _yaml

from ..conftest import ROOT

CORPUS = sorted([*ROOT.glob("fixtures/**/*.yaml"), *ROOT.glob("docs/examples/*.yaml"),
                 *ROOT.glob("tests/specs/bad/*.yaml")])


def shape(node) -> list:
    """Every node of a tree with its kind, tag, value and marks (style aside: libyaml says '' for plain); a
    node met again through an alias is named by its first place, so an alias bomb is walked once."""
    out, stack, seen = [], [node], {}
    while stack:
        n = stack.pop()
        if n is None:
            out.append(None)
            continue
        if id(n) in seen:
            out.append(("again", seen[id(n)]))
            continue
        seen[id(n)] = len(out)
        value = n.value if isinstance(n, yaml.ScalarNode) else None
        out.append((type(n).__name__, n.tag, value, n.start_mark.line, n.start_mark.column,
                    n.end_mark.line, n.end_mark.column))
        if isinstance(n, yaml.MappingNode):
            stack.extend(part for pair in reversed(n.value) for part in reversed(pair))
        elif isinstance(n, yaml.SequenceNode):
            stack.extend(reversed(n.value))
    return out


@pytest.mark.skipif(not hasattr(yaml, "CSafeLoader"), reason="this PyYAML was built without libyaml")
def test_libyaml_and_pure_python_build_the_same_nodes():
    compared = 0
    for path in CORPUS:
        if path.stat().st_size > 100_000 or path.name == "deeply_nested.yaml":
            continue  # refused before they are parsed (size, nesting); the pure-Python scanner takes 1 s on the second
        try:
            text = path.read_bytes().decode("utf-8")
        except UnicodeDecodeError:
            continue
        try:
            slow = yaml.compose(text, Loader=yaml.SafeLoader)
            fast = yaml.compose(text, Loader=yaml.CSafeLoader)
        except (yaml.YAMLError, RecursionError):
            continue  # refused by one: the loader then uses the pure-Python parser's verdict
        assert shape(fast) == shape(slow), path
        compared += 1
    assert compared >= 100


def test_a_document_libyaml_refuses_is_judged_by_the_pure_python_parser():
    lone_surrogate = 'version: 1\nx: "\\uD800"\n'  # PyYAML accepts the escape, libyaml does not
    assert _yaml._compose(lone_surrogate).value[1][1].value == "\ud800"
