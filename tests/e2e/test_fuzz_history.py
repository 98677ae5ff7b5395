"""Property: any mutation of a saved history ends in a HistoryError (exit 2) or a judged Result, never another
exception, and within a deadline. `clirace judge` reads histories that users keep, edit and pass around.

The base history comes from a real run made once per session (`--rounds 1 --only counter --only lock-excludes` on
fixtures/level3),
so the harness follows the history format as it changes. Hypothesis draws 500 mutants, derandomized: JSON
values replaced by other types, keys deleted or renamed, deep nests, huge numbers, hostile strings. No verdict of a
mutant may fail without a finding that says where it was seen, nor pass without naming the records it read.
"""
from __future__ import annotations

import json
import subprocess
import sys
import traceback
from datetime import timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clirace.cli import pipeline
from clirace.errors import HistoryError
from clirace.history import History

from ..conftest import FIXTURES, ROOT

EXAMPLES = 500
SETTINGS = settings(max_examples=EXAMPLES, deadline=timedelta(seconds=5), derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large], print_blob=True)
SCALARS = (st.none() | st.booleans() | st.integers() | st.sampled_from([10**30, -1, 0, 1.5, float("nan")])
           | st.sampled_from(["", "x", "\x1b]52;c;aGk=\x07", "\ud800", "counter", "pass", "fail", "inc-0"])
           | st.text(max_size=10))
VALUES = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=3)
                      | st.dictionaries(st.text(max_size=8), inner, max_size=3), max_leaves=5)
DEEP = "\ue000deep\ue000"


@pytest.fixture(scope="session")
def saved_history(tmp_path_factory) -> dict:
    path = tmp_path_factory.mktemp("history") / "level3.json"
    proc = subprocess.run([sys.executable, "-m", "clirace", "check", str(FIXTURES / "level3" / "clirace.yaml"),
                           "--rounds", "1", "--only", "counter", "--only", "lock-excludes", "--no-strace",
                           "--history", str(path),
                           "--format", "json"], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode in (0, 1), proc.stderr
    return json.loads(path.read_text())


def _paths(node, prefix=()):
    yield prefix
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _paths(value, prefix + (key,))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from _paths(value, prefix + (index,))


@st.composite
def mutants(draw, base: dict) -> str:
    data = json.loads(json.dumps(base))
    deep = 0
    for _ in range(draw(st.integers(1, 3))):
        paths = list(_paths(data))[1:]
        if not paths:
            break
        *parents, last = draw(st.sampled_from(paths))
        holder = data
        for part in parents:
            holder = holder[part]
        how = draw(st.sampled_from(["replace"] * 4 + ["delete", "delete", "rename", "empty", "deep"]))
        if how == "delete":
            del holder[last]
        elif how == "rename" and isinstance(holder, dict):
            holder[draw(st.text(max_size=6))] = holder.pop(last)
        elif how == "empty":
            holder[last] = {} if isinstance(holder[last], dict) else [] if isinstance(holder[last], list) else ""
        elif how == "deep" and not deep:
            holder[last], deep = DEEP, draw(st.sampled_from([50, 5000, 100_000]))
        else:
            holder[last] = draw(VALUES)
    text = json.dumps(data)
    if deep:
        text = text.replace(json.dumps(DEEP), "[" * deep + "1" + "]" * deep)
    return text


def judge_mutants(base: dict, scratch: Path) -> tuple[int, dict[str, str]]:
    """Run the property over EXAMPLES mutants of `base`; returns (mutants judged with a check that itself
    failed, {kind of crash: a mutant that caused it}). A crash is anything but HistoryError or a Result."""
    crashes: dict[str, str] = {}
    check_failures = []

    @SETTINGS
    @given(st.data())
    def property_(data):
        text = data.draw(mutants(base))
        scratch.write_text(text, errors="surrogatepass")
        try:
            try:
                history = History.load(scratch)
            except HistoryError:
                return
            result = pipeline.judge(history)
            assert isinstance(result, pipeline.Result)
        except Exception as exc:  # noqa: BLE001 - the property: nothing else may escape
            frame = traceback.extract_tb(exc.__traceback__)[-1]
            where = next((f"{Path(f.filename).name}:{f.lineno}" for f in reversed(traceback.extract_tb(
                exc.__traceback__)) if "clirace" in f.filename), f"{Path(frame.filename).name}:{frame.lineno}")
            crashes.setdefault(f"{type(exc).__name__} at {where}", text[:300])
            return
        if any("the check itself failed" in (v.summary or "") for v in result.verdicts.values()):
            check_failures.append(text[:300])  # a check that tried to fail without evidence or pass on nothing too
        for v in result.verdicts.values():  # one owner per failure (findings.Verdict refuses them at construction)
            assert v.status != "fail" or any(not f.advisory and f.evidence.trial for f in v.findings), v
            assert v.status != "pass" or v.read, v

    property_()
    return len(check_failures), crashes


@pytest.mark.e2e
@pytest.mark.timeout(400)  # 140 s measured at load 22 on 2 cores, with the lock trials in the base
def test_history_mutants_are_refused_or_judged(saved_history, tmp_path_factory):
    judged_with_failed_check, crashes = judge_mutants(saved_history, tmp_path_factory.mktemp("m") / "history.json")
    print(f"{len(crashes)} kinds of crash; {judged_with_failed_check} mutants judged with a check that failed")
    assert crashes == {}, "\n".join(f"{kind}: {text[:160]!r}" for kind, text in crashes.items())
    assert judged_with_failed_check == 0


@pytest.mark.e2e
@pytest.mark.timeout(60)
def test_a_400_digit_number_in_a_history_is_exit_2_naming_the_field(saved_history, tmp_path):
    data = json.loads(json.dumps(saved_history))
    data["trials"][0]["invocations"][0]["ended"] = 10**400  # a float field: float() of it overflows
    data["trials"][0]["invocations"][0]["stdout_bytes"] = 10**400  # an integer field
    path = tmp_path / "history.json"
    path.write_text(json.dumps(data))
    proc = subprocess.run([sys.executable, "-m", "clirace", "judge", str(path)], capture_output=True, text=True,
                          timeout=60, cwd=ROOT)
    assert proc.returncode == 2, proc.stderr
    assert "$.trials[0].invocations[0].ended" in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    data["trials"][0]["invocations"][0]["ended"] = 1.0
    path.write_text(json.dumps(data))
    proc = subprocess.run([sys.executable, "-m", "clirace", "judge", str(path)], capture_output=True, text=True,
                          timeout=60, cwd=ROOT)
    assert proc.returncode == 2 and "$.trials[0].invocations[0].stdout_bytes" in proc.stderr, proc.stderr
