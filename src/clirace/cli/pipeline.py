"""The whole run, top to bottom: spec -> plan -> launch -> history -> checks -> findings -> score -> report.

`run()` launches the target and returns a Result; `judge()` does the second half on any history, so a
saved history is re-judged without launching anything.
"""
from __future__ import annotations

import dataclasses
import json
import re
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from clirace.checks import reference, registry
from clirace.checks._observed import observed_lines
from clirace.checks._plan import gaps
from clirace.checks.catalogue import load_section
from clirace.checks.findings import NOT_TESTED, Verdict
from clirace.cli.validate import coverage
from clirace.errors import InternalError, SpecError, TrialFailed, UsageError, interrupt_behind
from clirace.history import RAN_AGAIN, Alone, Environment, History, NotRun, RunOptions, WorkloadRound, shards
from clirace.history.version import __version__
from clirace.history.vocab import Failure, Outcome
from clirace.run import observe, services
from clirace.run.cleanup import end_adopted, end_run, interrupts_held, isolation, make_workdir, sweep_leftovers
from clirace.run.launch import allow_width
from clirace.scenarios import SCENARIOS, SIDE_BY_SIDE, Context
from clirace.scenarios._box import run_template_setup, shared_between_sandboxes
from clirace.scenarios.plan import plan
from clirace.spec import Spec, placeholders
from clirace.spec._yaml import load_located
from clirace.verdict.baseline import Snapshot, snapshot
from clirace.verdict.result import Result
from clirace.verdict.rubric import criteria, score


def run(spec: Spec, options: RunOptions, progress: Callable[[str], None] | None = None,
        on_history: Callable[[History], Any] | None = None, *, keep: bool = False) -> Result:
    """Stages 1-8 for a loaded spec; `keep`: leave the sandboxes on disk (--keep), where History.kept says."""
    usable, why = observe.available() if options.strace else (False, "turned off with --no-strace")
    rounds, parallel = options.rounds or spec.rounds, options.parallel or spec.parallel
    allow_width(parallel)
    never_waits = spec.lock is not None and spec.lock.never_waits
    wanted = registry.scenarios_for(options.only, never_waits) if options.only else set(SCENARIOS)
    spec_sha256, tool_sha256 = _fingerprints(spec)
    history = History(
        spec_path=str(spec.path),
        options=options,
        environment=Environment(strace=usable, strace_note=why, clirace_version=__version__, rounds=rounds,
                                parallel=parallel, spec_sha256=spec_sha256, tool_sha256=tool_sha256),
        plan=plan(spec, options.only, rounds, wanted),  # before anything runs: what a partial history lacks
        spec_places=spec.places)  # where the report's annotations point, as the spec was when it ran
    if on_history:
        on_history(history)  # lets an interrupted run still report what it saw
    services.require(spec, [c.criterion for c in coverage(spec, (usable, why), servers=False) if c.testable])
    step = [""]  # the last progress line: where an interrupt landed

    def say(text: str) -> None:
        step[0] = text
        if progress:
            progress(text)

    started = time.monotonic()
    try:
        _launch(spec, history, Context(spec, options.seed, Path(), rounds=rounds, parallel=parallel,
                                       budget=options.budget, keep=keep, strace=usable, strace_note=why,
                                       progress=say, only=options.only, trials=history.trials,
                                       shard=shards.parse(options.shard) if options.shard else None), wanted)
    except BaseException as exc:
        # An interrupt can come out as an Exception of its own: a clean-up that failed on the way out of it, or a
        # threading primitive it landed in (CPython 3.11: "release unlocked lock"). The interrupt is what happened:
        # raised as it came, check_each would write no partial result.
        stop = interrupt_behind(exc) if isinstance(exc, Exception) else None
        history.stopped = _stopped_by(stop or exc, step[0])
        if stop is not None:
            raise stop from None
        raise
    result = judge(history)
    result.seconds = time.monotonic() - started
    result.kept = history.kept
    return result


