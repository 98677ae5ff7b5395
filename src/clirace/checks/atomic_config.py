"""Atomic config writes (level 3): readers never see a torn config, and a writer killed mid-write leaves the
old or the new file, whole."""
from __future__ import annotations

import json
import os
import re
from typing import Any

from clirace.checks._common import finding, not_run_verdict, records
from clirace.checks._observed import summaries
from clirace.checks.findings import FAIL, NOT_TESTED, PASS, UNKNOWN, Finding, Verdict
from clirace.errors import TooLarge, Unparseable
from clirace.history import ConfigSampled, History, KeysRound, KillPoint, KillPointsFound, WriterKilled
from clirace.history.vocab import EventKind
from clirace.run.observe import parse_line
from clirace.spec import placeholders
from clirace.spec.configfile import lookup, parse

ID = "atomic-config-writes"
# Evidence a pass needs. Readers: this many samples judged, and the config seen to change while they read (two
# contents at least), else they never read during a write. Kills: one that landed where it was meant on each
# kind of kill point the traced writer showed (a write to the config itself, to a temp file beside it, a rename
# onto it), else that kind of crash was never tried.
MIN_SAMPLES = 20
MIN_CONTENTS = 2
TOO_LARGE = "too large to judge"


def enough_samples(judged: int, contents: int) -> bool:
    """Whether readers that judged `judged` samples holding `contents` distinct contents read during the writes
    often enough for a pass (the sampling experiment writes on until they have, within its bound)."""
    return judged >= MIN_SAMPLES and contents >= MIN_CONTENTS


def kill_outcome(trial: WriterKilled, new: str | None = None) -> str | None:
    """None if the file is the old or the new one, whole; TOO_LARGE when that cannot be told; else a
    description of what was left.

    The new one is the old one with the key set. Found by a query (a list entry, a database row), the key's
    entry cannot be taken out by path, so the new one is judged against `new`, the config a writer of the same
    key and value left when it ran to its end (KillPointsFound.after), up to the entries that name the key:
    a row inserted without the count the tool keeps beside it is half a write. Without that reference (an
    older history), the old one with only entries naming the key added passes."""
    fmt = trial.format
    if trial.after is None:
        return "missing"
    try:
        after = parse(trial.after, fmt)
    except TooLarge:
        return TOO_LARGE  # neither whole nor torn as far as clirace can tell: this kill decides nothing
    except Unparseable as exc:
        return f"unparseable ({exc})"
    try:
        old = parse(trial.old, fmt)
    except (TooLarge, Unparseable):  # no config before the write (or none clirace could read): only the key counts
        old = type(after)() if isinstance(after, (dict, list)) else None
    if after == old:
        return None
    dotted = placeholders.expand(trial.key_path, {"key": trial.key})
    value = lookup(after, dotted, fmt, query=trial.query)
    if value is None or trial.value not in str(value):  # as in keys: the value may be wrapped
        return "parseable but neither the old nor the new content"
    if not trial.query:
        rest = _drop(after, dotted) == old
    else:
        reference = _parsed_or_none(new, fmt)
        rest = _unmentioned(after, trial.key) == _unmentioned(old if reference is None else reference, trial.key)
    return None if rest else "parseable but neither the old nor the new content"


def _parsed_or_none(text: str | None, fmt: str) -> Any:
    try:
        return None if text is None else parse(text, fmt)
    except Unparseable:  # TooLarge included: a reference that cannot be read says nothing
        return None


_KILLED = re.compile(r"^(\d+)\s+\+\+\+ killed by SIGKILL")


KILL_LOG_CAP = 8 * 1024  # what the history keeps of a kill run's log, its end (scenarios/atomic.py)


def kill_landing(trial: WriterKilled) -> tuple[str, tuple[str, ...], int] | None:
    """(call, paths, count) of the call strace killed the writer at, from its log, `count` being its number among
    that thread's calls of that name in the log (strace counts `when` per thread); None if it killed nothing."""
    lines = trial.kill_log.splitlines()
    landed: list[tuple[str, tuple[str, ...], int, bool]] = []  # each killed thread's last call, its number, cut short?
    for n, line in enumerate(lines):
        killed = _KILLED.match(line)
        if not killed:
            continue
        for at in range(n - 1, -1, -1):
            tid, _, rest = lines[at].partition(" ")
            if tid == killed.group(1) and "(" in rest:
                op = parse_line(rest.replace("<unfinished ...>", ") = ?"), "")
                if op is not None:
                    short = not op.ok and rest.rstrip().endswith(("= ?", "<unfinished ...>"))
                    count = sum(1 for earlier in lines[:at + 1] if earlier.partition(" ")[0] == tid
                                and earlier.partition(" ")[2].lstrip().startswith(f"{op.call}("))
                    landed.append((op.call, op.paths, count, short))
                break
    if not any(_KILLED.match(line) for line in lines):
        return None
    # The whole thread group dies; the thread that made the call is the one the kill cut short in it (strace's
    # inject), else the one stopped just after it (stopper.KillAfter writes only that thread). Other threads
    # were parked elsewhere (a Go runtime thread's futex, libuv's pool), or show no call at all.
    cut = [(call, paths, count) for call, paths, count, short in landed if short]
    return (cut or [(call, paths, count) for call, paths, count, _ in landed] or [("", (), 0)])[0]


