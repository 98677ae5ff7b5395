"""Session isolation (level 3), judged as isolation: with distinct session ids, every temp path a run writes
lies in a namespace of its own session, and no output is clobbered; without ids, parallel runs still use
distinct temp paths.

A temp path is in its session's namespace on either of two pieces of evidence, and the verdict says which:
the path spells the session id (the literal id), or it has a beginning in common with a path that the same id
wrote when it ran a second time (run-N, then again-N: a folder such as `s-<hash of the id>/`, or the start of a
file name) that no path of another session or of a run without an id has. A tool that names its folder `s-`
plus a hash of the id passes on the second; one that ignores the id and makes a fresh folder per run shares
no more with itself the second time than with any other run, and fails.
Paths are compared relative to each trial's sandbox and shown as {sandbox}/...; an invocation killed at its
deadline is unknown, never a failure of its own, and it leaves the criterion undecided rather than passed.

Every path outside the state counts, not only temp files: a file that runs of two sessions (or two runs without an
id) locked or wrote outside the sandbox, where HOME, TMPDIR and XDG_* point, is the same whatever the session id
and the state home (a fixed /tmp/tool.lock): every session, and every user of the machine, shares it (CR506).
Outputs are compared with what the same input gave run alone (the output workload's serial reference runs, when
the session command is that workload's): an output that is another input's result was clobbered (CR131).
"""
from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Iterable

from clirace.checks import reference
from clirace.checks._common import finding, not_run_verdict, records
from clirace.checks.findings import FAIL, NOT_TESTED, PASS, UNKNOWN, Evidence, Finding, Verdict
from clirace.checks.output import output_findings
from clirace.errors import Undecided
from clirace.history import History, OutputRun, SessionRun
from clirace.history.vocab import Outcome
from clirace.run import locking, observe
from clirace.run.observe import written_paths

ID = "session-isolation"
BATCHES = ("run-", "again-")  # with ids: the first runs, then the same ids again once those have ended


def temp_writes(trial: SessionRun) -> dict[str, list[str]]:
    """label -> the files it wrote under the temp directories (from its trace), relative to the sandbox."""
    temp_dirs = [_relative(trial, d) for d in trial.temp_dirs]
    return {label: [rel for rel in map(lambda p: _relative(trial, p), written_paths(ops))
                    if any(_at_or_under(rel, d) for d in temp_dirs)]
            for label, ops in trial.traces.items()}


def _relative(trial: SessionRun, path: str) -> str:
    root = trial.sandbox.rstrip("/") + "/" if trial.sandbox else ""
    return path[len(root):] if root and path.startswith(root) else path


def _shown(trial: SessionRun, rel: str) -> str:
    return f"{{sandbox}}/{rel}" if trial.sandbox and not rel.startswith("/") else rel


