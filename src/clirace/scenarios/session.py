"""Session isolation: parallel runs with distinct session ids, then without, watching the temp files each writes.

Which files an invocation writes is only known from a trace (strace); without it the trial records that
observation was not available, and the check reports the criterion as not tested.
"""
from __future__ import annotations

from pathlib import Path

from .. import observe
from ..history import Trial
from ._box import Context
from .workloads import DELAY_MS, run_outputs


def run(ctx: Context) -> list[Trial]:
    session = ctx.spec.session
    if session is None:
        return []
    command = session.run or ctx.spec.workload("output").run
    trials = []
    for with_ids in (True, False):
        name = "with session ids" if with_ids else "without session ids"
        ctx.say(f"session: {ctx.parallel} parallel runs {name}")
        trial = Trial("session", name)
        trials.append(trial)
        with ctx.box(trial) as box:
            trace_dir = box.sandbox.root / "trace"
            trace_dir.mkdir()
            # Traced and amplified like a workload round: the trace decides the temp paths, the delays make
            # any clobbering of outputs likely to show as well.
            wrap = (lambda label: observe.amplify_prefix(trace_dir / label, box.rng.randint(*DELAY_MS))) if ctx.strace else None
            token = box.token()
            ids = [f"sess{i}-{token}" for i in range(ctx.parallel)] if with_ids else None
            runs = run_outputs(ctx, box, command, "run", session_flag=session.flag if with_ids else None,
                               session_env=session.env if with_ids else None, wrap=wrap, session_ids=ids)
            temp_dirs = [box.path(d) for d in session.temp_dirs]
            trial.facts.update(with_ids=with_ids, runs=runs, temp_dirs=temp_dirs, traced=ctx.strace)
            if ctx.strace:
                trial.facts["temp_writes"] = {
                    label: [p for p in observe.written_paths(observe.file_events(trace_dir / label, box.launcher.cwd))
                            if any(_under(p, d) for d in temp_dirs)]
                    for label in runs}
    return trials


def _under(path: str, directory: str) -> bool:
    return Path(path) == Path(directory) or Path(directory) in Path(path).parents
