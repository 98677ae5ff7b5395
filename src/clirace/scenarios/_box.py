"""A trial's sandbox and launcher, with the spec's base command and setup applied."""
from __future__ import annotations

import random
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from .. import placeholders
from ..history import Invocation, Trial
from ..launch import Launcher, Running
from ..sandbox import Sandbox, end_adopted
from ..spec import Spec


class TrialFailed(Exception):
    """The trial could not be carried out (setup failed, a holder never became ready): its outcome is unknown."""


@dataclass
class Context:
    """What every scenario gets: the spec, the run's random source (from the seed), and run-wide options."""
    spec: Spec
    seed: int
    workdir: Path
    rounds: int
    parallel: int
    keep: bool = False
    strace: bool = False
    progress: object = None
    only: tuple = ()  # check ids asked for with --only (empty: all)
    trials: list = None  # the history's trials: each is added when it starts, so an interrupted run keeps it

    def add(self, trial: Trial) -> None:
        if self.trials is not None and not any(t is trial for t in self.trials):
            self.trials.append(trial)

    def say(self, text: str) -> None:
        if self.progress:
            self.progress(text)

    @contextmanager
    def box(self, trial: Trial):
        """A fresh sandbox with setup done; removed afterwards unless --keep. Failures become trial.error."""
        self.add(trial)
        root = Path(tempfile.mkdtemp(prefix=f"{trial.scenario}-", dir=self.workdir))
        sandbox = Sandbox(root, self.spec.spec_dir)
        box = Box(self.spec, sandbox, trial, random.Random(f"{self.seed}/{trial.scenario}/{trial.name}/{trial.round}"))
        try:
            try:
                box.setup()
            except TrialFailed as exc:
                # A generator context manager must yield once: the body gets a box whose first command raises.
                trial.error = box.unusable = str(exc)
            yield box
        except TrialFailed as exc:
            trial.error = trial.error or str(exc)
        except BaseException:  # Ctrl-C, SIGTERM, a bug: the trial is incomplete and must not be judged
            trial.error = trial.error or "interrupted before the trial finished"
            raise
        finally:
            box.end_all()
            end_adopted()  # a daemon that shed the marker (cleared its environment), adopted by the CLI
            trial.facts.setdefault("sandbox", str(root))
            if self.keep:
                sandbox.end_strays()
            else:
                sandbox.remove()


class Box:
    def __init__(self, spec: Spec, sandbox: Sandbox, trial: Trial, rng: random.Random):
        self.spec = spec
        # Every random choice of a trial (tokens, delays, kill points) comes from here: derived from the run's
        # seed and the trial's identity, so `--only CHECK` replays a trial exactly as the full run made it.
        self.rng = rng
        self.sandbox = sandbox
        self.trial = trial
        self.env = sandbox.environ(spec.env)
        env_changes = {k: self.env[k] for k in ("HOME", "TMPDIR", "XDG_CONFIG_HOME", "XDG_STATE_HOME")}
        env_changes.update({k: self.env[k] for k in spec.env})
        self.launcher = Launcher(self.env, sandbox.expand(spec.cwd), env_changes, spec.timeout)
        self._running: list[Running] = []
        self.unusable: str | None = None  # why the trial cannot go on (its setup failed), if it cannot

    def token(self) -> str:
        return f"{self.rng.getrandbits(32):08x}"

    def path(self, template: str, **extra) -> str:
        return self.sandbox.expand(template, **extra)

    def argv(self, sub, prefix=(), **extra) -> list[str]:
        """The full command line: base command, then `prefix` (e.g. a session flag), then `sub`."""
        if self.unusable:
            raise TrialFailed(self.unusable)
        values = {**self.sandbox.values(), **extra}
        return [*placeholders.expand_all(self.spec.command, values), *placeholders.expand_all(prefix, values),
                *placeholders.expand_all(sub, values)]

    def record(self, invocation: Invocation) -> Invocation:
        invocation.sandbox = str(self.sandbox.root)
        self.trial.invocations.append(invocation)
        return invocation

    def run(self, label: str, sub, prefix=(), extra_env=None, wrap=(), timeout=None, **extra) -> Invocation:
        return self.record(self.launcher.run(label, self.argv(sub, prefix, **extra), extra_env, timeout, wrap=wrap))

    def start(self, label: str, sub, prefix=(), extra_env=None, wrap=(), timeout=None, **extra) -> Running:
        running = self.launcher.start(label, self.argv(sub, prefix, **extra), extra_env, timeout, wrap=wrap)
        self._running.append(running)
        return running

    def finish(self, running: Running) -> Invocation:
        return self.record(running.finish())

    def together(self, jobs) -> list[Invocation]:
        """jobs: (label, full argv, extra env[, wrap]). Released at once from the barrier; all finished on return."""
        runnings = self.launcher.start_together(jobs)
        self._running.extend(runnings)
        return [self.record(r.finish()) for r in runnings]

    def setup(self, commands=None) -> None:
        for n, sub in enumerate(self.spec.setup if commands is None else commands):
            inv = self.run(f"setup-{n}", sub)
            if not inv.ok:
                raise TrialFailed(f"setup command {inv.command()!r} failed ({inv.outcome()}; {inv.printed()})")

    def end_all(self) -> None:
        for running in self._running:
            running.stop()