def _at_or_under(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


class _Sessions:
    """Where each session's runs wrote, against everyone else's writes: the with-ids trial and the runs
    without an id (whose paths, relative to their own sandbox, would be the same files on one machine)."""

    def __init__(self, trial: SessionRun, writes: dict[str, list[str]], unnamed: dict[str, list[str]]):
        self.trial = trial
        self.temp_dirs = [_relative(trial, d) for d in trial.temp_dirs]
        self.session = {label: run.session_id for label, run in trial.runs.items()}
        self.writes = writes
        self.unnamed = unnamed  # "run-N (without ids)" -> paths

    def outsiders(self, sid: str) -> set[str]:
        return {p for label, paths in self.writes.items() if self.session.get(label) != sid for p in paths} | \
            {p for paths in self.unnamed.values() for p in paths}

    def namespace(self, rel: str, other: str, outsiders: set[str]) -> str | None:
        """What `rel` and a path that `other` (the same id, run again) wrote have in common, past the temp
        directory (a folder, `s-<hash>/`, or the start of a file name), when no outsider's path begins so."""
        base = next((d for d in self.temp_dirs if _at_or_under(rel, d)), "")
        shared = max((os.path.commonprefix([rel, q]) for q in self.writes[other]), key=len, default="")
        if len(shared) <= len(base.rstrip("/")) + 1 or any(p.startswith(shared) for p in outsiders):
            return None
        return shared


def _namespace_findings(trial: SessionRun, writes: dict[str, list[str]], unnamed: dict[str, list[str]]
                        ) -> tuple[list[Finding], dict[str, int], list[str]]:
    """Findings CR501/CR505 for the with-ids trial; how many sessions each kind of evidence placed; and why
    the sessions that could not be placed could not (the same id's other run wrote no temp file, or ended
    without an answer)."""
    sessions = _Sessions(trial, writes, unnamed)
    by_session: dict[str, list[str]] = defaultdict(list)
    for label in writes:
        by_session[sessions.session.get(label, label)].append(label)
    findings: list[Finding] = []
    placed = {"literal": 0, "stable": 0}
    undecided: list[str] = []
    for sid, labels in by_session.items():
        outsiders = sessions.outsiders(sid)
        evidence: set[str] = set()
        open_questions: list[str] = []
        for label in labels:
            for rel in writes[label]:
                if rel in outsiders:
                    owners = [u for u, paths in unnamed.items() if rel in paths]
                    if owners and not any(rel in writes[o] for o in writes if sessions.session.get(o) != sid):
                        findings.append(finding("CR505", trial, [label], "a path no run without an id writes",
                                                _shown(trial, rel), label=label, session_id=sid,
                                                path=_shown(trial, rel), labels=", ".join(owners)))
                    continue  # shared with another session: CR502
                if sid in rel:
                    evidence.add("literal")
                    continue
                verdict = _stable(trial, sessions, label, labels, rel, outsiders)
                if isinstance(verdict, Finding):
                    findings.append(verdict)
                elif verdict:
                    evidence.add("stable")
                else:
                    open_questions.append(rel)
        if open_questions and not any(f.args.get("session_id") == sid for f in findings):
            undecided.append(f"{_shown(trial, open_questions[0])} (session id {sid}): the same id's other run "
                             "wrote no temp file, or ended without an answer, so where the id leads twice was not seen")
        for kind in evidence:
            placed[kind] += 1
    return _one_per_session(findings), placed, undecided


def _stable(trial: SessionRun, sessions: _Sessions, label: str, labels: list[str], rel: str, outsiders: set[str]
            ) -> Finding | bool:
    """True when every other run of the same id that wrote temp files wrote in `rel`'s namespace (see
    _Sessions.namespace); a CR501 finding when one that answered (like this one) did not; False when nothing
    shows either way."""
    others = [o for o in labels if o != label and sessions.writes[o]]
    astray = [o for o in others if sessions.namespace(rel, o, outsiders) is None]
    if not others or not astray:
        return bool(others)
    answered = [o for o in astray if _ok(trial, o) and _ok(trial, label)]
    if not answered:
        return False
    other = answered[0]
    elsewhere = _shown(trial, max(sessions.writes[other], key=lambda q: len(os.path.commonprefix([rel, q]))))
    return finding("CR501", trial, [label, other], f"{_shown(trial, rel)} and a path of {other} in one namespace",
                   elsewhere, label=label, session_id=sessions.session[label], path=_shown(trial, rel), again=other,
                   again_path=elsewhere)


def _ok(trial: SessionRun, label: str) -> bool:
    inv = trial.invocation(label)
    return inv is not None and inv.ok


def _one_per_session(findings: list[Finding]) -> list[Finding]:
    """One CR501 per session id (its first path): the same two runs otherwise repeat it for every file."""
    seen: set[tuple[str, str]] = set()
    out = []
    for f in findings:
        key = (f.code, f.args.get("session_id", ""))
        if f.code == "CR501" and key in seen:
            continue
        seen.add(key)
        out.append(f)
    return out


def _shared(trial: SessionRun, writes: dict[str, list[str]]) -> list[Finding]:
    """CR502: one temp path written by runs of more than one session (without ids: by more than one run)."""
    owner = {label: (run.session_id if trial.with_ids else label) for label, run in trial.runs.items()}
    users: dict[str, list[str]] = defaultdict(list)
    for label, paths in writes.items():
        for rel in paths:
            users[rel].append(label)
    return [finding("CR502", trial, labels, "one path per invocation", _shown(trial, rel), count=len(labels),
                    path=_shown(trial, rel), labels=", ".join(labels))
            for rel, labels in users.items() if len({owner.get(label, label) for label in labels}) > 1]


def _fixed_paths(trials: list[SessionRun]) -> list[Finding]:
    """CR506: a file outside the sandbox locked or written by runs of more than one session (observe.shared_paths)."""
    users: dict[str, dict[str, tuple[str, str]]] = defaultdict(dict)  # path -> label shown -> (owner, how)
    where: dict[str, SessionRun] = {}
    for trial in trials:
        for label, ops in trial.traces.items() if trial.traced else ():
            reading = locking.read([ops])
            locked = {locking.lock_path(op) for op in ops if op.paths and reading.held(op)}
            run = trial.runs.get(label)
            shown = label if trial.with_ids else f"{label} (without ids)"
            owner = run.session_id if trial.with_ids and run is not None else shown
            for path in observe.shared_paths(ops, trial.sandbox):
                users[path][shown] = (owner, "locked" if path in locked else "wrote")
                where.setdefault(path, trial)
    out = []
    for path, used in users.items():
        owners = {owner for owner, _ in used.values()}
        if len(owners) < 2:
            continue
        labels = list(used)
        how = "locked" if any(h == "locked" for _, h in used.values()) else "wrote"
        out.append(finding("CR506", where[path], labels[:2], "paths under the session's state home or namespace",
                           path, path=path, how=how, count=len(owners),
                           labels=", ".join(labels[:4]) + (f" and {len(labels) - 4} more" if len(labels) > 4 else "")))
    return out


def _reference(history: History, trial: SessionRun, runs: dict[str, OutputRun]) -> dict[str, reference.Template] | None:
    """label -> what its input gave run alone (out-N of the serial runs, for run-N and again-N); None without them."""
    if not trial.reference:
        return None
    alone = reference.templates(history, trial.reference)
    if not alone:
        return None
    return {label: alone[f"out-{label.rsplit('-', 1)[1]}"] for label in runs
            if f"out-{label.rsplit('-', 1)[1]}" in alone}


def _as_alone(runs: dict[str, OutputRun]) -> dict[str, OutputRun]:
    """The runs with their own input and output file names (io/run-input-N.txt) written as the serial runs' were
    (io/out-input-N.txt): a tool that names its input in its output gives the same text for the same input."""
    def alone(text: str | None, prefix: str) -> str | None:
        return None if text is None else text.replace(f"{prefix}-input-", "out-input-").replace(
            f"{prefix}-output-", "out-output-")
    return {label: OutputRun(run.marker, run.output, run.session_id, alone(run.produced, label.rsplit("-", 1)[0]))
            for label, run in runs.items()}


def _batches(trial: SessionRun) -> Iterable[dict[str, OutputRun]]:
    """The runs of each batch: outputs are compared within one (the same inputs fed twice)."""
    for prefix in BATCHES:
        runs = {label: run for label, run in trial.runs.items() if label.startswith(prefix)}
        if runs:
            yield runs


def check(history: History) -> Verdict:
    trials = history.of(SessionRun)
    declared = history.not_run("session")
    if declared is not None and declared.declared == "no-session-id":
        f = Finding("CR504", {}, Evidence(trial="session: not run", expected="a session id that namespaces temp paths",
                                           found="the spec says the tool has none"))
        return Verdict(ID, FAIL, f.message(), [f])
    if not trials:
        return not_run_verdict(ID, history, "session") or Verdict(ID, UNKNOWN, "the session experiment left no record")
    errored = next((t for t in trials if t.error), None)
    if errored:
        return Verdict(ID, UNKNOWN, f"could not decide: {errored.error}")
    findings: list[Finding] = []
    failed: list[Finding] = []  # CR503, after the findings about paths and outputs, which say more
    notes: list[str] = []
    unanswered: list[str] = []
    undecided: list[str] = []
    unnamed = {f"{label} (without ids)": paths for t in trials if not t.with_ids and t.traced
               for label, paths in temp_writes(t).items()}
    for trial in trials:
        for label in trial.runs:
            inv = trial.invocation(label)
            if inv is None or inv.outcome is Outcome.OK:
                continue
            if inv.outcome is Outcome.UNKNOWN:  # killed at its deadline: it may have done its work or not
                unanswered.append(f"{label} ({trial.name}) {inv.ending()}")
            elif trial.with_ids:
                failed.append(finding("CR503", trial, [label], "exit 0", inv.ending(), label=label,
                                        outcome=inv.ending(), printed=inv.printed(100)))
        for runs in _batches(trial):
            expected = _reference(history, trial, runs)
            if expected is not None:
                # Only another input's result is evidence of clobbering here: an output that matches no reference
                # may carry the session id, which the serial runs were not given.
                found = output_findings(trial, _as_alone(runs), expected)
                astray = [f for f in found if f.code == "CR131" and str(f.args["found"]).startswith("neither")]
                findings.extend(f for f in found if f not in astray)
                notes.append(f"{trial.name}: {len(expected)} outputs compared with what their input gave run alone"
                             + (f" ({len(astray)} matched no input's result, which may be the session id in them)"
                                if astray else ""))
                continue
            try:
                findings.extend(output_findings(trial, runs))
            except Undecided as exc:  # the temp paths still speak; whose output is whose cannot be told
                notes.append(f"{trial.name}: outputs not compared ({exc.args[0]})")
        if not trial.traced:
            continue
        writes = temp_writes(trial)
        findings.extend(_shared(trial, writes))
        count = sum(len(p) for p in writes.values())
        if trial.with_ids:
            found, placed, open_ = _namespace_findings(trial, writes, unnamed)
            findings.extend(found)
            undecided.extend(open_)
            how = [f"{placed['literal']} session(s) by the id spelt in the path"] if placed["literal"] else []
            how += [f"{placed['stable']} session(s) by a folder or name prefix of their own that the same id wrote in again"] \
                if placed["stable"] else []
            notes.append(f"{trial.name}: {count} temp files written by {len(writes)} runs"
                         + (f", placed in their session's namespace ({'; '.join(how)})" if how else ""))
        else:
            notes.append(f"{trial.name}: {count} temp files written by {len(writes)} runs, none shared")
    findings += _fixed_paths(trials)
    findings += failed
    if findings:
        return Verdict(ID, FAIL, findings[0].message() + (f" (+{len(findings) - 1} more)" if len(findings) > 1 else ""),
                       findings)
    if unanswered:
        return Verdict(ID, UNKNOWN, f"could not decide: {unanswered[0]}, so what it wrote may be incomplete",
                       hint="Raise tool.timeout if the session command needs longer.")
    if not all(t.traced for t in trials):
        note = history.environment.strace_note or "strace unavailable"
        return Verdict(ID, NOT_TESTED, "outputs were not clobbered, but which temp files each run wrote could not "
                       f"be observed: {note}",
                       hint="Run without --no-strace to test temp paths." if "--no-strace" in note else
                       "Install strace (apt-get install strace) and allow ptrace to test temp paths.")
    if undecided:
        return Verdict(ID, UNKNOWN, f"could not decide: {undecided[0]}",
                       hint="Run the check again with this clirace: it runs every session id twice.")
    return Verdict(ID, PASS, "; ".join(notes), read=records(trials))
