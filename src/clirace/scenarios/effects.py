"""The effects of the lock experiments' commands, read back once the holder has ended.

A lock command given `{key}` and `{value}` (lock.contender, the hold command) writes that key: each invocation of
a trial gets a key of its own, named as the spec's keys workload names its keys, and a value no other has. Once
the holder has ended, the trial reads them back the way that workload reads its keys: its config file, or its
read command once per key. The checks then hold every invocation that exited 0 to its key: one whose key is not
there was silent loss. A command without them, or a spec without a keys workload, gives no effect to read back:
unknown, never lost.
"""
from __future__ import annotations

from typing import Any

from .. import placeholders
from ..spec import Workload
from ..vocab import Outcome
from ._box import Box
from .workloads import snapshot

FIELDS = ("{key}", "{value}")


def writes_key(command: Any) -> bool:
    return any(field in arg for arg in command or () for field in FIELDS)


def values(box: Box, label: str, *commands: Any) -> dict[str, str]:
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


def read_back(box: Box) -> None:
    """Read back every key the trial's invocations wrote, unless it failed (its key may be absent): into the
    record's effects_config, or as get-LABEL invocations of the keys workload's read command."""
    written: dict[str, tuple[str, str]] = box.fields.get("effects") or {}
    workload = box.spec.workload("keys")
    if not written or workload is None:
        return
    if workload.config is not None:
        box.fields["effects_config"] = snapshot(box, workload)
        return
    for label, (key, _value) in written.items():
        ran = [inv for inv in box.invocations if inv.label == label]
        if ran and ran[-1].outcome is not Outcome.FAIL:
            box.run(f"get-{label}", workload.read, key=key)