def _landed_where_meant(trial: WriterKilled, call: str, paths: tuple[str, ...], count: int) -> bool:
    """The kill hit the call meant, on the path meant, and the `when`-th of them: a log cut to its end (the
    history keeps KILL_LOG_CAP) may miss earlier calls, never hold more."""
    assert trial.point is not None
    if call != trial.point.call:
        return False
    complete = len(trial.kill_log) < KILL_LOG_CAP
    # A kill just after a call (stopper.KillAfter) numbers it over every thread itself and logs that call alone;
    # strace's per-thread `when` is held to the count of the killed thread's calls in the log.
    if not trial.point.after and (count > trial.point.when or (complete and count != trial.point.when)):
        return False
    if trial.point.path:  # numbered among the calls on the config itself
        return trial.config_path in paths
    return any(os.path.dirname(p) == os.path.dirname(trial.config_path) for p in paths)


def kill_hit(trial: WriterKilled) -> bool:
    """Whether clirace's injected kill hit the writer: killed by SIGKILL (or a process of it, the log shows), and
    not by clirace's own deadline, which ends a writer that timed out with SIGKILL too."""
    writer = trial.invocation("killed-writer")
    if writer is None or writer.timed_out:
        return False
    return writer.signal == 9 or trial.event(EventKind.KILL_INJECTED) is not None


def _drop(data: Any, dotted: str) -> Any:
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


def _unmentioned(data: Any, key: str) -> Any:
    """`data` without what names `key`: list entries (a kubeconfig's cluster, a database's row) and mapping
    entries whose text holds it. A query finds a key among values, so its entry cannot be dropped by path."""
    if isinstance(data, dict):
        return {k: _unmentioned(v, key) for k, v in data.items()
                if key not in str(k) and (isinstance(v, (dict, list)) or key not in str(v))}
    if isinstance(data, list):
        return [_unmentioned(v, key) for v in data if key not in json.dumps(v, default=str)]
    return data


def _in_place_advice(history: History) -> list[Finding]:
    """CR603 once, from the first traced keys round that rewrote the config file in place."""
    for trial in history.of(KeysRound):
        if trial.config is None:
            continue
        name = trial.config.path.rsplit("/", 1)[-1]
        for label, summary in summaries(trial).items():
            hits = [p for p in summary.in_place if p.endswith("/" + name)]
            if hits:
                return [finding("CR603", trial, [label], "temp file + rename", "open with O_TRUNC",
                                label=label, path=hits[0], how="open with O_TRUNC")]
    return []


def _torn(sampled: ConfigSampled) -> tuple[int, str, int]:
    """(torn samples, the first torn text, samples judged); a missing file is torn for a reader, one too large
    to parse is neither torn nor whole (not judged)."""
    bad, first, unjudged = sampled.missing, "", sampled.dropped
    for sample in sampled.distinct:
        try:
            parse(sample.text, sampled.format)
        except TooLarge:
            unjudged += sample.count
        except Unparseable:
            bad += sample.count
            first = first or sample.text[:200]
    return bad, first, sampled.samples - unjudged


def kind_of(point: KillPoint) -> str:
    """The kind of crash a kill point tries (MIN evidence is one landed kill of each kind found)."""
    if point.call.startswith("rename"):
        return "a rename onto the config"
    if point.call == "openat":
        return "an open of the config with O_TRUNC"
    if point.call in ("fsync", "fdatasync"):  # what was written is there: a crash here says nothing of a write's middle
        return "an fsync of the config itself" if point.path else "an fsync of a temp file beside it"
    return "a write to the config itself" if point.path else "a write to a temp file beside it"


