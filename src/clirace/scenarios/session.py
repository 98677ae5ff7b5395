"""Session isolation: parallel runs with distinct session ids, then without, watching the files each writes.

With ids, the same ids run a second time in the same sandbox once the first runs have ended (run-N, then
again-N): where one id lands twice is what shows that the tool maps it to a namespace of its own, whether or
not the path spells the id. Which files an invocation writes is only known from a trace (strace); without it
the record says it was not traced, and the check reports the criterion as not tested.
"""
from __future__ import annotations

from typing import Any

from clirace.history import OutputRun, SessionRun
from clirace.run import observe
from clirace.scenarios._box import Context
from clirace.scenarios.workloads import DELAY_MS, run_outputs


def run(ctx: Context) -> None:
    session = ctx.spec.session
    if session is None:
        ctx.not_run("session", "the spec does not say how to pass a session id",
                    'Add session.flag (e.g. ["--session-id", "{session_id}"]) or session.env.')
        return
    if session.none:
        ctx.not_run("session", "the spec says the tool has no session id", declared="no-session-id")
        return
    output = ctx.spec.workload("output")
    command = session.run or (output.run if output else ())
    for with_ids in (True, False):
        name = "with session ids" if with_ids else "without session ids"
        ctx.say(f"session: {ctx.parallel} parallel runs {name}" + (", then the same ids again" if with_ids else ""))
        with ctx.box(SessionRun, name) as box:
            # Traced and amplified like a workload round: the trace shows the temp paths, the delays make any
            # clobbering of outputs likely to show as well.
            wrap: Any = None
            if ctx.strace:
                wrap = lambda label: observe.amplify_prefix(box.trace_dir / label, box.rng.randint(*DELAY_MS))  # noqa: E731
            token = box.token()
            ids = [f"sess{i}-{token}" for i in range(ctx.parallel)] if with_ids else None
            box.fields.update(with_ids=with_ids, traced=ctx.strace,
                              temp_dirs=tuple(box.path(d) for d in session.temp_dirs),
                              reference=output.name if output is not None and session.run is None else "")
            runs: dict[str, OutputRun] = {}
            for prefix in ("run", "again") if with_ids else ("run",):
                runs |= run_outputs(ctx, box, command, prefix, session_flag=session.flag if with_ids else None,
                                    session_env=session.env if with_ids else None, wrap=wrap, session_ids=ids)
            box.fields["runs"] = runs
            if ctx.strace:
                box.fields["traces"] = {label: box.file_ops(label) for label in box.fields["runs"]}