def _launch(spec: Spec, history: History, ctx: Context, wanted: set[str]) -> None:
    """Stages 3-4: every wanted scenario, in order, its records added to `history` as each trial ends."""
    sigint_before = _children_get_default_sigint()
    for note in sweep_leftovers()["left"]:  # what an earlier clirace, killed, left running or on disk
        print(f"clirace: start-up sweep: {note}", file=sys.stderr)
    workdir: Path | None = None
    try:
        with interrupts_held():  # made whole, then acted on: the clean-up below finds all of it
            workdir = ctx.workdir = make_workdir()  # with the run's private folder, cgroup and watchdog
        how, note = isolation(workdir)
        history.environment = dataclasses.replace(history.environment, isolation=how, isolation_note=note)
        ctx.services = services.start(spec)  # the servers the spec declares (services/), up for the whole check
        if ctx.services is not None and not _template_filled(ctx, workdir, wanted, history):
            return
        for stage in _stages(wanted, ctx.shard):
            stage_started = time.monotonic()
            shared = _lock_shared_by_sandboxes(history) if len(stage) > 1 else None
            if shared:
                ctx.say(f"{', '.join(stage)}: one after another ({shared})")
            if len(stage) == 1 or shared:
                for name in stage:
                    _guarded(name)(ctx)
            else:
                ctx.side_by_side(*map(_guarded, stage))
            history.environment.stage_seconds["+".join(stage)] = round(time.monotonic() - stage_started, 3)
            if stage == (registry.REFERENCE,):
                _refuse_a_spec_the_tool_does_not_fit(spec, history)
    finally:
        services.stop(ctx.services)
        # whatever a trial left running, even when its own cleanup was cut short (adopted orphans first: without
        # a cgroup, nothing else finds them); then the run's folders
        end_adopted()
        not_removed = list(ctx.not_removed)
        try:
            with interrupts_held():  # removed whole: an interrupt now (a second one, or one as the run ends) waits
                not_removed += end_run(workdir, keep=ctx.keep) if workdir is not None else []
        finally:
            if sigint_before is not None:
                signal.signal(signal.SIGINT, sigint_before)
            if ctx.keep:
                history.kept = str(workdir)  # where they are, also when the run is interrupted
            history.not_removed = tuple(dict.fromkeys(not_removed))


def _stages(wanted: set[str], shard: tuple[int, int] | None = None) -> list[tuple[str, ...]]:
    """The wanted scenarios in run order, those of SIDE_BY_SIDE that follow each other grouped to run at once.
    With --shard K/N: the reference and the workloads' stages in every shard (the oracle, and the rounds each
    shard divides among its own), every N-th of the others."""
    stages: list[tuple[str, ...]] = []
    for name in (n for n in SCENARIOS if n in wanted):
        if stages and name in SIDE_BY_SIDE and stages[-1][-1] in SIDE_BY_SIDE:
            stages[-1] += (name,)
        else:
            stages.append((name,))
    everywhere = [s for s in stages if s in ((registry.REFERENCE,), ("workloads",))]
    shared_out = [s for s in stages if s not in everywhere]
    return [s for s in stages if s in everywhere or shards.owns(shard, shared_out.index(s))]


def _fingerprints(spec: Spec) -> tuple[str, str]:
    """The sha256 of the spec and of the tool it runs (history/shards.py: shards of different ones are not joined)."""
    command = placeholders.expand_all(spec.command, {"spec_dir": spec.spec_dir, "python": sys.executable})
    return shards.fingerprints(Path(spec.path), tuple(command), spec.spec_dir, spec.env.get("PATH"))


def _stopped_by(exc: BaseException, step: str) -> str:
    """Why the run ended before its plan was done, for the history (and so for every later judgement of it)."""
    how = {"KeyboardInterrupt": "interrupted (Ctrl-C)", "Terminated": "terminated (SIGTERM)"}.get(
        type(exc).__name__, f"stopped by {'an error' if isinstance(exc, Exception) else type(exc).__name__}")
    return f"{how} during {step!r}" if step else how


def _lock_shared_by_sandboxes(history: History) -> str | None:
    """Why the lock experiments must not run side by side, or None. Side by side, each has its own sandbox; a
    tool that locks or writes a file outside it (a hard-coded /tmp/tool.lock) shares it between them, and one
    experiment's holder would then refuse another's contender. Only a trace (of a workload round, or of a lock
    command's reference run) can show where the tool locks: without one, they run one after another."""
    traced = [t for t in history.trials if isinstance(t, (WorkloadRound, Alone)) and t.traces and not t.error]
    if not traced:
        return "no traced round shows where the tool locks"
    shared = shared_between_sandboxes(traced)
    return f"the tool locks or writes {shared[0]}, outside its sandbox" if shared else None


