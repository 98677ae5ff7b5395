"""A saved history is read as a stream (history/_stream.py): whatever the window's size, and wherever it cuts the
text (inside a string, an escape, a number, a key), it reads the same records as json.loads of the whole text, and
a history of many rounds judges to the same verdict through either reading."""
import json

import pytest

from clirace.cli.pipeline import judge
from clirace.errors import HistoryError
from clirace.history import CounterRound, FileOp, History, KeysRound, _stream

from .histories import history, inv, saveable

WRITE = ("O_CREAT", "O_TRUNC", "O_WRONLY")


def _round(n: int) -> CounterRound:
    """A traced round of two increments that both rewrote the state in place: a lost update every third round."""
    box = f"/tmp/box-{n:04x}"
    ops = (FileOp(100 + n, "openat", (f"{box}/home/state",), True, ("O_RDONLY",), fd=3, at=1.5e9 + n / 7),
           FileOp(100 + n, "openat", (f"{box}/home/state",), True, WRITE, writes=True, args=f'"{box}/home/state" ü\\"'),
           FileOp(100 + n, "write", (f"{box}/home/state",), True, writes=True, fd=3, args="3, \"12345678901234\""))
    after = "1" if n % 3 == 0 else "2"
    return CounterRound(name="counter", workload="counter#0", round=n, amplified=bool(n % 2), sandbox=box, start=0,
                        invocations=(inv("inc-0", started=0.1, ended=0.123456789), inv("inc-1", stderr="é \x1b[2J ✓"),
                                     inv("read-after", stdout=after)),
                        traces={"inc-0": ops, "inc-1": ops} if n % 2 else {})


def _many(rounds: int) -> History:
    keys = KeysRound(name="keys", workload="keys#1", invocations=(inv("set-0"),), keys={"set-0": ("k0", "ünï\ud7ff")})
    return saveable(history(*[_round(n) for n in range(rounds)], keys))


def _verdicts(h: History) -> dict:
    return {check: verdict.to_dict() for check, verdict in judge(h).verdicts.items()}


@pytest.mark.parametrize("chunk", [1, 2, 7, 64, 4096])
def test_any_window_reads_the_records_json_loads_reads(tmp_path, monkeypatch, chunk):
    path = tmp_path / "h.json"
    _many(12).save(path)
    whole = History.from_json(json.loads(path.read_text()))
    monkeypatch.setattr(_stream, "CHUNK", chunk)
    assert History.load(path) == whole


def test_a_history_of_many_rounds_judges_the_same_streamed_as_read_whole(tmp_path, monkeypatch):
    h = _many(300)
    path = tmp_path / "h.json"
    h.save(path)
    monkeypatch.setattr(_stream, "CHUNK", 1000)  # every round is cut by the window's end somewhere
    streamed = _verdicts(History.load(path))
    assert streamed == _verdicts(History.from_json(json.loads(path.read_text()))) == _verdicts(h)
    assert streamed["counter"]["status"] == "fail"  # the lost updates are found: the verdict is not empty


def test_members_in_another_order_and_a_key_given_twice_read_as_json_loads_reads_them(tmp_path, monkeypatch):
    data = json.loads(_many(3).text())
    reordered = {"trials": data["trials"], **{k: v for k, v in data.items() if k != "trials"}}
    path = tmp_path / "h.json"
    path.write_text(json.dumps(reordered))
    monkeypatch.setattr(_stream, "CHUNK", 5)
    assert History.load(path) == History.from_json(data)
    text = json.dumps(data)
    path.write_text(text[:-1] + ', "trials": []}')  # the last "trials" counts, as with json.loads
    assert History.load(path).trials == []


@pytest.mark.parametrize("text,said", [
    ('{"format": "clirace-history", "version": 2, "plan": [], "trials": [{"kind": "counter",', "not JSON"),
    ('{"format": "clirace-history" "version": 2}', "not JSON (Expecting ',' delimiter: char 29)"),
    ('{"format": "clirace-history"} {}', "not JSON (Extra data: char 30)"),
    ('[1, 2]', "not a clirace-history file"),
    ('"clirace-history"', "not a clirace-history file"),
    ('', "not JSON"),
    ('{"format": "clirace-history", "version": 2, "plan": [], "trials": [' + "[" * 100_000 + "]" * 100_000 + "]}",
     "not JSON"),
])
def test_what_is_not_one_json_object_is_refused_with_where(tmp_path, monkeypatch, text, said):
    path = tmp_path / "h.json"
    path.write_text(text)
    monkeypatch.setattr(_stream, "CHUNK", 8)
    with pytest.raises(HistoryError) as caught:
        History.load(path)
    assert said in str(caught.value)


def test_a_refused_record_names_its_json_path_when_streamed(tmp_path, monkeypatch):
    data = json.loads(_many(4).text())
    data["trials"][3]["traces"]["inc-1"][2]["fd"] = "3"
    path = tmp_path / "h.json"
    path.write_text(json.dumps(data, indent=1))
    monkeypatch.setattr(_stream, "CHUNK", 16)
    with pytest.raises(HistoryError, match=r"\$\.trials\[3\]\.traces\.inc-1\[2\]\.fd is \"3\"; expected an integer"):
        History.load(path)


def test_a_history_is_read_up_to_its_bound_and_no_further(tmp_path, monkeypatch):
    """The bound holds while the file is read, not only by its size beforehand (a file may grow meanwhile)."""
    from clirace import history as module
    path = tmp_path / "h.json"
    _many(3).save(path)
    monkeypatch.setattr(module, "MAX_BYTES", path.stat().st_size)
    History.load(path)  # at the bound: read
    monkeypatch.setattr(_stream, "CHUNK", 64)
    with open(path, "rb") as handle, pytest.raises(_stream.TooLarge):
        for key, value in _stream.members(handle, path.stat().st_size - 1, "trials"):
            list(value) if key == "trials" else None


def test_a_record_without_a_field_it_requires_is_refused_even_with_optional_fields_given(tmp_path):
    data = json.loads(_many(1).text())
    del data["plan"]
    data["plan"] = [{"part": "x", "trials": 1, "checks": []}]  # Planned requires `experiment`; it has three others
    path = tmp_path / "h.json"
    path.write_text(json.dumps(data))
    with pytest.raises(HistoryError, match=r"\$\.plan\[0\]\.experiment is missing; expected a value"):
        History.load(path)
