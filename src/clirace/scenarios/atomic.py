"""Atomic config writes: sample the config file while writers run in parallel, and kill a writer mid-write.

The kill uses strace's fault injection: SIGKILL at the writer's first write to the config path itself (an
in-place writer has already truncated it by then), and at its first rename (an atomic writer's commit point).
"""
from __future__ import annotations

import threading
import time
from pathlib import Path

from .. import observe
from ..configfile import Unparseable, parse
from ..history import Trial
from ._box import Context, TrialFailed

KILL_POINTS = {
    "its first write to the config file": (observe.WRITE_CALLS, True),
    "its first rename": (observe.RENAME_CALLS, False),
}


def _keys_workload(ctx):
    return next((w for w in ctx.spec.workloads if w.kind == "keys" and w.config), None)


def run(ctx: Context) -> list[Trial]:
    workload = _keys_workload(ctx)
    if workload is None:
        return []
    trials = [_sampled(ctx, workload)]
    for point, (calls, on_path) in KILL_POINTS.items():
        trial = Trial("atomic-config", f"writer killed at {point}")
        trials.append(trial)
        trial.facts["point"] = point
        if not ctx.strace:
            trial.facts["untestable"] = "strace is not available to kill the writer mid-write"
            continue
        ctx.say(f"atomic config: writer killed at {point}")
        with ctx.box(trial) as box:
            box.setup(workload.setup)
            path = Path(box.path(workload.config.path))
            _seed(box, workload)
            old = path.read_text()
            wrap = observe.kill_prefix(calls, path=str(path) if on_path else None)
            inv = box.run("killed-writer", workload.run, wrap=wrap, key="clirace_killed", value="after-kill",
                          i=0, n=1, session_id="s0")
            trial.facts.update(format=workload.config.format, key_path=workload.config.key, old=old,
                               after=_text(path), key="clirace_killed", value="after-kill", killed=inv.signal == 9)
    return trials


def _seed(box, workload):
    inv = box.run("seed-write", workload.run, key="clirace_seed", value="seeded", i=0, n=1, session_id="s0")
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
        jobs = [(f"set-{i}", box.argv(workload.run, i=i, n=ctx.parallel, key=f"clirace_s{i}", value=f"v{i}",
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
