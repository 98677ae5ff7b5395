"""Session isolation (level 3): with distinct session ids every temp file's path holds its own id and no
output is clobbered; without ids, parallel runs still use distinct temp paths."""
from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from ..findings import FAIL, NOT_TESTED, PASS, UNKNOWN, Evidence, Finding, Verdict
from ..history import History, SessionRun
from ._common import Undecided, finding, not_run_verdict
from ..observe import written_paths
from .output import output_findings

ID = "session-isolation"


def temp_writes(trial: SessionRun) -> dict[str, list[str]]:
    """label -> the files it wrote under the temp directories (from its trace)."""
    return {label: [p for p in written_paths(ops) if any(_under(p, d) for d in trial.temp_dirs)]
            for label, ops in trial.traces.items()}


def _under(path: str, directory: str) -> bool:
    return Path(path) == Path(directory) or Path(directory) in Path(path).parents


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
    notes = []
    for trial in trials:
        if trial.with_ids:
            for label in trial.runs:
                inv = trial.invocation(label)
                if inv is not None and not inv.ok:
                    findings.append(finding("CR503", trial, [label], "exit 0", inv.ending(), label=label,
                                            outcome=inv.ending(), printed=inv.printed(100)))
        try:
            findings.extend(output_findings(trial, trial.runs))
        except Undecided as exc:  # the temp paths still speak; whose output is whose cannot be told
            notes.append(f"{trial.name}: outputs not compared ({exc.args[0]})")
        if not trial.traced:
            continue
        writes = temp_writes(trial)
        users = defaultdict(list)
        for label, paths in writes.items():
            for path in paths:
                users[path].append(label)
            if trial.with_ids:
                sid = trial.runs[label].session_id
                findings.extend(finding("CR501", trial, [label], f"a path containing {sid}", path, label=label,
                                        session_id=sid, path=path) for path in paths if sid not in path)
        findings.extend(finding("CR502", trial, labels, "one path per invocation", path, count=len(labels), path=path,
                                labels=", ".join(labels)) for path, labels in users.items() if len(labels) > 1)
        notes.append(f"{trial.name}: {sum(len(p) for p in writes.values())} temp files written")
    if findings:
        return Verdict(ID, FAIL, findings[0].message() + (f" (+{len(findings) - 1} more)" if len(findings) > 1 else ""),
                       findings)
    if not all(t.traced for t in trials):
        note = history.environment.strace_note or "strace unavailable"
        return Verdict(ID, NOT_TESTED, "outputs were not clobbered, but which temp files each run wrote could not "
                       f"be observed: {note}",
                       hint="Run without --no-strace to test temp paths." if "--no-strace" in note else
                       "Install strace (apt-get install strace) and allow ptrace to test temp paths.")
    return Verdict(ID, PASS, "; ".join(notes) + ", each under its own session id or distinct per run")
