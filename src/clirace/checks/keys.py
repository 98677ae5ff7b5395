"""Keys: every distinct key written by a run that exited 0 is readable afterwards, holding its value. A key
whose writer's outcome is unknown may be present or absent, but if present it holds its own value."""
from __future__ import annotations

from .. import placeholders
from ..configfile import TooLarge, Unparseable, lookup, parse
from ..findings import Finding, Verdict
from ..history import History, KeysRound
from ..lockerror import succeeded
from ..vocab import Outcome
from . import reference
from ._common import parallel_rounds, Undecided, finding, ok_count, verdict_over_rounds

ID = "keys"


def found_values(trial: KeysRound) -> tuple[dict[str, str | None], Finding | None]:
    """key -> value found afterwards (None if missing); or a finding when the config does not parse."""
    config = trial.config
    if config is None:
        values: dict[str, str | None] = {}
        for label, (key, _value) in trial.keys.items():
            get = trial.invocation(f"get-{label[4:]}")
            # A key read back as empty with exit 0 is gone, not stale: tools print nothing for a missing key.
            values[key] = get.stdout.strip() or None if get is not None and get.ok else None
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
    for key, _ in trial.keys.values():
        value = lookup(data, placeholders.expand(config.key, {"key": key}), config.format, query=config.query)
        values[key] = None if value is None else str(value)
    return values, None


def judge_one(trial: KeysRound) -> list[Finding]:
    found, unparseable = found_values(trial)
    if unparseable:
        return [unparseable]
    written, maybe = [], []
    for label, (key, value) in trial.keys.items():
        inv = trial.invocation(label)
        if inv is not None and succeeded(inv):
            written.append((label, key, value))
        elif inv is not None and inv.outcome is Outcome.UNKNOWN:
            maybe.append((label, key, value))
    lost = [(label, key) for label, key, value in written if found.get(key) is None]
    out = []
    if lost:
        out.append(finding("CR111", trial, [label for label, _ in lost], f"{len(written)} keys present",
                           f"{len(written) - len(lost)} present", lost=len(lost), ok=len(written),
                           keys=", ".join(key for _, key in lost)))
    values = [v for _, v in trial.keys.values()]
    for label, key, value in written + maybe:
        # Contained, not equal: a spec may write the value wrapped (npm: "https://{value}.example/"). But only
        # its own value: one that also holds another run's (two writes run together) is not this writer's.
        held = found.get(key)
        if held is not None and (value not in held or any(v != value and v in held for v in values)):
            out.append(finding("CR112", trial, [label], value, held, key=key, found=held, wanted=value))
    return out


def check(history: History) -> Verdict:
    return verdict_over_rounds(ID, parallel_rounds(history, KeysRound), judge_one, lambda ts: (
        f"all {sum(ok_count(t, 'set-') for t in ts)} keys written by successful runs over {len(ts)} rounds were present"),
        tally=_tally, prefix="set-", undecided=reference.undecided_kind(history, KeysRound))


def _tally(findings: list[Finding]) -> str:
    """Totals over the failed rounds, so that "in 3 of 3 rounds" does not read as the first round's figure."""
    lost = [f for f in findings if f.code == "CR111"]
    stale = sum(1 for f in findings if f.code == "CR112")
    parts = [f"lost {sum(f.args['lost'] for f in lost)} of {sum(f.args['ok'] for f in lost)} keys written by "
             f"invocations that exited 0"] if lost else []
    parts += [f"{stale} key(s) holding another value than their writer's"] if stale else []
    return "; ".join(parts) or findings[0].message()
