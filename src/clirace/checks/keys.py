"""Keys: every distinct key written by a run that exited 0 is readable afterwards, holding its value. A key
whose writer's outcome is unknown may be present or absent, but if present it holds its own value. Keys that
existed before the round (the setup's, and those written one at a time just before it) are still there
afterwards, unless the tool drops them when it runs alone (the serial reference run shows which)."""
from __future__ import annotations

from clirace.checks import reference
from clirace.checks._common import finding, ok_count, parallel_rounds, verdict_over_rounds
from clirace.checks._read import found_values, unread
from clirace.checks.findings import Finding, Verdict
from clirace.checks.lockerror import succeeded
from clirace.errors import TooLarge, Undecided, Unparseable
from clirace.history import ConfigSnapshot, History, KeysRound
from clirace.history.vocab import ConfigFormat, Outcome
from clirace.spec.configfile import key_paths, parse

ID = "keys"
Path = tuple[str, ...]
MAX_NAMED = 12  # keys named in a finding; the count says how many there were


def judge_one(trial: KeysRound, dropped_alone: frozenset[Path] = frozenset()) -> list[Finding]:
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
    unknown = unread(trial)  # read back without an answer: neither present nor lost
    lost = [(label, key) for label, key, value in written if found.get(key) is None and key not in unknown]
    out = []
    if lost:
        out.append(finding("CR111", trial, [label for label, _ in lost], f"{len(written)} keys present",
                           f"{len(written) - len(lost)} present", lost=len(lost), ok=len(written),
                           keys=", ".join(key for _, key in lost)))
    earlier = [(label, key, value) for label, (key, value) in trial.earlier.items()
               if (inv := trial.invocation(label)) is not None and succeeded(inv)]
    values = [v for _, v in trial.keys.values()]
    for label, key, value in written + maybe + earlier:
        # Contained, not equal: a spec may write the value wrapped (npm: "https://{value}.example/"). But only
        # its own value: one that also holds another run's (two writes run together) is not this writer's.
        held = found.get(key)
        if held is not None and (value not in held or any(v != value and v in held for v in values)):
            out.append(finding("CR112", trial, [label], value, held, key=key, found=held, wanted=value))
    # An earlier key read back without an answer is unknown, like any other: never counted as gone.
    out.extend(_vanished(trial, found, [(key, found.get(key)) for _, key, _ in earlier if key not in unknown],
                         dropped_alone))
    if unknown and not out:
        key, why = next(iter(unknown.items()))
        raise Undecided(f"{len(unknown)} key(s) could not be read back, so whether they are there is unknown "
                        f"(e.g. {key}: {why})", "Check the keys workload's read command: run alone, it must answer.")
    return out


def _vanished(trial: KeysRound, found: dict[str, str | None], earlier: list[tuple[str, str | None]],
              dropped_alone: frozenset[Path]) -> list[Finding]:
    """CR114: keys that existed before the round and are gone after it: the earlier writes' keys, and every key
    of the config file as it was just before the parallel writes (but those the tool drops alone)."""
    by_path = trial.config is not None and not trial.config.query  # the file's keys include the earlier ones
    gone = [] if by_path else [key for key, held in earlier if held is None]
    before = _paths(trial.before)
    after = _paths(trial.config)
    if before is not None and after is not None:
        missing = sorted(p for p in before - after - dropped_alone if p[:-1] not in before - after)
        fmt = trial.before.format if trial.before else ConfigFormat.JSON
        gone += [name for name in (_name(p, fmt) for p in missing) if name not in gone]
    if not gone:
        return []
    writers = [inv.label for inv in trial.labelled("set-")]
    named = ", ".join(gone[:MAX_NAMED]) + (f" and {len(gone) - MAX_NAMED} more" if len(gone) > MAX_NAMED else "")
    return [finding("CR114", trial, writers, f"{len(gone)} earlier keys still present", f"{named} missing",
                    count=len(gone), keys=named)]


def _paths(snapshot: ConfigSnapshot | None) -> set[Path] | None:
    """The key paths of a config snapshot; None when it cannot be read whole (nothing to compare); a missing
    file has none."""
    if snapshot is None:
        return None
    if snapshot.text is None:
        return set() if snapshot.why_none == "missing" else None
    try:
        return key_paths(parse(snapshot.text, snapshot.format))
    except (TooLarge, Unparseable):
        return None


def _name(path: Path, fmt: ConfigFormat) -> str:
    return ".".join(path[1:] if fmt is ConfigFormat.INI and path[0] == "DEFAULT" and len(path) > 1 else path)


def dropped_alone(history: History) -> dict[str, frozenset[Path]]:
    """workload -> the config keys its serial reference run lost although they existed before it: what the
    tool does alone, so not a race when a parallel round loses them too."""
    out: dict[str, frozenset[Path]] = {}
    for trial in history.of(KeysRound):
        if trial.serial and not trial.superseded and not trial.error:
            before, after = _paths(trial.before), _paths(trial.config)
            if before is not None and after is not None:
                out[trial.workload] = out.get(trial.workload, frozenset()) | frozenset(before - after)
    return out


def check(history: History) -> Verdict:
    alone = dropped_alone(history)
    return verdict_over_rounds(ID, parallel_rounds(history, KeysRound),
                               lambda t: judge_one(t, alone.get(t.workload, frozenset())), lambda ts: (
        f"all {sum(ok_count(t, 'set-') for t in ts)} keys written by successful runs over {len(ts)} rounds"
        f"{_before_note(ts, alone)} were present"),
        tally=_tally, prefix="set-", undecided=reference.undecided_kind(history, KeysRound),
        ran_again=reference.ran_again(history, KeysRound),
        blind={"CR113": ("CR111", "CR112", "CR114")})


def _before_note(trials: list[KeysRound], alone: dict[str, frozenset[Path]]) -> str:
    """What a pass says about the keys from before the rounds, so that 'not checked' never reads as 'kept':
    the config's keys (a database's tables) before the parallel writes, and the earlier writes' keys that
    were read back on their own (through `read` or a query)."""
    def count(t: KeysRound) -> int:
        paths = _paths(t.before)
        by_path = paths is not None and t.config is not None and not t.config.query
        earlier = sum(1 for label in t.earlier if (inv := t.invocation(label)) is not None and succeeded(inv))
        return (len(paths - alone.get(t.workload, frozenset())) if paths is not None else 0) + \
            (0 if by_path else earlier)
    kept = sum(count(t) for t in trials)
    return f", and the {kept} key(s) that existed before their round," if kept else ""


def _tally(findings: list[Finding]) -> str:
    """Totals over the failed rounds, so that "in 3 of 3 rounds" does not read as the first round's figure."""
    lost = [f for f in findings if f.code == "CR111"]
    stale = sum(1 for f in findings if f.code == "CR112")
    wiped = [f for f in findings if f.code == "CR114"]
    parts = [f"lost {sum(f.args['lost'] for f in lost)} of {sum(f.args['ok'] for f in lost)} keys written by "
             f"invocations that exited 0"] if lost else []
    parts += [f"{stale} key(s) holding another value than their writer's"] if stale else []
    parts += [f"{sum(f.args['count'] for f in wiped)} key(s) that existed before the round wiped "
              f"({wiped[0].args['keys']})"] if wiped else []
    return "; ".join(parts) or findings[0].message()
