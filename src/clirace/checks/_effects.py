"""The keys the lock experiments' commands wrote ({key} and {value} in lock.contender or the hold command), read
back once the holder had ended: which invocations that exited 0 lost theirs. Shared by the lock checks and the
reference runs' judgement (a contender's key must be found when it runs alone)."""
from __future__ import annotations

import json

from clirace.checks._read import unread_of, values_of
from clirace.checks.lockerror import succeeded
from clirace.errors import Undecided, Unparseable
from clirace.history import Alone, ConfigSnapshot, History, LockRelease, LockTrial
from clirace.spec.configfile import parse

Lost = tuple[str, str, str, "str | None"]  # label, key, value, what was found instead (None: nothing)


def effects_lost(trial: LockTrial) -> tuple[list[Lost], int, str]:
    """The invocations of a lock trial that exited 0 (LOCK_HELD aside) and whose key was not there once the holder
    had ended; how many keys were there; and why some could not be judged ("" when all could). A key read back
    without an answer, or never read back (no keys workload), is unknown: never lost."""
    written = {label: kv for label, kv in trial.effects.items()
               if (inv := trial.invocation(label)) is not None and succeeded(inv)}
    if trial.effects_config is None:
        unread = [label for label in written if trial.invocation(f"get-{label}") is None]
        written = {label: kv for label, kv in written.items() if label not in unread}
        why = f"{', '.join(unread)}: not read back (no keys workload to read them with)" if unread else ""
    else:
        why = ""
    if not written:
        return [], 0, why
    try:
        values, unparseable = values_of(trial, written, trial.effects_config, lambda label: f"get-{label}")
    except Undecided as exc:
        return [], 0, str(exc.args[0])
    if unparseable is not None:
        return [], 0, unparseable.message()
    unknown = unread_of(trial, written, trial.effects_config, lambda label: f"get-{label}")
    judged = {label: (key, value, values.get(key)) for label, (key, value) in written.items() if key not in unknown}
    lost = [(label, key, value, found) for label, (key, value, found) in judged.items()
            if found is None or value not in found]
    return lost, len(judged) - len(lost), why or "; ".join(f"{key}: {reason}" for key, reason in unknown.items())


REMOVED = "nothing (it removed the key)"


def changes_lost(trial: LockTrial, history: History) -> list[Lost]:
    """A lock.contender that writes no key of its own (`config unset theme`), exited 0 and whose change, the one it
    makes when run alone, is not there once the holder has ended. Only a change the trial could show is judged:
    one the state did not hold already, on a key the holder does not write (its own key, or one its command names).
    What cannot be read (no config file before or after, unparseable, runs alone that disagree) is unknown."""
    label = "next" if isinstance(trial, LockRelease) else "contender"
    inv = trial.invocation(label)
    if trial.error or inv is None or not succeeded(inv) or trial.state_before is None or trial.effects_config is None:
        return []
    change, before, after = alone_change(history), _flat(trial.state_before), _flat(trial.effects_config)
    if not change or before is None or after is None:
        return []
    holder = trial.invocation("holder")
    theirs = {key for _label, (key, _value) in trial.effects.items()}
    out: list[Lost] = []
    for key, value in change.items():
        leaf = key.rsplit(".", 1)[-1]
        if before.get(key) == value or key in theirs or (holder is not None and leaf in holder.command()):
            continue
        if after.get(key) != value:
            out.append((label, key, REMOVED if value is None else value, after.get(key)))
    return out


def alone_change(history: History) -> dict[str, str | None]:
    """What lock.contender changed in the keys workload's config when run alone on fresh state: each key (a dotted
    path) with its value afterwards as JSON (None: removed), where every run alone made the same change."""
    changes = []
    for trial in history.of(Alone):
        inv = trial.invocation("alone")
        if trial.command != "contender" or trial.error or inv is None or not succeeded(inv):
            continue
        before, after = _flat(trial.state_before), _flat(trial.effects_config)
        if before is None or after is None:
            return {}
        changes.append({key: after.get(key) for key in before.keys() | after.keys() if before.get(key) != after.get(key)})
    if not changes:
        return {}
    first, *others = changes
    return {key: value for key, value in first.items() if all(key in c and c[key] == value for c in others)}


def _flat(snapshot: ConfigSnapshot | None) -> dict[str, str] | None:
    """A config file as dotted key -> value (JSON text); {} for a file that did not exist; None when it cannot be
    read (not a file, unparseable)."""
    if snapshot is None:
        return None
    if snapshot.text is None:
        return {} if snapshot.why_none == "missing" else None
    try:
        data = parse(snapshot.text, snapshot.format)
    except Unparseable:
        return None
    out: dict[str, str] = {}

    def walk(value: object, at: str) -> None:
        if isinstance(value, dict):  # only its keys: a section also changes with what others write into it
            for key, inner in value.items():
                walk(inner, f"{at}.{key}" if at else str(key))
        elif not isinstance(value, list):  # a list (of rows, of items) also changes with what others add: not judged
            out[at] = json.dumps(value, sort_keys=True, default=str)

    walk(data, "")
    return out
