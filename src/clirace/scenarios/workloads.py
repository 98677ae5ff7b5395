"""Parallel workloads: N invocations released together, then the state read back.

One trial per workload per round. Every value the invariant needs (start, keys written, items seeded,
inputs) is recorded in the trial's facts, so the checks judge the history alone.
"""
from __future__ import annotations

import re
from pathlib import Path

from ..history import Trial
from ._box import Context, TrialFailed

INTEGER = re.compile(r"-?\d+")


def run(ctx: Context) -> list[Trial]:
    trials = []
    for workload in ctx.spec.workloads:
        for round_ in range(ctx.rounds):
            ctx.say(f"{workload.name}: round {round_ + 1}/{ctx.rounds}, {ctx.parallel} in parallel")
            trial = Trial(workload.kind, workload.name, round_)
            with ctx.box(trial) as box:
                box.setup(workload.setup)
                RUNNERS[workload.kind](ctx, box, workload, trial)
            trials.append(trial)
    return trials


def _read_int(box, workload, label):
    inv = box.run(label, workload.read)
    found = INTEGER.search(inv.stdout)
    if not inv.ok or not found:
        raise TrialFailed(f"the read command {' '.join(inv.argv)!r} did not print an integer "
                          f"({inv.outcome()}; {inv.printed()})")
    return int(found.group())


def _counter(ctx, box, workload, trial):
    start = workload.start if workload.start is not None else _read_int(box, workload, "read-before")
    jobs = [(f"inc-{i}", box.argv(workload.run, i=i, n=ctx.parallel, session_id=f"s{i}"), None)
            for i in range(ctx.parallel)]
    box.together(jobs)
    trial.facts.update(start=start, final=_read_int(box, workload, "read-after"))


def _keys(ctx, box, workload, trial):
    token = ctx.token()
    keys = {f"set-{i}": [f"clirace_k{i}", f"v{i}-{token}"] for i in range(ctx.parallel)}
    jobs = [(label, box.argv(workload.run, i=i, n=ctx.parallel, key=k, value=v, session_id=f"s{i}"), None)
            for i, (label, (k, v)) in enumerate(keys.items())]
    box.together(jobs)
    trial.facts["keys"] = keys
    if workload.config:
        path = Path(box.path(workload.config.path))
        trial.facts["config"] = {"path": str(path), "format": workload.config.format,
                                 "key": workload.config.key, "text": _read_text(path)}
    else:
        found = {}
        for label, (key, _value) in keys.items():
            if box.trial.invocation(label).ok:
                inv = box.run(f"get-{label[4:]}", workload.read, key=key)
                found[key] = inv.stdout.strip() if inv.ok else None
        trial.facts["read"] = found


def _claim(ctx, box, workload, trial):
    token = ctx.token()
    items = [f"item{i}-{token}" for i in range(ctx.parallel)]
    for i, item in enumerate(items):
        inv = box.run(f"add-{i}", workload.add, item=item, i=i)
        if not inv.ok:
            raise TrialFailed(f"adding queue item failed: {' '.join(inv.argv)!r} ({inv.outcome()}; {inv.printed()})")
    jobs = [(f"claim-{i}", box.argv(workload.run, i=i, n=ctx.parallel, session_id=f"s{i}"), None)
            for i in range(ctx.parallel)]
    box.together(jobs)
    trial.facts.update(items=items, pattern=workload.claimed)
    if workload.list:
        inv = box.run("list-after", workload.list)
        trial.facts["remaining"] = [line.strip() for line in inv.stdout.splitlines() if line.strip()] if inv.ok else None


def _output(ctx, box, workload, trial):
    trial.facts["runs"] = run_outputs(ctx, box, workload.run, "out")


def run_outputs(ctx, box, run, prefix, session_flag=None, session_env=None, wrap=None, session_ids=None):
    """N parallel runs, each with its own input file holding a unique token; returns what each produced."""
    token = ctx.token()
    io = box.sandbox.root / "io"
    runs = {}
    jobs = []
    for i in range(ctx.parallel):
        label = f"{prefix}-{i}"
        inp, out = io / f"{prefix}-input-{i}.txt", io / f"{prefix}-output-{i}"
        marker = f"clirace-input-{i}-{token}"
        inp.write_text(marker)
        sid = session_ids[i] if session_ids else f"s{i}"
        values = dict(i=i, n=ctx.parallel, input=inp, output=out, session_id=sid)
        argv = box.argv(run, prefix=session_flag or (), **values)
        extra = {session_env: sid} if session_env else None
        jobs.append((label, [*(wrap(label) if wrap else ()), *argv], extra))
        runs[label] = {"marker": marker, "output": str(out), "session_id": sid}
    box.together(jobs)
    for label, facts in runs.items():
        facts["produced"] = _read_text(Path(facts["output"]))
    return runs


def _read_text(path: Path, limit: int = 256 * 1024) -> str | None:
    try:
        with open(path, "rb") as handle:
            return handle.read(limit).decode("utf-8", errors="replace")
    except OSError:
        return None


RUNNERS = {"counter": _counter, "keys": _keys, "claim": _claim, "output": _output}
