"""Property: any mutation of a bundled spec ends in a Spec or a SpecError (exit 2), never another exception,
and within a deadline. Hypothesis draws the mutants, derandomized with a fixed budget, so every run draws the
same ones: 250 + 250 in the fast subset (about 2.5 s), and 500 + 500 more from another fixed seed in the full
suite (marked e2e for its time, although it launches nothing).

Two kinds of mutants: of the YAML text (cut, insert a troublesome token, duplicate or swap lines), which
exercise the YAML reader and its messages; and of the parsed data (replace a value by another type, a huge
number, a hostile string, a deep nest; delete or add a key), dumped back, which reach the schema and the
semantic checks. Each mutant is written beside symlinks to its spec's own files, so that {spec_dir}/tool.py
exists and a mutant gets as far into load_spec as its defect allows.
"""
from __future__ import annotations

import copy
import functools
import itertools
import json
import os
import re
from datetime import timedelta
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from clirace.errors import SpecError
from clirace.spec import Spec, load_spec

from ..conftest import ROOT

EXAMPLES, DEEP_EXAMPLES = 250, 500
_COMMON = dict(deadline=timedelta(seconds=5), database=None, print_blob=True,
               suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
SETTINGS = settings(max_examples=EXAMPLES, derandomize=True, **_COMMON)
DEEP_SETTINGS = settings(max_examples=DEEP_EXAMPLES, **_COMMON)  # with @seed: fixed, and other mutants than SETTINGS's
BUNDLED = sorted([*ROOT.glob("fixtures/**/*.yaml"), *ROOT.glob("docs/examples/*.yaml")])

TOKENS = [": ", "- ", "[", "]", "{", "}", ",", "&a ", "*a", "<<: *a\n", "!!int ", "!!bool ", "!!timestamp ",
          "!!python/object/apply:os.system ", "!binary ", "\t", "\x00", "'", '"', "\n", "\n  ", "#", "|\n", ">-\n",
          "{sandbox}", "{nope}", "{spec_dir}/", "/tmp/x", "..", "\\uD800", "\\0", "1e999", ".nan", "-1", "0ms",
          "1s\\n", "x{99999999999}", "(a+)+$", "(\\d+)|(\\d+)", "9" * 30, "\u202e", "t\u014dol", "---\n", "...\n",
          "\x7f", "\x1b[31m", "\x01", "\x80", "\ufffe"]  # characters YAML refuses, found by an index only
HOSTILE_STRINGS = st.sampled_from(["", " ", "\x00", "\ud800", "x" * 200_000, "{sandbox}/../..", "{nope}", "/",
                                   "{spec_dir}/state.json", "(a|aa)+$", "(", "1s\n", "0ms", "-5s", "\u202e",
                                   "PATH", "/nonexistent", "{config_home}", "{home}/", "a\nb"]) | st.text(max_size=20)
NUMBERS = st.sampled_from([0, -1, 1, 2, 64, 65, 10**19, 10**100, 0.0, -0.5, 1e308, float("inf"), float("nan")])
SCALARS = st.none() | st.booleans() | NUMBERS | st.integers() | HOSTILE_STRINGS
VALUES = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
    st.sampled_from(["command", "kind", "run", "read", "path", "fifo", "env", "x", "value"]), inner, max_size=3),
    max_leaves=6)


@pytest.fixture(scope="module")
def homes(tmp_path_factory) -> dict[Path, Path]:
    """For each bundled spec, a scratch directory holding symlinks to the files beside it."""
    out = {}
    for n, spec in enumerate(BUNDLED):
        home = tmp_path_factory.mktemp(f"spec{n}")
        for sibling in spec.parent.iterdir():
            (home / sibling.name).symlink_to(sibling)
        out[spec] = home
    return out


# Errors about the file as a whole, which have no position to name.
WHOLE_FILE = ("the spec is empty", "only comments and blank lines", "expected at most 1,000,000 bytes", "alias bomb",
              "more than 20,000 values")


def check(home: Path, text: str | bytes) -> None:
    target = home / "mutant.yaml"
    if target.is_symlink():
        target.unlink()
    target.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8", "surrogatepass"))
    try:
        result = load_spec(target)
    except SpecError as exc:
        paragraph = exc.paragraph()
        assert paragraph and str(target) in paragraph, paragraph
        if not any(whole in paragraph for whole in WHOLE_FILE):  # any other defect is somewhere: say where
            assert re.search(re.escape(str(target)) + r":\d+:\d+", paragraph), paragraph
        return
    assert isinstance(result, Spec)


# ------------------------------------------------------------------------------------------- text mutants