def check(history: History) -> Verdict:
    sampled, found, killed_trials = history.of(ConfigSampled), history.of(KillPointsFound), history.of(WriterKilled)
    if not (sampled or found or killed_trials):
        return not_run_verdict(ID, history, "atomic-config") or Verdict(
            ID, UNKNOWN, "the atomic-config experiment left no record")
    errored = next((t for t in (*sampled, *found, *killed_trials) if t.error), None)
    if errored:
        return Verdict(ID, UNKNOWN, f"could not decide: {errored.error}")
    findings: list[Finding] = []
    notes = []
    thin: list[str] = []  # evidence too thin to pass on
    for sample_trial in sampled:
        bad, first, judged = _torn(sample_trial)
        contents = len(sample_trial.distinct)
        if bad:
            findings.append(finding("CR601", sample_trial, [i.label for i in sample_trial.labelled("set-")],
                                    "always parseable", f"{bad} torn samples", bad=bad, samples=sample_trial.samples,
                                    first=first))
        elif not enough_samples(judged, contents):
            thin.append(f"the readers judged {judged} samples holding {contents} distinct content(s) during the "
                        f"parallel writes; a pass needs at least {MIN_SAMPLES} samples and the config seen to "
                        f"change ({MIN_CONTENTS} contents)")
        else:
            notes.append(f"{judged} samples during parallel writes ({contents} distinct contents), none torn")
    if found and not found[0].points:
        return Verdict(ID, UNKNOWN, f"could not decide: the config writer never wrote or renamed anything in "
                       f"{found[0].config_dir}", findings,
                       hint="Is workloads[keys].config.path the file the run command writes?")
    killed: list[KillPoint] = []
    missed: list[str] = []
    misplaced: list[str] = []
    for trial in killed_trials:
        assert trial.point is not None
        state = kill_outcome(trial, found[0].after if found else None)
        if state == TOO_LARGE:
            misplaced.append(f"after the kill at {trial.point.name} the config was {TOO_LARGE}")
            continue
        if state:
            findings.append(finding("CR602", trial, ["killed-writer"], "the old or the new config, whole", state,
                                    point=trial.point.name, state=state))
            continue
        hit = kill_hit(trial)
        landing = kill_landing(trial) if trial.kill_log else None
        if hit and landing is not None and not _landed_where_meant(trial, *landing):
            # A whole file after a kill elsewhere proves nothing about this point: never a pass.
            call, paths, count = landing
            misplaced.append(f"the kill meant for {trial.point.name} landed on {call or 'an unknown call'}"
                             f"{' of ' + paths[0] if paths else ''}{f' (its #{count} in the log)' if count else ''}")
            continue
        if hit:
            killed.append(trial.point)
        else:
            missed.append(trial.point.name)
    findings.extend(_in_place_advice(history))
    if killed:
        notes.append(f"writer killed at {len(killed)} points ({', '.join(p.name for p in killed)}): config whole "
                     "each time")
    if missed:
        notes.append(f"kill points never reached: {', '.join(missed)}")
    if any(not x.advisory for x in findings):
        return Verdict(ID, FAIL, "; ".join(x.message() for x in findings if not x.advisory), findings)
    if misplaced:
        return Verdict(ID, UNKNOWN, f"could not decide: {misplaced[0]}", findings,
                       hint="The writer's threads write elsewhere between its config writes; kill points on the "
                            "config itself are counted on its path only, temp files beside it cannot be.")
    if thin:
        return Verdict(ID, UNKNOWN, f"could not decide: {thin[0]}", findings,
                       hint="Check that the keys workload's run command writes workloads[keys].config.path.")
    untested = history.not_run("atomic-config/kill")
    if untested:
        return Verdict(ID, NOT_TESTED, "; ".join(notes) + f"; not tested: kills mid-write ({untested.why})", findings,
                       hint=untested.hint)
    points = found[0].points if found else tuple(t.point for t in killed_trials if t.point is not None)
    kinds = list(dict.fromkeys(map(kind_of, points)))
    untried = [kind for kind in kinds if kind not in {kind_of(p) for p in killed}]
    if untried or not killed:
        return Verdict(ID, UNKNOWN, f"could not decide: no kill landed on {untried[0] if untried else 'any call'}; "
                       f"a pass needs one on each kind of kill point found ({', '.join(kinds) or 'none'}); "
                       + "; ".join(notes), findings,
                       hint="The writer ran past the kill points its traced run showed: its writes differ from run "
                            "to run (threads, buffering). Run again, or simplify what the keys workload's run writes.")
    return Verdict(ID, PASS, "; ".join(notes) + f"; a kill landed on each kind of kill point ({', '.join(kinds)})",
                   findings,
                   read=records(t for t in history.trials if isinstance(t, (ConfigSampled, WriterKilled))
                                and not t.error))
