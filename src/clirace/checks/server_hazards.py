"""Server hazards (advice beside no-silent-corruption): what the trial's servers saw a tool do to state kept in
Redis or PostgreSQL (spec `services`) that opens a race window, whether or not a round lost anything.

- a Redis key read and then written back by one connection, without WATCH/MULTI or a script (CR710);
- a PostgreSQL row selected and then updated by one backend outside one transaction, or without FOR UPDATE
  or a version check (CR711);
- a claim that is a read and then a delete (CR712);
- and what the file evidence could not see (CR713, info): strace sees files, so the file hazards had no state
  file to judge; the rounds after the first meet at the server's own rendezvous (run/services/proxy.py) instead.
"""
from __future__ import annotations

from clirace.checks import _served
from clirace.checks._common import finding, records
from clirace.checks.findings import NOT_APPLICABLE, PASS, Finding, Verdict
from clirace.history import History, WorkloadRound

ID = "server-hazards"


def _findings(trial: WorkloadRound) -> list[Finding]:
    out = []
    for hazard in _served.hazards(trial):
        code = "CR712" if hazard.delete else ("CR710" if hazard.service == "redis" else "CR711")
        f = finding(code, trial, [], "the read and the write made atomic", _served.shown(hazard.write),
                    client=hazard.client if hazard.service == "redis" else f"backend {hazard.client}",
                    target=hazard.target, read=_served.shown(hazard.read), write=_served.shown(hazard.write),
                    how=hazard.how)
        f.evidence.observed = _served.describe(trial, since=hazard.read.at)  # from the read on, not the setup
        out.append(f)
    return out


def check(history: History) -> Verdict:
    rounds = [t for t in history.trials if isinstance(t, WorkloadRound) and t.server_ops and not t.error
              and not t.serial]
    if not rounds:
        return Verdict(ID, NOT_APPLICABLE, "no parallel round kept state in a server")
    seen: dict[str, Finding] = {}
    for trial in rounds:
        for f in _findings(trial):
            seen.setdefault(f"{f.code}/{trial.workload}", f)
    services = sorted({op.service for t in rounds for op in t.server_ops})
    unseen = [t for t in rounds if not t.rendezvous]
    met = len(rounds) - len(unseen)
    seen["CR713"] = finding("CR713", unseen[0] if unseen else rounds[0], [], "", "", service=" and ".join(services),
                            rendezvous=f"{met} of {len(rounds)} rounds met at the server's own rendezvous (a proxy "
                            "holding each invocation just after its first read of the state)" if met else
                            f"no rendezvous stopped the invocations inside their race window in {len(rounds)} rounds")
    found = list(seen.values())
    notes = sorted({t.server_note for t in rounds if t.server_note})
    said = f"; the servers' view was incomplete: {notes[0]}" if notes else ""
    hazards = [f for f in found if f.code != "CR713"]
    if not hazards:
        return Verdict(ID, PASS, f"what {' and '.join(services)} saw in {len(rounds)} round(s) shows no read then "
                       f"write of one key or row outside a transaction, lock or script{said}", found,
                       read=records(rounds))
    return Verdict(ID, PASS, f"advice from the servers: {'; '.join(f.message() for f in hazards[:3])}{said}", found,
                   read=records(rounds))
