"""Where the spec declares each part a finding can be about, recorded when the spec is loaded.

CI annotations (GitHub, SARIF) need a file and a line. A finding is about the tool, not the spec, but the spec
line that declared what was exercised is where a reader starts, so each scenario maps to a spec section
(SECTIONS). The positions of exactly those sections, and of every workload, go into the history
(History.spec_places), and the report reads them there: `clirace judge` of an old history annotates the lines of
the spec that ran, even once the file has changed or gone.
"""
from __future__ import annotations

from typing import Any

from clirace.history import SpecPlace
from clirace.spec._yaml import KeyPath, Located
from clirace.spec.messages import dotted

Keys = tuple[str, ...]  # spec keys from the top: ("lock", "contender"); ("workloads", KIND, ...) names a kind

# Each scenario (checks.registry.SCENARIO_OF) -> the spec keys that declare what it exercises, most precise
# first; the first one the spec has is where its checks' findings point. A scenario missing here fails a unit test.
SECTIONS: dict[str, tuple[Keys, ...]] = {
    "lock-conflict": (("lock", "contender"), ("lock",)),
    "lock-release": (("lock", "hold"), ("lock",)),
    "lock-wait": (("lock", "wait_option"), ("lock", "never_waits"), ("lock",)),
    "session": (("session",),),
    "atomic-config": (("workloads", "keys", "config"), ("workloads", "keys")),
    "workloads": (("workloads",),),
}
# Codes whose check runs in one scenario but whose finding is about another part of the spec (s58-advice judges
# the session experiment's trials, yet CR951 is about the lock's wait).
CODE_SECTIONS: dict[str, tuple[Keys, ...]] = {
    "CR951": (("lock", "wait_option"), ("lock", "never_waits"), ("lock",)),
    "CR952": (("session",),),
}
# Where a finding points when the spec has none of its sections: the tool, never line 1 column 1.
LAST_RESORT: tuple[Keys, ...] = (("tool", "command"), ("tool",))

_NAMED = [keys for table in (*SECTIONS.values(), *CODE_SECTIONS.values(), LAST_RESORT) for keys in table]
# What is recorded: the sections above outside the workloads, and under each workload the keys they name in one.
TOP: tuple[Keys, ...] = tuple(dict.fromkeys(keys for keys in _NAMED if keys[0] != "workloads" or len(keys) == 1))
UNDER_WORKLOAD: tuple[Keys, ...] = tuple(dict.fromkeys(keys[2:] for keys in _NAMED
                                                       if keys[0] == "workloads" and len(keys) > 2))


def spec_places(located: Located) -> dict[str, SpecPlace]:
    """dotted key path -> where the spec declares it, for each section above the spec has and for each workload
    (with the name its trials are given: "counter: counter#0")."""
    data = located.data if isinstance(located.data, dict) else {}
    found = {dotted(keys): _at(located, keys) for keys in TOP if _has(data, keys)}
    for index, w in enumerate(data.get("workloads") or []):
        if not isinstance(w, dict):
            continue
        kind = w.get("kind")
        found[dotted(("workloads", index))] = _at(located, ("workloads", index),
                                                  f"{kind}: {w.get('name', f'{kind}#{index}')}")
        found.update({dotted(("workloads", index, *keys)): _at(located, ("workloads", index, *keys))
                      for keys in UNDER_WORKLOAD if _has(w, keys)})
    return found


def _has(data: Any, keys: Keys) -> bool:
    for key in keys:
        if not isinstance(data, dict) or key not in data:
            return False
        data = data[key]
    return True


def _at(located: Located, path: KeyPath, workload: str = "") -> SpecPlace:
    """A key's own position (`lock:`), a list item's its value's (the workload's first key)."""
    where = located.where_key(path) if isinstance(path[-1], str) else located.where(path)
    try:
        _, line, column = where.rsplit(":", 2)
        return SpecPlace(int(line), int(column), workload)
    except ValueError:  # no position (a spec not read from a file): the file itself
        return SpecPlace(1, 1, workload)
