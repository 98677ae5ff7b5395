"""`{name}` placeholders in spec strings: which names each field may use, and their expansion.

Names are checked when the spec is loaded, so a typo fails before anything runs, with the field's location
and the names it could have meant.
"""
from __future__ import annotations

import re
from collections.abc import Iterable

PATTERN = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")

# The address of the trial's own server, for each service a spec may declare (spec `services`): valid in every
# field where the sandbox's paths are, once that service is declared.
SERVICES = {"redis_url": "redis", "postgres_url": "postgres"}
# Paths of the trial's sandbox (and its servers' addresses); valid in every field.
SANDBOX = frozenset({"sandbox", "home", "tmp", "config_home", "cache_home", "state_home", "data_home", "runtime_dir",
                     "spec_dir", "python", *SERVICES})
PER_INVOCATION = frozenset({"i", "n", "session_id"})

# Where each sandbox placeholder points, relative to the trial's sandbox (the spec checks paths against it
# before anything runs; the sandbox creates these directories).
LAYOUT = {
    "home": "home",
    "tmp": "tmp",
    "config_home": "home/.config",
    "cache_home": "home/.cache",
    "state_home": "home/.local/state",
    "data_home": "home/.local/share",
    "runtime_dir": "run",
}


def names_in(template: str) -> list[str]:
    return PATTERN.findall(template)


def expand(template: str, values: dict[str, object]) -> str:
    """Replace every known `{name}`; the loader has already rejected unknown names."""
    return PATTERN.sub(lambda m: str(values[m.group(1)]) if m.group(1) in values else m.group(0), template)


def expand_all(argv: Iterable[str], values: dict[str, object]) -> list[str]:
    return [expand(arg, values) for arg in argv]
