"""The history is the contract: it round-trips exactly, refuses what it cannot read with the JSON path, and
keeps raw observations only, so that a saved history is judged by today's checks."""
import json
import os

import pytest

from clirace.cli.pipeline import judge
from clirace.errors import HistoryError
from clirace.history import ConfigSnapshot, History, KeysRound, LockConflict
from clirace.history.vocab import ConfigFormat, EventKind
from clirace.spec.configfile import Unparseable

from .histories import event, history, inv, saveable


def keys_round(text='{"cliracek0": "v0"}'):
    return KeysRound(workload="keys#0", invocations=(inv("set-0"),), keys={"set-0": ("cliracek0", "v0")},
                     config=ConfigSnapshot("/c.json", ConfigFormat.JSON, "{key}", text))


def saved(tmp_path, h):
    path = tmp_path / "h.json"
    saveable(h).save(path)
    return path


def test_a_history_round_trips_to_the_same_records_and_verdicts(tmp_path):
    h = history(keys_round(), LockConflict(invocations=(inv("baseline"), inv("contender", 1)),
                                           events=(event(EventKind.HELD, 0.0),)))
    loaded = History.load(saved(tmp_path, h))
    assert loaded == h
    assert {k: v.to_dict() for k, v in judge(loaded).verdicts.items()} == \
        {k: v.to_dict() for k, v in judge(h).verdicts.items()}


def test_a_changed_check_changes_the_verdict_of_a_saved_history(tmp_path, monkeypatch):
    """Nothing judged at launch time survives in the history: re-judging uses the checks of today."""
    path = saved(tmp_path, history(keys_round()))
    assert judge(History.load(path)).verdicts["keys"].status == "pass"

    def stricter(text, fmt):
        raise Unparseable("a stricter parser")
    monkeypatch.setattr("clirace.checks._read.parse", stricter)
    assert [f.code for f in judge(History.load(path)).verdicts["keys"].findings] == ["CR113"]


def test_an_unknown_version_is_refused_with_a_message(tmp_path):
    path = saved(tmp_path, history(keys_round()))
    data = json.loads(path.read_text())
    data["version"] = 99
    path.write_text(json.dumps(data))
    with pytest.raises(HistoryError, match="version 99"):
        History.load(path)
    old = {"format": "clirace-history/1", "spec_path": "x", "seed": 1, "trials": []}
    path.write_text(json.dumps(old))
    with pytest.raises(HistoryError, match="version 1"):
        History.load(path)


@pytest.mark.parametrize("mutate,where", [
    (lambda d: d["trials"][0].update(kind="nonsense"), "$.trials[0].kind"),
    (lambda d: d["trials"][0].update(round="1"), "$.trials[0].round"),
    (lambda d: d["trials"][0]["invocations"][0].update(exit_code=True), "$.trials[0].invocations[0].exit_code"),
    (lambda d: d["trials"][0]["keys"].update({"set-0": ["k"]}), "$.trials[0].keys.set-0"),
    (lambda d: d["trials"][0]["config"].update(format="xml"), "$.trials[0].config.format"),
    (lambda d: d["trials"][0].update(facts={}), "$.trials[0].facts"),
    (lambda d: d.update(options=None), "$.options"),
])
def test_a_damaged_history_is_refused_with_the_json_path(tmp_path, mutate, where):
    path = saved(tmp_path, history(keys_round()))
    data = json.loads(path.read_text())
    mutate(data)
    path.write_text(json.dumps(data))
    with pytest.raises(HistoryError) as caught:
        History.load(path)
    assert where in str(caught.value)


def test_a_history_above_the_bound_a_fifo_or_a_device_is_refused_without_reading(tmp_path, monkeypatch):
    from clirace import history as module
    path = saved(tmp_path, history(keys_round()))
    monkeypatch.setattr(module, "MAX_BYTES", path.stat().st_size - 1)
    with pytest.raises(HistoryError, match="larger than"):
        History.load(path)
    monkeypatch.undo()
    huge = tmp_path / "huge.json"
    with open(huge, "wb") as handle:  # sparse: its size is read, never its bytes
        handle.truncate(module.MAX_BYTES + 1)
    with pytest.raises(HistoryError, match=f"larger than {module.MAX_BYTES >> 20} MiB"):
        History.load(huge)
    fifo = tmp_path / "history.fifo"
    os.mkfifo(fifo)
    for special in (fifo, "/dev/zero", tmp_path):
        with pytest.raises(HistoryError, match="not a regular file|Is a directory"):
            History.load(special)


def test_old_histories_load_with_the_new_fields_at_their_defaults(tmp_path):
    path = saved(tmp_path, history(keys_round()))
    data = json.loads(path.read_text())
    del data["not_removed"], data["spec_places"]
    for name in ("isolation", "isolation_note"):
        del data["environment"][name]
    loaded = History.from_json(data)
    assert loaded.not_removed == () and loaded.environment.isolation == "" and loaded.spec_places == {}
    data["spec_places"] = {"lock": {"line": "3", "column": 1}}  # a position is a number: a damaged one is named
    with pytest.raises(HistoryError, match=r"\$\.spec_places\.lock\.line is \"3\"; expected"):
        History.from_json(data)


def test_the_run_options_are_saved_as_older_histories_hold_them(tmp_path):
    """One options type serves the command line and the history (RunOptions): what a history saves of it is
    exactly the keys histories always held, so older ones load and newer ones load in an older clirace."""
    from clirace.history import RunOptions, new_seed
    older = {"seed": 42, "rounds": 3, "parallel": None, "budget": 1.5, "only": ["counter"], "strace": False,
             "allow_outside_sandbox": True, "confidence": 0.99, "rate": 0.1, "shard": "2/3"}
    path = saved(tmp_path, history(keys_round()))
    data = json.loads(path.read_text())
    data["options"] = older
    loaded = History.from_json(data)
    assert loaded.options == RunOptions(seed=42, rounds=3, budget=1.5, only=("counter",), strace=False,
                                        allow_outside_sandbox=True, confidence=0.99, rate=0.1, shard="2/3")
    assert loaded.to_json()["options"] == older
    assert 1 <= new_seed() < 2**31
