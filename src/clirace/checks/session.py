"""Session isolation (level 3): with distinct session ids every temp file's path holds its own id and no
output is clobbered; without ids, parallel runs still use distinct temp paths."""
from collections import defaultdict

from ..findings import FAIL, NOT_TESTED, PASS, UNKNOWN, Verdict
from ._common import Undecided, finding
from .output import output_findings

ID = "session-isolation"


def check(history):
    trials = history.of("session")
    if not trials:
        return Verdict(ID, NOT_TESTED, "the spec does not say how to pass a session id",
                       hint="Add session.flag (e.g. [\"--session-id\", \"{session_id}\"]) or session.env.")
    if any(t.error for t in trials):
        return Verdict(ID, UNKNOWN, f"could not decide: {next(t.error for t in trials if t.error)}")
    findings, notes = [], []
    for trial in trials:
        runs = trial.facts["runs"]
        if trial.facts["with_ids"]:
            for label in runs:
                inv = trial.invocation(label)
                if not inv.ok:
                    findings.append(finding("CR503", trial, [label], "exit 0", inv.outcome(), label=label,
                                            outcome=inv.outcome(), printed=inv.printed(100)))
        try:
            findings.extend(output_findings(trial, runs))
        except Undecided as exc:  # the temp paths still speak; whose output is whose cannot be told
            notes.append(f"{trial.name}: outputs not compared ({exc.args[0]})")
        if not trial.facts["traced"]:
            continue
        writes = trial.facts["temp_writes"]
        users = defaultdict(list)
        for label, paths in writes.items():
            for path in paths:
                users[path].append(label)
            if trial.facts["with_ids"]:
                sid = runs[label]["session_id"]
                findings.extend(finding("CR501", trial, [label], f"a path containing {sid}", path, label=label,
                                        session_id=sid, path=path) for path in paths if sid not in path)
        findings.extend(finding("CR502", trial, labels, "one path per invocation", path, count=len(labels), path=path,
                                labels=", ".join(labels)) for path, labels in users.items() if len(labels) > 1)
        notes.append(f"{trial.name}: {sum(len(p) for p in writes.values())} temp files written")
    if findings:
        return Verdict(ID, FAIL, findings[0].message() + (f" (+{len(findings) - 1} more)" if len(findings) > 1 else ""),
                       findings)
    if not all(t.facts["traced"] for t in trials):
        return Verdict(ID, NOT_TESTED, "outputs were not clobbered, but which temp files each run wrote could not "
                       f"be observed: {history.environment.get('strace_note', 'strace unavailable')}",
                       hint="Install strace (apt-get install strace) and allow ptrace to test temp paths.")
    return Verdict(ID, PASS, "; ".join(notes) + ", each under its own session id or distinct per run")
