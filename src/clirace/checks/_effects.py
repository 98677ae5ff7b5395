"""The keys the lock experiments' commands wrote ({key} and {value} in lock.contender or the hold command), read
back once the holder had ended: which invocations that exited 0 lost theirs. Shared by the lock checks and the
reference runs' judgement (a contender's key must be found when it runs alone)."""
from __future__ import annotations

from ..history import LockTrial
from ..lockerror import succeeded
from ._common import Undecided
from ._read import unread_of, values_of

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
