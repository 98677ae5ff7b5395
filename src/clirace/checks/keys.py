"""Keys: every distinct key written by a run that exited 0 is readable afterwards, holding its value."""
from .. import placeholders
from ..configfile import Unparseable, lookup, parse
from ..lockerror import succeeded
from ._common import finding, ok_count, verdict_over_rounds

ID = "keys"


def _found_values(trial):
    """key -> value found afterwards (None if missing); or a finding when the config does not parse."""
    config = trial.facts.get("config")
    if config is None:
        return trial.facts.get("read", {}), None
    if config["text"] is None:
        return {}, None
    try:
        data = parse(config["text"], config["format"])
    except Unparseable as exc:
        return None, finding("CR113", trial, [], "a parseable config", config["text"][:120], error=str(exc))
    values = {}
    for key, _ in trial.facts["keys"].values():
        value = lookup(data, placeholders.expand(config["key"], {"key": key}), config["format"])
        values[key] = None if value is None else str(value)
    return values, None


def judge_one(trial):
    found, unparseable = _found_values(trial)
    if unparseable:
        return [unparseable]
    written = [(label, key, value) for label, (key, value) in trial.facts["keys"].items()
               if succeeded(trial.invocation(label))]
    lost = [(label, key) for label, key, value in written if found.get(key) is None]
    out = []
    if lost:
        out.append(finding("CR111", trial, [label for label, _ in lost], f"{len(written)} keys present",
                           f"{len(written) - len(lost)} present", lost=len(lost), ok=len(written),
                           keys=", ".join(key for _, key in lost)))
    values = [v for _, v in trial.facts["keys"].values()]
    for label, key, value in written:
        # Contained, not equal: a spec may write the value wrapped (npm: "https://{value}.example/"). But only
        # its own value: one that also holds another run's (two writes run together) is not this writer's.
        held = found.get(key)
        if held is not None and (value not in held or any(v != value and v in held for v in values)):
            out.append(finding("CR112", trial, [label], value, held, key=key, found=held, wanted=value))
    return out


def check(history):
    return verdict_over_rounds(ID, history.of("keys"), judge_one, lambda ts: (
        f"all {sum(ok_count(t, 'set-') for t in ts)} keys written by successful runs over {len(ts)} rounds were present"),
        tally=_tally, prefix="set-")


def _tally(findings):
    """Totals over the failed rounds, so that "in 3 of 3 rounds" does not read as the first round's figure."""
    lost = [f for f in findings if f.code == "CR111"]
    stale = sum(1 for f in findings if f.code == "CR112")
    parts = [f"lost {sum(f.args['lost'] for f in lost)} of {sum(f.args['ok'] for f in lost)} keys written by "
             f"invocations that exited 0"] if lost else []
    parts += [f"{stale} key(s) holding another value than their writer's"] if stale else []
    return "; ".join(parts) or findings[0].message()