def _template_filled(ctx: Context, workdir: Path, wanted: set[str], history: History) -> bool:
    """services.postgres.setup run against the template database. With no answer twice, nothing can run and
    nothing is decided: every wanted experiment is a NotRun that says so (its checks undecided, the tool's
    doing, not clirace's bug nor a spec error)."""
    try:
        ctx.services.fill_template(workdir, run_template_setup)
    except TrialFailed as exc:
        history.trials.extend(NotRun(name=name, experiment=name, failed_by=Failure.TOOL, error=str(exc),
                                     hint=SILENT_SETUP_HINT) for stage in _stages(wanted, ctx.shard) for name in stage)
        return False
    return True


SILENT_SETUP_HINT = ("Run services.postgres.setup's commands by hand against an empty database (a hang there is the "
                     "tool's), or check again on a less loaded machine, or raise tool.timeout.")


def _guarded(name: str) -> Callable[[Context], None]:
    """The scenario, with a failure outside any trial (each trial guards itself) recorded as an undecided NotRun:
    that experiment cannot decide, and the others still run."""
    def scenario(ctx: Context) -> None:
        try:
            SCENARIOS[name](ctx)
        except Exception as exc:  # noqa: BLE001
            if (stop := interrupt_behind(exc)) is not None:
                raise stop from None  # the user's Ctrl-C or SIGTERM, not clirace's failure: the run stops
            ctx.trials.append(NotRun(name=name, experiment=name, failed_by=Failure.CLIRACE, error=(
                f"clirace failed while running this experiment ({type(exc).__name__}: {exc}); this is a "
                "bug in clirace, please report it")))
    return scenario


def _refuse_a_spec_the_tool_does_not_fit(spec: Spec, history: History) -> None:
    """A workload whose invariant fails when its commands run alone is a spec error, not a finding: say so
    before anything runs in parallel (exit 2). clirace's own failure in a reference run is no spec error: it is
    a bug, reported as one (exit 3, naming the trial). The tool's failure alone leaves its workload undecided."""
    found = reference.problems(history)
    ours = next((p for p in found if p.failure is Failure.CLIRACE), None)
    failed = history.not_run(registry.REFERENCE)
    if ours is not None or (failed is not None and failed.error):
        where = f"in the reference run {ours.trial} ({ours.workload})" if ours else "in the reference runs"
        said = ours.message if ours else failed.error  # type: ignore[union-attr]
        raise InternalError(f"clirace failed {where}, before any parallel round: {said}")
    wrong = [p for p in found if p.spec]
    if wrong:
        said = "; ".join(f"{p.workload}: {p.message}" for p in wrong)
        raise SpecError(f"the spec does not fit the tool: run alone, before any parallel round, {said}.",
                        where=_spec_line(spec, next((p.key for p in wrong if p.key), ())),
                        hint=("Fix the lock's commands (lock.contender, lock.hold, lock.error_command, "
                              "lock.wait_option)" if wrong[0].workload == "lock" else
                              "Fix the workload's commands, key or regex") + " so that they do what the "
                             "spec says when nothing else runs (try them by hand in a fresh HOME).")


def _spec_line(spec: Spec, key: tuple[str | int, ...]) -> str:
    """'file:line:column' of the spec's `key` (for lock.hold, the command under it), else the spec's path."""
    if not key:
        return str(spec.path)
    try:
        located = load_located(spec.path)
    except (SpecError, OSError):  # changed on disk since it was loaded: the path still says which spec
        return str(spec.path)
    deeper = [(*key, *sub) for sub in (("park", "command"), ("command",), ("run",))] if key == reference.HOLDER_KEY else []
    return next((located.key_marks[k] for k in deeper if k in located.key_marks), None) or located.where_key(key)


def _children_get_default_sigint() -> Any:
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


def loud_failures(history: History) -> str | None:
    """How many of the workloads' parallel commands failed loudly (a non-zero exit): the checks judge the state
    those that exited 0 left, so a round where most failed is said, not hidden behind a pass."""
    rounds = [t for t in history.trials if isinstance(t, WorkloadRound) and not t.serial and not t.error]
    runs = [(t, inv) for t in rounds for inv in t.invocations
            if inv.label.split("-")[0] in reference.RUN_LABELS and not inv.label.startswith(RAN_AGAIN)]
    loud = [(t, inv) for t, inv in runs if inv.outcome is Outcome.FAIL]
    if not loud:
        return None
    trial, first = loud[0]
    printed = first.printed(100).replace(trial.sandbox, "{sandbox}") if trial.sandbox else first.printed(100)
    return (f"{len(loud)} of {len(runs)} parallel commands failed loudly (e.g. {first.label}: {first.ending()}; "
            f"{printed}); the workload checks judge what those that exited 0 left.")


