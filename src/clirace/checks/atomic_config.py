"""Atomic config writes (level 3): readers never see a torn config, and a writer killed mid-write leaves the
old or the new file, whole."""
from .. import placeholders
from ..configfile import Unparseable, lookup, parse
from ..findings import FAIL, NOT_TESTED, PASS, UNKNOWN, Verdict
from ._common import finding

ID = "atomic-config"


def _kill_outcome(trial):
    """None if the file is the old or the new one, whole; else a description of what was left."""
    f = trial.facts
    fmt = f["format"]
    if f["after"] is None:
        return "missing"
    try:
        after = parse(f["after"], fmt)
    except Unparseable as exc:
        return f"unparseable ({exc})"
    old = parse(f["old"], fmt)
    if after == old:
        return None
    dotted = placeholders.expand(f["key_path"], {"key": f["key"]})
    value = lookup(after, dotted, fmt)
    if value is not None and f["value"] in str(value) and _drop(after, dotted) == old:  # as in keys: maybe wrapped
        return None
    return "parseable but neither the old nor the new content"


def _drop(data, dotted):
    node = data
    parts = dotted.split(".")
    if isinstance(node, dict) and dotted in node:
        node.pop(dotted)
        return data
    for part in parts[:-1]:
        node = node.get(part, {}) if isinstance(node, dict) else {}
    if isinstance(node, dict):
        node.pop(parts[-1], None)
    return data


def _in_place_advice(history):
    """CR603 once, from the first traced keys round that rewrote the config file in place."""
    for trial in history.of("keys"):
        config = trial.facts.get("config")
        if not config:
            continue
        name = config["path"].rsplit("/", 1)[-1]
        for label, summary in (trial.facts.get("observed") or {}).items():
            hits = [p for p in summary["in_place"] if p.endswith("/" + name)]
            if hits:
                return [finding("CR603", trial, [label], "temp file + rename", "open with O_TRUNC",
                                label=label, path=hits[0], how="open with O_TRUNC")]
    return []


def check(history):
    trials = history.of("atomic-config")
    if not trials:
        return Verdict(ID, NOT_TESTED, "the spec has no keys workload with a config file",
                       hint="Add a keys workload with config: {path, format}.")
    if any(t.error for t in trials):
        return Verdict(ID, UNKNOWN, f"could not decide: {next(t.error for t in trials if t.error)}")
    findings, notes, untested, killed, missed = [], [], [], [], []
    for trial in trials:
        f = trial.facts
        if "point" not in f and "samples" not in f:  # the traced run that found the kill points
            continue
        if "samples" in f:
            if f["bad"]:
                findings.append(finding("CR601", trial, [i.label for i in trial.labelled("set-")], "always parseable",
                                        f"{f['bad']} torn samples", bad=f["bad"], samples=f["samples"],
                                        first=f["first_bad"] or ""))
            else:
                notes.append(f"{f['samples']} samples during parallel writes, none torn")
            continue
        if "untestable" in f:
            untested.append(f"kill at {f['point']}: {f['untestable']}")
            continue
        state = _kill_outcome(trial)
        if state:
            findings.append(finding("CR602", trial, ["killed-writer"], "the old or the new config, whole", state,
                                    point=f["point"], state=state))
        else:
            (killed if f["killed"] else missed).append(f["point"])
    findings.extend(_in_place_advice(history))
    if killed:
        notes.append(f"writer killed at {len(killed)} points ({', '.join(killed)}): config whole each time")
    if missed:
        notes.append(f"kill points never reached: {', '.join(missed)}")
    if any(not x.advisory for x in findings):
        return Verdict(ID, FAIL, "; ".join(x.message() for x in findings if not x.advisory), findings)
    if untested:
        return Verdict(ID, NOT_TESTED, "; ".join(n for n in notes if n) + "; not tested: " + "; ".join(untested),
                       hint="Install strace (apt-get install strace) and allow ptrace to test kills mid-write.")
    return Verdict(ID, PASS, "; ".join(n for n in notes if n), findings)
