"""The effects of the lock experiments' commands, read back once the holder has ended.

A lock command given `{key}` and `{value}` (lock.contender, the hold command) writes that key: each invocation of
a trial gets a key of its own, named as the spec's keys workload names its keys, and a value no other has. Once
the holder has ended, the trial reads them back the way that workload reads its keys: its config file, or its
read command once per key. The checks then hold every invocation that exited 0 to its key: one whose key is not
there was silent loss. A lock.contender without them (`config unset theme`) has its change read instead, where the
keys workload reads a config file: the file just before the contender (and the holder) start, and once the holder
has ended; the checks hold it to what the contender changed when run alone. A spec without a keys workload gives
no effect to read back: unknown, never lost.
"""
from __future__ import annotations

from typing import Any, TypedDict

from clirace.history.vocab import Outcome
from clirace.scenarios._box import Box
from clirace.scenarios.workloads import snapshot
from clirace.spec import Workload, placeholders, words

FIELDS = ("{key}", "{value}")


def writes_key(command: Any) -> bool:
    return any(field in arg for arg in words(command) for field in FIELDS)


class Effect(TypedDict, total=False):
    """The placeholders an invocation's effect fills: both or neither. Typed apart so that spreading them into
    Box.run or Box.start can never fill one of its own parameters."""
    key: str
    value: str


def values(box: Box, label: str, *commands: Any) -> Effect:
    """The {key} and {value} of the invocation `label`, noted in the trial's record as its effect, when one of its
    `commands` (argv, or the hold command's environment values) names them; {} otherwise."""
    if not any(writes_key(command) for command in commands):
        return {}
    written = box.fields.setdefault("effects", {})
    if label in written:
        key, value = written[label]
    else:
        n = len(written)
        workload = box.spec.workload("keys")
        key = placeholders.expand(workload.key if workload is not None else Workload.key, {"i": n})
        value = f"lock{n}-{box.token()}"
        written[label] = (key, value)
    return {"key": key, "value": value}


def state_before(box: Box) -> None:
    """Before lock.contender runs (and before a holder starts): the keys workload's config file, when the contender
    writes no key of its own, so that what it changed can be read once the holder has ended."""
    lock, workload = box.spec.lock, box.spec.workload("keys")
    if lock is None or writes_key(lock.contender) or workload is None or workload.config is None:
        return
    box.fields["state_before"] = snapshot(box, workload)


def read_back(box: Box) -> None:
    """Read back every key the trial's invocations wrote, unless it failed (its key may be absent): into the
    record's effects_config, or as get-LABEL invocations of the keys workload's read command. With a state_before,
    the config file is read whatever was written."""
    written: dict[str, tuple[str, str]] = box.fields.get("effects") or {}
    workload = box.spec.workload("keys")
    if workload is None or not (written or "state_before" in box.fields):
        return
    if workload.config is not None:
        box.fields["effects_config"] = snapshot(box, workload)
        return
    for label, (key, _value) in written.items():
        ran = [inv for inv in box.invocations if inv.label == label]
        if ran and ran[-1].outcome is not Outcome.FAIL:
            box.run(f"get-{label}", workload.read, key=key)