def judge(history: History) -> Result:
    """Checks, score and notes from a history alone (a fresh one, or one saved by `--history`)."""
    only = history.options.only
    verdicts = registry.judge_all(history)
    for check_id in verdicts:
        if only and check_id not in only and check_id not in registry.ADVICE_ONLY:  # it did not run: say so, rather
            # than "not exercised by this spec" (a check that only advises never decides a criterion either way)
            verdicts[check_id] = Verdict(check_id, NOT_TESTED, "not run (--only)",
                                         hint="Run without --only to test it.")
    section = load_section("s15")
    crits = criteria(section, verdicts)
    result = Result(history.spec_path, history.options.seed, score(section, crits), crits, verdicts, history,
                    observed_lines=observed_lines(history))
    for verdict in verdicts.values():
        for f in verdict.findings:
            f.evidence.replay = result.replay(registry.replayed_by(verdict.check, f.evidence.trial))
    if not history.environment.strace:
        result.notes.append(f"File observation and crash injection were off: {history.environment.strace_note}. "
                            "Criteria that need them are reported as not tested.")
    if only:
        result.notes.append(f"Only these checks ran: {', '.join(only)}; the score covers only what ran.")
    if (loud := loud_failures(history)) is not None:
        result.notes.append(loud)
    if history.not_removed:
        result.notes.append(f"clirace could not remove {len(history.not_removed)} of the files and folders it made; "
                            f"remove them by hand: {'; '.join(history.not_removed)}.")
    result.unfinished = [gap.message() for gap in gaps(history)]
    result.interrupted = result.interrupted or bool(history.stopped)
    if history.stopped:
        result.notes.append(f"Interrupted: this is a partial result; the run was {history.stopped}. Criteria whose "
                            "experiments did not all finish are undecided.")
    if result.unfinished:
        result.notes.append(f"Not run to the end: {'; '.join(result.unfinished)}.")
    return result


# A baseline (`check --baseline`, `diff`): a saved result, or a saved history judged again by this clirace.
def snapshot_of(result: Result, source: str = "this run") -> Snapshot:
    """A run as a baseline sees it: its JSON result (as_dict) read into a Snapshot."""
    from clirace.report.jsonout import as_dict
    return snapshot(as_dict(result), source)


def load_baseline(path: Path) -> Snapshot:
    """A saved JSON result or history (judged again by this clirace)."""
    from clirace.errors import HistoryError
    from clirace.history import FORMAT, MAX_BYTES, History

    try:
        with open(path, "rb") as handle:
            # A history as clirace writes it is read as a stream (History.load), never whole.
            streamed = re.match(rb'\s*\{\s*"format":\s*"' + FORMAT.encode(), handle.read(256)) is not None
            handle.seek(0)
            data = None if streamed else json.loads(handle.read(MAX_BYTES + 1))
    except FileNotFoundError:
        raise UsageError(f"{path}: no such file.", hint="Give a saved JSON result or history.") from None
    except (OSError, ValueError, RecursionError) as exc:
        raise UsageError(f"{path}: cannot read it as JSON ({str(exc)[:120]}).") from None
    if streamed:
        try:
            return snapshot_of(judge(History.load(path)), str(path))
        except HistoryError as exc:
            raise UsageError(exc.paragraph()) from None
    if isinstance(data, list) and len(data) == 1:  # `check --format json` over one spec in a list
        data = data[0]
    if isinstance(data, dict) and str(data.get("format", "")).startswith(FORMAT):
        try:
            return snapshot_of(judge(History.from_json(data, str(path))), str(path))
        except HistoryError as exc:
            raise UsageError(exc.paragraph()) from None
    if isinstance(data, dict) and "error" in data and "score" not in data:
        raise UsageError(f"{path}: the run it records did not finish ({data['error'].get('message', '')}).")
    if not isinstance(data, dict):
        raise UsageError(f"{path}: not a clirace JSON result or history (a JSON {type(data).__name__}).")
    return snapshot(data, str(path))
