"""Parallel workloads: N invocations released together, then the state read back.

One trial per workload per round. When strace can trace, every round after the first is amplified: each
invocation runs under strace, which records its file operations and delays its writes and renames by a
few milliseconds chosen from the seed (see observe.amplify_prefix). The first round stays plain, so a tool
is also seen at its natural speed. Every value the invariant needs (start, keys written, items seeded,
inputs, delays) is recorded in the trial's facts, so the checks judge the history alone.
"""
from __future__ import annotations

import re
from pathlib import Path

from .. import observe
from ..history import Trial
from ._box import Box, Context, TrialFailed

INTEGER = re.compile(r"-?\d+")
DELAY_MS = (2, 20)  # range of injected delays; wide enough to overlap python start-up spread on 2 cores


def run(ctx: Context) -> list[Trial]:
    trials = []
    for workload in ctx.spec.workloads:
        if ctx.only and workload.kind not in ctx.only:  # --only counter runs the counter workload alone
            continue
        for round_ in range(ctx.rounds):
            amplified = ctx.strace and round_ > 0
            ctx.say(f"{workload.name}: round {round_ + 1}/{ctx.rounds}, {ctx.parallel} in parallel"
                    + (" (amplified)" if amplified else ""))
            trial = Trial(workload.kind, workload.name, round_)
            trial.facts["amplified"] = amplified
            with ctx.box(trial) as box:
                box.setup(workload.setup)
                RUNNERS[workload.kind](ctx, box, workload, trial, Parallel(ctx, box, trial, amplified))
            trials.append(trial)
    return trials


class Parallel:
    """Starts one parallel round, wrapped in the amplifier when asked, and keeps what it observed."""

    def __init__(self, ctx: Context, box: Box, trial: Trial, amplified: bool):
        self.ctx, self.box, self.trial, self.amplified = ctx, box, trial, amplified
        self.trace_dir = box.sandbox.root / "trace"

    def wrap(self, label: str) -> list[str]:
        if not self.amplified:
            return []
        delay = self.box.rng.randint(*DELAY_MS)
        self.trial.facts.setdefault("delays_ms", {})[label] = delay
        self.trace_dir.mkdir(exist_ok=True)
        return observe.amplify_prefix(self.trace_dir / label, delay)

    def run(self, jobs):
        """jobs: (label, full argv, extra env, [ignored wrap]); the amplifier wraps each when on."""
        self.box.together([(label, argv, env, self.wrap(label)) for label, argv, env, *_ in jobs])
        if self.amplified:
            root = str(self.box.sandbox.root)
            self.trial.facts["observed"] = {
                label: observe.summary(observe.file_events(self.trace_dir / label, self.box.launcher.cwd), root)
                for label, *_ in jobs}


def _read_int(box, workload, label):
    inv = box.run(label, workload.read)
    found = re.search(workload.value, inv.stdout, re.MULTILINE) if workload.value else INTEGER.search(inv.stdout)
    text = (found.group(1) if found.groups() else found.group()) if found else ""
    if not inv.ok or not re.fullmatch(r"\s*-?\d+\s*", text):
        what = f"a counter matching {workload.value!r}" if workload.value else "an integer"
        raise TrialFailed(f"the read command {inv.command()!r} did not print {what} ({inv.outcome()}; {inv.printed()})")
    return int(text)


def _counter(ctx, box, workload, trial, parallel):
    start = workload.start if workload.start is not None else _read_int(box, workload, "read-before")
    parallel.run([(f"inc-{i}", box.argv(workload.run, i=i, n=ctx.parallel, session_id=f"s{i}"), None)
                  for i in range(ctx.parallel)])
    trial.facts.update(start=start, final=_read_int(box, workload, "read-after"))


def _keys(ctx, box, workload, trial, parallel):
    token = box.token()
    keys = {f"set-{i}": [f"cliracek{i}", f"v{i}-{token}"] for i in range(ctx.parallel)}
    trial.facts["keys"] = keys
    parallel.run([(label, box.argv(workload.run, i=i, n=ctx.parallel, key=k, value=v, session_id=f"s{i}"), None)
                  for i, (label, (k, v)) in enumerate(keys.items())])
    if workload.config:
        path = Path(box.path(workload.config.path))
        trial.facts["config"] = {"path": str(path), "format": workload.config.format,
                                 "key": workload.config.key, "text": read_text(path)}
    else:
        found = {}
        for label, (key, _value) in keys.items():
            if box.trial.invocation(label).ok:
                inv = box.run(f"get-{label[4:]}", workload.read, key=key)
                found[key] = inv.stdout.strip() if inv.ok else None
        trial.facts["read"] = found


def _claim(ctx, box, workload, trial, parallel):
    token = box.token()
    items = [f"item{i}-{token}" for i in range(ctx.parallel)]
    for i, item in enumerate(items):
        inv = box.run(f"add-{i}", workload.add, item=item, i=i)
        if not inv.ok:
            raise TrialFailed(f"adding queue item failed: {' '.join(inv.argv)!r} ({inv.outcome()}; {inv.printed()})")
    trial.facts.update(items=items, pattern=workload.claimed)
    parallel.run([(f"claim-{i}", box.argv(workload.run, i=i, n=ctx.parallel, session_id=f"s{i}"), None)
                  for i in range(ctx.parallel)])
    if workload.list:
        inv = box.run("list-after", workload.list)
        trial.facts["remaining"] = [line.strip() for line in inv.stdout.splitlines() if line.strip()] if inv.ok else None


def _output(ctx, box, workload, trial, parallel):
    trial.facts["runs"] = run_outputs(ctx, box, workload.run, "out", run=parallel.run)


def run_outputs(ctx, box, command, prefix, session_flag=None, session_env=None, wrap=None, session_ids=None, run=None):
    """N parallel runs, each with its own input file holding a unique token; returns what each produced."""
    token = box.token()
    io = box.sandbox.root / "io"
    runs = {}
    jobs = []
    for i in range(ctx.parallel):
        label = f"{prefix}-{i}"
        inp, out = io / f"{prefix}-input-{i}.txt", io / f"{prefix}-output-{i}"
        marker = f"clirace-input-{i}-{token}"
        inp.write_text(marker)
        sid = session_ids[i] if session_ids else f"s{i}"
        argv = box.argv(command, prefix=session_flag or (), i=i, n=ctx.parallel, input=inp, output=out, session_id=sid)
        jobs.append((label, argv, {session_env: sid} if session_env else None, wrap(label) if wrap else ()))
        runs[label] = {"marker": marker, "output": str(out), "session_id": sid}
    (run or box.together)(jobs)
    for facts in runs.values():
        facts["produced"] = read_text(Path(facts["output"]))
    return runs


def read_text(path: Path, limit: int = 256 * 1024) -> str | None:
    try:
        with open(path, "rb") as handle:
            return handle.read(limit).decode("utf-8", errors="replace")
    except OSError:
        return None


RUNNERS = {"counter": _counter, "keys": _keys, "claim": _claim, "output": _output}