@st.composite
def text_mutants(draw):
    spec = draw(st.sampled_from(BUNDLED))
    text = spec.read_text()
    for _ in range(draw(st.integers(1, 3))):
        lines = text.splitlines(keepends=True)
        how = draw(st.sampled_from(["insert", "cut", "replace", "duplicate", "swap"]))
        at = draw(st.integers(0, len(text)))
        if how == "insert":
            text = text[:at] + draw(st.sampled_from(TOKENS)) + text[at:]
        elif how == "cut":
            text = text[:at] + text[at + draw(st.integers(1, 40)):]
        elif how == "replace":
            text = text[:at] + draw(st.sampled_from(TOKENS)) + text[at + draw(st.integers(1, 10)):]
        elif lines:
            i, j = draw(st.integers(0, len(lines) - 1)), draw(st.integers(0, len(lines) - 1))
            if how == "duplicate":
                lines.insert(j, lines[i])
            else:
                lines[i], lines[j] = lines[j], lines[i]
            text = "".join(lines)
    return spec, text


@pytest.mark.timeout(180)
@SETTINGS
@given(text_mutants())
def test_text_mutants_load_or_are_refused(homes, mutant):
    spec, text = mutant
    check(homes[spec], text)


@pytest.mark.e2e
@pytest.mark.timeout(300)
@DEEP_SETTINGS
@seed(18_2026)
@given(text_mutants())
def test_more_text_mutants_load_or_are_refused(homes, mutant):
    spec, text = mutant
    check(homes[spec], text)


# ------------------------------------------------------------------------------------------- data mutants

def _paths(node, prefix=()):
    yield prefix
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _paths(value, prefix + (key,))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from _paths(value, prefix + (index,))


DEEP = "\ue000deep\ue000"  # replaced by a deep nest after dumping (a dumper would recurse that deep)


@functools.cache
def parsed(spec: Path):
    """A bundled spec's data, parsed once: YAML's pure-Python reader was two thirds of each draw's time."""
    return yaml.safe_load(spec.read_text())


@st.composite
def data_mutants(draw):
    spec = draw(st.sampled_from(BUNDLED))
    data = copy.deepcopy(parsed(spec))  # the mutant's own copy: mutating it leaves the cached parse whole
    deep = 0
    for _ in range(draw(st.integers(1, 2))):
        path = draw(st.sampled_from(list(_paths(data))[1:]))
        *parents, last = path
        holder = data
        for part in parents:
            holder = holder[part]
        how = draw(st.sampled_from(["alike"] * 4 + ["replace"] * 2 + ["delete", "add", "deep"]))
        if how == "alike":  # a value of the same type: gets past the schema, into the semantic checks
            old = holder[last]
            holder[last] = draw(HOSTILE_STRINGS if isinstance(old, str) else NUMBERS
                                if isinstance(old, (int, float)) and not isinstance(old, bool)
                                else st.lists(HOSTILE_STRINGS, min_size=1, max_size=3) if isinstance(old, list)
                                else VALUES)
        elif how == "delete":
            del holder[last]
        elif how == "add" and isinstance(holder, dict):
            holder[draw(st.sampled_from(["extra", "timeout", "value", "config", "key", "query", "prompt"]))] = \
                draw(VALUES)
        elif how == "deep" and not deep:
            holder[last], deep = DEEP, draw(st.sampled_from([40, 1000, 100_000]))
        else:
            holder[last] = draw(VALUES)
    text = json.dumps(data)  # JSON is YAML (its \uXXXX escapes too); yaml.safe_dump refuses lone surrogates
    if deep:
        text = text.replace(json.dumps(DEEP), "[" * deep + "1" + "]" * deep)
    return spec, text


@pytest.mark.timeout(180)
@SETTINGS
@given(data_mutants())
def test_data_mutants_load_or_are_refused(homes, mutant):
    spec, text = mutant
    check(homes[spec], text)


@pytest.mark.e2e
@pytest.mark.timeout(300)
@DEEP_SETTINGS
@seed(18_2026)
@given(data_mutants())
def test_more_data_mutants_load_or_are_refused(homes, mutant):
    spec, text = mutant
    check(homes[spec], text)


def test_the_bundled_specs_load(homes):
    for spec in BUNDLED:
        if spec.name == "noexec.yaml":
            continue  # a spec error on purpose (the tool is not executable)
        check(homes[spec], spec.read_text())


def test_budget_is_fixed():
    assert SETTINGS.max_examples >= 250 and SETTINGS.derandomize and DEEP_SETTINGS.max_examples >= 500 and len(BUNDLED) >= 10
    assert list(itertools.islice(_paths({"a": [1]}), 3)) == [(), ("a",), ("a", 0)]
    assert os.path.basename(str(BUNDLED[0])).endswith(".yaml")
