"""What a target prints is untrusted: it cannot crash the judge or sway it. Deep JSON, floods of braces, output
cut at the history's cap, invalid UTF-8 and lone surrogates in a saved history; regex limits in CPU time."""
import dataclasses
import json
import time

import pytest

from clirace.checks import lock_structured, lock_wait
from clirace.checks.lockerror import find_error, json_objects
from clirace.cli.pipeline import judge
from clirace.history import OUTPUT_CAP, History, LockConflict
from clirace.history.vocab import EventKind, HoldMode
from clirace.report import RENDERERS
from clirace.spec import patterns

from .histories import event, history, inv, saveable
from .test_lock_checks import ENVELOPE, waited

DEEP = '{"a":' * 30_000


def conflict(contender):
    return history(LockConflict(invocations=(contender,), events=(event(EventKind.HELD, 0.0),), prompt=5.0,
                                hold=HoldMode.PARK))


@pytest.mark.parametrize("text", [DEEP, DEEP + "1" + "}" * 30_000, "[" * 30_000, "{" * 30_000, "{x}" * 20_000,
                                  '{"a": "' + "\\" * 10_001 + '"}', "Error: " + DEEP + ENVELOPE])
def test_no_printed_text_raises_in_the_json_reader(text):
    found = list(json_objects(text))
    assert all(isinstance(obj, dict) for obj in found)


def test_the_lock_error_is_found_beside_noise_a_deep_object_and_braces_in_strings():
    envelope = json.loads(ENVELOPE)
    for text in ("Error: " + ENVELOPE, "progress {50%\n" + ENVELOPE, DEEP + "\n" + ENVELOPE,
                 '{"note": "a } and a {"}\n' + ENVELOPE, "{not json " + ENVELOPE + "}"):
        assert envelope in list(json_objects(text)), text[:60]
        assert find_error(text, "").says_lock_held


def test_deep_json_as_the_lock_error_gets_a_verdict_not_a_bug():
    for check in (lock_structured,):
        v = check.check(conflict(inv("contender", 4, stdout=DEEP)))
        assert v.status == "fail" and [f.code for f in v.findings] == ["CR202"], v
    assert judge(conflict(inv("contender", 4, stderr=DEEP))).verdicts["lock-error-structured"].status == "fail"


def test_an_error_cut_at_the_history_cap_decides_nothing_it_could_not_decide_whole():
    big = json.dumps({"error": {"code": "LOCK_HELD", "retry_after_ms": 5, "pad": "x" * (10 << 20)}})
    cut = inv("contender", 4, stdout=big[:OUTPUT_CAP])
    cut = dataclasses.replace(cut, stdout_bytes=len(big))
    v = lock_structured.check(conflict(cut))
    assert v.status == "unknown" and "more than the 64 KiB" in v.summary and not v.findings, v
    whole_but_cut_after = dataclasses.replace(cut, stdout=ENVELOPE + "x" * 100)
    assert lock_structured.check(conflict(whole_but_cut_after)).status == "pass"  # the error itself was kept whole
    wait = waited(4, 1050, stdout=big[:OUTPUT_CAP])
    wait = dataclasses.replace(wait, invocations=tuple(
        dataclasses.replace(i, stdout_bytes=len(big)) if i.label == "contender" else i for i in wait.invocations))
    assert lock_wait.check(history(wait)).status == "unknown"


def test_a_saved_history_with_invalid_text_judges_and_renders_in_every_format(tmp_path):
    h = conflict(inv("contender", 4, stdout="\udcff\udc80 not utf-8 \ud800", stderr="\x00\x1b[31m"))
    saveable(h).save(tmp_path / "h.json")
    result = judge(History.load(tmp_path / "h.json"))
    assert result.verdicts["lock-error-structured"].status == "fail"
    for _name, render in RENDERERS.items():
        render(result).encode("utf-8")  # printable as it is: no lone surrogate survives the load


class _Slow:
    """A regex whose search needs `needs` seconds of wall time but almost no CPU: a starved thread."""

    def __init__(self, needs: float):
        self.needs, self.walls = needs, []

    def search(self, text, timeout):
        self.walls.append(timeout)
        if timeout < self.needs:
            time.sleep(0.001)
            raise TimeoutError
        return "match"


def test_a_regex_bound_counts_cpu_so_a_busy_machine_gets_the_same_answer():
    starved = _Slow(needs=0.35)
    assert patterns.cpu_bounded(starved, "text", 0.1) == "match"  # given more wall time: it used little CPU
    assert starved.walls == [0.1, 0.2, 0.4]
    never = _Slow(needs=100)
    with pytest.raises(TimeoutError):
        patterns.cpu_bounded(never, "text", 0.1)
    assert never.walls[-1] == patterns.MAX_STRETCH * 0.1
