"""Reading what a trial read back: the counter a read printed, the keys a config holds, the item a claim took,
the items a list shows. Shared by the workload checks and the reference runs' judgement (reference.py)."""
from __future__ import annotations

import json
import re
from collections.abc import Callable

from clirace.checks._common import finding, read_back
from clirace.checks.findings import Finding
from clirace.checks.lockerror import find_error
from clirace.errors import PatternTimeout, TooLarge, Undecided, Unparseable
from clirace.history import ClaimRound, ConfigSnapshot, CounterRound, KeysRound, Trial
from clirace.history.vocab import Outcome
from clirace.spec import patterns, placeholders
from clirace.spec.configfile import lookup, parse

INTEGER = re.compile(r"-?\d+")
EMPTY = ("", "[]", "{}", "null")  # what a read prints for a key that is not there
Written = dict[str, tuple[str, str]]  # the writer's label -> (key, value)


def read_counter(trial: CounterRound, label: str) -> int:
    """The counter a read printed: group 1 of the spec's `value` regex, else the first integer."""
    inv = read_back(trial, label)
    if trial.pattern:
        try:
            text = patterns.group1(trial.pattern, inv.stdout) or ""
        except PatternTimeout as exc:
            raise Undecided(f"the counter's value regex: {exc}", "Simplify the workload's value regex.") from None
    else:
        found = INTEGER.search(inv.stdout)
        text = found.group() if found else ""
    if not inv.ok or not re.fullmatch(r"\s*-?\d+\s*", text):
        what = f"a counter matching {trial.pattern!r}" if trial.pattern else "an integer"
        raise Undecided(f"the read command {inv.command()!r} did not print {what} ({inv.ending()}; {inv.printed()})",
                        "Check the counter workload's read command (and value regex): run alone, it must print "
                        "the counter.")
    return int(text)


def _get_label(label: str) -> str:
    """The read-back of a keys round's writer: set-N is read by get-N, earlier-N by get-earlier-N."""
    return f"get-{label.removeprefix('set-')}"


def unread(trial: KeysRound) -> dict[str, str]:
    """key -> why its read-back says nothing about it (see `unread_of`)."""
    return unread_of(trial, {**trial.earlier, **trial.keys}, trial.config, _get_label)


def unread_of(trial: Trial, written: Written, config: ConfigSnapshot | None, get_label: Callable[[str], str]) \
        -> dict[str, str]:
    """key -> why its read-back says nothing about it: the read ended without an answer (timed out, killed) or
    was refused by the tool's lock. Such a key is neither present nor lost: unknown (Jepsen's set checker: never
    read is unknown). A read that failed otherwise is the tool's answer: the key is not there."""
    out: dict[str, str] = {}
    if config is not None:
        return out
    for label, (key, _value) in written.items():
        get = trial.invocation(get_label(label))
        if get is None:
            continue  # never read, because its writer failed: its key may be absent
        if get.outcome is Outcome.UNKNOWN:
            out[key] = f"{get.label} {get.ending()}"
        elif not get.ok and find_error(get.stdout, get.stderr).says_lock_held:
            out[key] = f"{get.label} was refused by the lock ({get.ending()}; {get.printed(80)})"
    return out


def found_values(trial: KeysRound) -> tuple[dict[str, str | None], Finding | None]:
    """key -> value found after a keys round (see `values_of`)."""
    return values_of(trial, {**trial.earlier, **trial.keys}, trial.config, _get_label)


def values_of(trial: Trial, written: Written, config: ConfigSnapshot | None, get_label: Callable[[str], str]) \
        -> tuple[dict[str, str | None], Finding | None]:
    """key -> value found afterwards for each key `written` (label -> (key, value)), from the config snapshot or
    the read-back invocations get_label(label) (None if missing or unread: see `unread_of`); or a finding when
    the config does not parse."""
    if config is None:
        values: dict[str, str | None] = {}
        for label, (key, _value) in written.items():
            get = trial.invocation(get_label(label))
            # A key read back as empty with exit 0 is gone, not stale: tools print nothing for a missing key, or an
            # empty JSON value (`jq`, `--json` modes: [], {}, null).
            printed = get.stdout.strip() if get is not None and get.ok else ""
            values[key] = None if printed in EMPTY else printed
        return values, None
    if config.text is None:
        if config.why_none != "missing":
            raise Undecided(f"the config file {config.path} could not be read ({config.why_none})",
                            "The tool replaced its config with something that is not a regular file.")
        return {}, None
    try:
        data = parse(config.text, config.format)
    except TooLarge as exc:  # it may be whole: too large to tell
        raise Undecided(f"the config file {config.path} cannot be judged: {exc}",
                        "Keep the config this workload writes under 1 MiB, or judge it through a read command.") from None
    except Unparseable as exc:
        return {}, finding("CR113", trial, [], "a parseable config", config.text[:120], error=str(exc))
    values = {}
    for key, _ in written.values():
        value = lookup(data, placeholders.expand(config.key, {"key": key}), config.format, query=config.query)
        values[key] = None if value is None else str(value)
    return values, None


def claimed_item(stdout: str, pattern: str | None) -> str | None:
    """The item a claim printed: group 1 of the spec's `claimed` regex (its whole stdout without one).
    Raises Undecided when the regex does not finish in its time bound on this output."""
    if not pattern:
        return stdout.strip() or None
    try:
        return patterns.group1(pattern, stdout)
    except PatternTimeout as exc:
        raise Undecided(f"the claimed regex: {exc}", "Simplify the claim workload's claimed regex.") from None


def remaining(trial: ClaimRound) -> list[str] | None:
    """The items `list` showed after the round: one per line, or a JSON array; None without a list command or
    when it failed."""
    listed = trial.invocation("list-after")
    if listed is None or not listed.ok:
        return None
    try:
        items = json.loads(listed.stdout)
    except ValueError:
        items = None
    if isinstance(items, list):
        return [item if isinstance(item, str) else json.dumps(item) for item in items]
    return [line.strip() for line in listed.stdout.splitlines() if line.strip()]
