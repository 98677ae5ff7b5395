"""Atomic config writes: sample the config file while writers run in parallel, and kill a writer mid-write.

Crash injection: one traced run of a writer lists its write and rename calls that touch the config file's
directory (the config itself, or a temp file beside it); then, in a fresh sandbox each, the writer is
SIGKILLed by strace at each of those calls in turn (`inject=CALL:signal=SIGKILL:when=N`, N counted per
call and per process, as strace does). After each kill the file must be the old one or the new one, whole.
"""
from __future__ import annotations

import threading
import time
from pathlib import Path

from .. import observe
from ..configfile import Unparseable, parse
from ..history import Trial
from ._box import Context, TrialFailed

MAX_KILL_POINTS = 8
KILL_CALLS = f"{observe.WRITE_CALLS},{observe.RENAME_CALLS}"


def _keys_workload(ctx):
    return next((w for w in ctx.spec.workloads if w.kind == "keys" and w.config), None)


def run(ctx: Context) -> list[Trial]:
    workload = _keys_workload(ctx)
    if workload is None:
        return []
    trials = [_sampled(ctx, workload)]
    if not ctx.strace:
        trials.append(Trial("atomic-config", "writer killed mid-write",
                            facts={"point": "each write and rename", "untestable": "strace is not available to kill "
                                   "the writer mid-write"}))
        return trials
    points, discovery = _kill_points(ctx, workload)
    if discovery is not None:
        trials.append(discovery)
        return trials
    for point in points:
        trial = Trial("atomic-config", f"writer killed at {point['name']}")
        trials.append(trial)
        ctx.say(f"atomic config: writer killed at {point['name']}")
        with ctx.box(trial) as box:
            box.setup(workload.setup)
            path = Path(box.path(workload.config.path))
            _seed(box, workload)
            old = path.read_text()
            log = box.sandbox.root / "kill.log"
            wrap = observe.kill_prefix(point["call"], when=point["when"], log=log)
            inv = box.run("killed-writer", workload.run, wrap=wrap, key="cliracekilled", value="after-kill",
                          i=0, n=1, session_id="s0")
            if inv.signal == 9:
                inv.ended_by = f"sent by clirace (strace) at {point['name']}"
            trial.facts.update(point=point["name"], format=workload.config.format, key_path=workload.config.key,
                               old=old, after=_text(path), key="cliracekilled", value="after-kill",
                               killed=inv.signal == 9 or observe.killed(log))
    return trials


def _kill_points(ctx, workload):
    """(points, None), or ([], a trial saying why there is nothing to kill)."""
    ctx.say("atomic config: tracing one writer to find its kill points")
    trial = Trial("atomic-config", "writer traced to find kill points")
    points = []
    with ctx.box(trial) as box:
        box.setup(workload.setup)
        _seed(box, workload)
        path = Path(box.path(workload.config.path))
        prefix = box.sandbox.root / "trace" / "writer"
        prefix.parent.mkdir()
        wrap = observe.trace_prefix(prefix, KILL_CALLS)
        inv = box.run("traced-writer", workload.run, wrap=wrap, key="cliracekilled", value="after-kill",
                      i=0, n=1, session_id="s0")
        if not inv.ok:
            raise TrialFailed(f"the config writer failed under trace ({inv.outcome()}; {inv.printed()})")
        seen: dict[tuple, int] = {}
        for event in observe.file_events(prefix, box.launcher.cwd):
            key = (event["pid"], event["call"])
            seen[key] = seen.get(key, 0) + 1
            touched = [p for p in event["paths"] if Path(p).parent == path.parent]
            if touched:
                if event["call"].startswith("rename"):  # mv tries renameat2(RENAME_NOREPLACE), then rename
                    name = f"{event['call']} #{seen[key]} onto {Path(event['paths'][-1]).name}"
                elif touched[0] == str(path):
                    name = f"{event['call']} #{seen[key]} to {path.name} itself"
                else:  # a temp file's name is random; say what it is, not what it is called
                    name = f"{event['call']} #{seen[key]} to a temp file beside {path.name}"
                points.append({"call": event["call"], "when": seen[key], "name": name})
    if trial.error:
        return [], trial
    if not points:
        trial.error = (f"the config writer never wrote or renamed anything in {path.parent}; is "
                       "workloads[keys].config.path the file it writes?")
        return [], trial
    if len(points) > MAX_KILL_POINTS:  # keep the first writes, the last ones and the commit (last call)
        keep = sorted({*range(MAX_KILL_POINTS // 2), *range(len(points) - MAX_KILL_POINTS // 2, len(points))})
        points = [points[i] for i in keep]
    return points, None


def _seed(box, workload):
    inv = box.run("seed-write", workload.run, key="cliraceseed", value="seeded", i=0, n=1, session_id="s0")
    if not inv.ok:
        raise TrialFailed(f"the first config write failed ({inv.outcome()}; {inv.printed()})")


def _sampled(ctx, workload) -> Trial:
    ctx.say(f"atomic config: sampling the config during {ctx.parallel} parallel writes")
    trial = Trial("atomic-config", "config sampled during parallel writes")
    with ctx.box(trial) as box:
        box.setup(workload.setup)
        _seed(box, workload)
        path = Path(box.path(workload.config.path))
        sampler = _Sampler(path, workload.config.format)
        jobs = [(f"set-{i}", box.argv(workload.run, i=i, n=ctx.parallel, key=f"cliraces{i}", value=f"v{i}",
                                      session_id=f"s{i}"), None) for i in range(ctx.parallel)]
        sampler.start()
        try:
            box.together(jobs)
        finally:
            sampler.stop()
        trial.facts.update(samples=sampler.samples, bad=sampler.bad, first_bad=sampler.first_bad,
                           first_error=sampler.first_error)
    return trial


class _Sampler(threading.Thread):
    """Reads and parses the config file as fast as it can until stopped."""

    def __init__(self, path: Path, fmt: str):
        super().__init__(daemon=True)
        self.path, self.fmt = path, fmt
        self.samples = self.bad = 0
        self.first_bad = self.first_error = None
        self._halt = threading.Event()

    def run(self):
        while not self._halt.is_set():
            text = _text(self.path)
            self.samples += 1
            if text is None:  # the file vanished: a reader would find no config at all
                self._record_bad("", "the file did not exist")
                continue
            try:
                parse(text, self.fmt)
            except Unparseable as exc:
                self._record_bad(text, str(exc))
            time.sleep(0)

    def _record_bad(self, text, error):
        self.bad += 1
        if self.first_bad is None:
            self.first_bad, self.first_error = text[:200], error

    def stop(self):
        self._halt.set()
        self.join(5)


def _text(path: Path) -> str | None:
    try:
        return path.read_text(errors="replace")
    except (FileNotFoundError, IsADirectoryError):
        return None
    except OSError as exc:
        raise TrialFailed(f"cannot read {path}: {exc}") from None
