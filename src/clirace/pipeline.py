"""The whole run, top to bottom: spec -> plan -> launch -> history -> checks -> findings -> score -> report.

`run()` launches the target and returns a Result; `judge()` does the second half on any history, so a
saved history is re-judged without launching anything.
"""
from __future__ import annotations

import random
import re
import shlex
import shutil
import signal
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from . import observe
from .checks import NEEDS, run_all
from .findings import Verdict
from .history import History
from .rubric import Criterion, Score, criteria, load_section, score
from .sandbox import end_adopted, end_run
from .scenarios import SCENARIOS, Context
from .spec import Spec


@dataclass
class Options:
    seed: int | None = None
    rounds: int | None = None
    parallel: int | None = None
    only: tuple[str, ...] = ()  # check ids; empty means all
    keep: bool = False
    strace: bool = True


@dataclass
class Result:
    spec_path: str
    seed: int
    score: Score
    criteria: list[Criterion]
    verdicts: dict[str, Verdict]
    history: History
    seconds: float = 0.0
    interrupted: bool = False
    kept: str | None = None
    notes: list[str] = field(default_factory=list)

    def replay(self, check: str | None = None) -> str:
        cmd = f"clirace check {shlex.quote(self.spec_path)} --seed {self.seed}"
        return cmd + (f" --only {check}" if check else "")

    def observed(self) -> list[str]:
        """How the tool was seen to lock and write, from every traced round (empty without strace).

        Paths that differ only by a random part (a run id, a mkstemp suffix) are shown once, with a count.
        """
        lines: dict[str, set] = {}
        traced = False

        def note(template: str, path: str) -> None:
            if not path.startswith("{sandbox}/io/"):  # clirace's own input and output files
                lines.setdefault(template.format(_shape(path)), set()).add(path)

        for trial in self.history.trials:
            for summary in (trial.facts.get("observed") or {}).values():
                traced = True
                for lock in summary["locks"]:
                    note("locks with {}", lock)
                for path in summary["renamed_onto"]:
                    note("replaces {} by rename (atomic)", path)
                for path in summary["in_place"]:
                    note("rewrites {} in place (O_TRUNC)", path)
        if traced and not any(line.startswith("locks with") for line in lines):
            lines["no lock call seen in any traced invocation (flock, fcntl, O_CREAT|O_EXCL)"] = set()
        return [line + (f" ({len(paths)} distinct paths)" if len(paths) > 1 else "") for line, paths in lines.items()]

    def findings(self):
        return [f for v in self.verdicts.values() for f in v.findings]


def _shape(path: str) -> str:
    """A path with its random parts (hex run ids, mkstemp suffixes) replaced by *."""
    path = re.sub(r"[0-9a-f]{8,}", "*", path)
    return re.sub(r"(?<=[.-])(?=[A-Za-z0-9_]*[0-9])[A-Za-z0-9_]{6,10}$", "*", path)


def run(spec: Spec, options: Options, progress=None, on_history=None) -> Result:
    seed = options.seed if options.seed is not None else random.SystemRandom().randrange(1, 2**31)
    usable, why = observe.available() if options.strace else (False, "strace disabled by --no-strace")
    history = History(spec_path=str(spec.path), seed=seed, spec=spec.raw,
                      environment={"strace": usable, "strace_note": why})
    if on_history:
        on_history(history)  # lets an interrupted run still report what it saw
    sigint_before = _children_get_default_sigint()
    workdir = Path(tempfile.mkdtemp(prefix="clirace-"))
    ctx = Context(spec, seed, workdir, rounds=options.rounds or spec.rounds,
                  parallel=options.parallel or spec.parallel, keep=options.keep, strace=usable, progress=progress,
                  trials=history.trials, only=options.only)
    wanted = {NEEDS[c] for c in options.only} if options.only else set(SCENARIOS)
    started = time.monotonic()
    try:
        for name, scenario in SCENARIOS.items():
            if name in wanted:
                for trial in scenario(ctx):  # trials that never needed a sandbox were not added yet
                    ctx.add(trial)
    finally:
        end_run(workdir)  # whatever a trial left running, even when its own cleanup was cut short
        end_adopted()
        if sigint_before is not None:
            signal.signal(signal.SIGINT, sigint_before)
        if options.keep:
            history.environment["kept"] = str(workdir)  # where they are, also when the run is interrupted
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    result = judge(history, only=options.only)
    result.seconds = time.monotonic() - started
    result.kept = str(workdir) if options.keep else None
    return result


def _children_get_default_sigint():
    """When clirace runs with SIGINT ignored (a background job, nohup), its children would inherit that, and
    a target would then survive the Ctrl-C of the lock-release test (Python does not even install its
    KeyboardInterrupt handler). A do-nothing handler keeps clirace ignoring SIGINT while every exec'd child
    starts with the default action, as it would from a terminal.
    Returns the disposition to restore afterwards, or None when nothing was changed."""
    try:
        if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
            signal.signal(signal.SIGINT, lambda signum, frame: None)
            return signal.SIG_IGN
    except ValueError:  # not the main thread: signal dispositions cannot be changed from here
        pass
    return None


def judge(history: History, only: tuple[str, ...] = ()) -> Result:
    verdicts = run_all(history)
    if only:
        verdicts = {k: v for k, v in verdicts.items() if k in only}
    section = load_section("s15")
    crits = criteria(section, verdicts)
    result = Result(history.spec_path, history.seed, score(section, crits), crits, verdicts, history)
    for verdict in verdicts.values():
        for f in verdict.findings:
            f.evidence.replay = result.replay(verdict.check)
    if not history.environment.get("strace"):
        result.notes.append(f"File observation and crash injection were off: {history.environment.get('strace_note')}. "
                            "Criteria that need them are reported as not tested.")
    if only:
        result.notes.append(f"Only these checks ran: {', '.join(only)}; the score covers only what ran.")
    return result
