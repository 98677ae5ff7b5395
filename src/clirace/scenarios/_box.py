"""A trial's sandbox and launcher, with the spec's base command and setup applied, and its record.

`Context.box(RecordType, name, round)` gives a Box: a fresh sandbox with setup done, a launcher, and the
raw material of the record (invocations, events, the record's own fields in `box.fields`). When the block
ends, however it ends, the record is built once and added to the history: a trial that could not finish
(setup failed, a holder never became ready, clirace itself failed, or the run was interrupted) carries the
reason in `error`, and the rest of the run goes on.
"""
from __future__ import annotations

import dataclasses
import os
import random
import secrets
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clirace.errors import InternalError, ServiceFailed, SpecError, TrialFailed, interrupt_behind
from clirace.history import Alone, Event, FileOp, Invocation, Leftover, NotRun, Trial
from clirace.history.vocab import INTERRUPTED_TRIAL, EventKind, Failure, Outcome
from clirace.run import observe, safefs
from clirace.run.cleanup import end_adopted, interrupts_held
from clirace.run.launch import Launcher, Running, stop_all
from clirace.run.sandbox import Sandbox
from clirace.scenarios import outlived
from clirace.scenarios.plan import lock_commands_alone, workloads_for
from clirace.spec import OwnCommand, Spec, Workload, placeholders

HALT_WAIT = 10.0  # how long an interrupted run waits for the experiments beside it to stop (each at its next step)
HALT_GIVE_UP = 60.0  # ... and for all of them together, at most: their processes are ended, each trial has a deadline


def shared_between_sandboxes(trials: Iterable[Trial]) -> list[str]:
    """Files the tool locked or wrote outside its sandbox in these trials' traces (observe.shared_paths): what
    makes two sandboxes not independent, so what they show side by side is not what the tool does alone."""
    return sorted({path for t in trials for ops in (getattr(t, "traces", None) or {}).values()
                   for path in observe.shared_paths(ops, t.sandbox)})


def run_template_setup(spec: Spec, sandbox: Sandbox, served: Any, commands: Any) -> None:
    """services.postgres.setup, run once against the template database as a trial's setup is run (the
    servers take this from the pipeline: they know no scenario). A command that gave no answer raises
    TrialFailed (Failure.TOOL); one that refused, SpecError; clirace's own failure, InternalError."""
    box = Box(spec, sandbox, random.Random(0), served)
    try:
        box.setup(commands)
    except TrialFailed as exc:
        if Failure(exc.failure) is Failure.TOOL:  # no answer (killed at its deadline): the caller runs it again
            raise
        if Failure(exc.failure) is Failure.CLIRACE:  # the sandbox or the machine, not the tool
            raise InternalError(f"services.postgres.setup, run once against the template database, could not be "
                                f"carried out: {exc}; nothing was run", where=str(spec.path)) from None
        raise SpecError(f"services.postgres.setup, run once against the template database: {exc}.",
                        where=str(spec.path)) from None
    finally:
        box.end_all()
        box.close()


@dataclass
class Context:
    """What every scenario gets: the spec, the run's random source (from the seed), and run-wide options."""
    spec: Spec
    seed: int
    workdir: Path
    rounds: int
    parallel: int
    budget: float | None = None  # seconds of extra rounds after the spec's, shared among the workloads
    keep: bool = False
    strace: bool = False
    strace_note: str = ""
    progress: Callable[[str], None] | None = None
    only: tuple[str, ...] = ()  # check ids asked for with --only (empty: all)
    shard: tuple[int, int] | None = None  # --shard K/N: the rounds this run does (shards.owns)
    trials: list[Trial] = field(default_factory=list)  # the history's own list: an interrupted run keeps them
    earlier: list[Trial] = field(default_factory=list)  # the records before a side-by-side stage began
    sweeping: bool = True  # end adopted orphans as each trial ends (off while trials run side by side)
    not_removed: list[str] = field(default_factory=list)  # what clirace could not remove, "PATH: why" (shared)
    services: Any = None  # services.Services: the servers the spec declares, each trial given its own state
    # Shared by the contexts of side-by-side experiments: set when the run is interrupted, so that the others
    # start nothing more; and the boxes of the trials running, so that their processes can be ended at once.
    halt: threading.Event = field(default_factory=threading.Event)
    live: list[Box] = field(default_factory=list)

    @property
    def workloads(self) -> list[Workload]:
        return workloads_for(self.spec, self.only)

    @property
    def lock_commands_alone(self) -> bool:
        return lock_commands_alone(self.only)

    def alone_seconds(self, command: str, fastest: bool = False) -> float | None:
        """How long lock.`command` took run alone on fresh state (the longest of its reference runs, or with
        `fastest` the shortest), the tool's own measure of its time on this machine at this load; None without
        a reference run."""
        runs = [inv.duration for t in (*self.earlier, *self.trials) if isinstance(t, Alone) and t.command == command
                and not t.error for inv in t.invocations if inv.label == "alone"]
        return (min(runs) if fastest else max(runs)) if runs else None

    @property
    def input_token(self) -> str:
        """The random part of the output workload's inputs: one per run, so every round and the serial
        reference runs feed the tool the same inputs."""
        return f"{random.Random(f'{self.seed}/inputs').getrandbits(32):08x}"

    def side_by_side(self, *experiments: Callable[[Context], None]) -> None:
        """Run independent experiments at the same time, each in its own thread and sandboxes, each given a
        context of its own. Their records join the history in the order the experiments were given, not the
        order they ended, so two runs of the same spec keep the same history order. The first exception (an
        interrupt) is raised once all have ended."""
        errors: list[BaseException] = []
        own = [dataclasses.replace(self, trials=[], earlier=[*self.earlier, *self.trials], sweeping=False)
               for _ in experiments]

        def guarded(experiment: Callable[[Context], None], ctx: Context, done: threading.Event) -> None:
            try:
                experiment(ctx)
            except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread below
                errors.append(exc)
            finally:
                done.set()

        # Each is waited for through an Event of its own, never Thread.join: a join that Ctrl-C interrupts marks
        # the thread ended while it still runs (CPython 3.11's bpo-45274 handling releases the running thread's
        # own lock, and its end then fails with "release unlocked lock"), so the run's cleanup began while a trial
        # still wrote in its sandbox, and found it not empty.
        dones = [threading.Event() for _ in experiments]
        # (No sweep of adopted orphans while they run: another trial's children look adopted too.)
        threads = [threading.Thread(target=guarded, args=(experiment, ctx, done), daemon=True)
                   for experiment, ctx, done in zip(experiments, own, dones, strict=True)]
        started: list[threading.Event] = []
        try:
            # Started whole, then interruptible. A SIGTERM raised inside Thread.start() could come before the thread
            # ran (its `done` never set: the stop waited HALT_GIVE_UP for it) or inside start()'s own Condition
            # (CPython 3.11: "RuntimeError: release unlocked lock"): test_signal_steps, about 3% of the stops at
            # "lock: contender while the lock is held", the moment these threads start.
            with interrupts_held():
                for thread, done in zip(threads, dones, strict=True):
                    thread.start()
                    started.append(done)
            for done in started:
                done.wait()
        except BaseException:  # an interrupt reaches this thread only: the others must stop before the run ends,
            self.halt.set()  # or they go on starting processes and making sandboxes after its cleanup
            for box in list(self.live):
                box.end_all()
            # Each stops at its next step, its processes ended above. The run's cleanup must not begin while one
            # still ends its trial (it writes the record and removes its sandbox). So all are waited for, up to
            # HALT_WAIT at first and HALT_GIVE_UP in all.
            begun = time.monotonic()
            for done in started:
                done.wait(max(HALT_WAIT, HALT_GIVE_UP - (time.monotonic() - begun)))
            raise  # (an interrupt hidden behind an Exception is taken for itself by pipeline.run)
        finally:
            for ctx in own:
                self.trials.extend(ctx.trials)
            end_adopted()
        if errors:
            raise errors[0]

    def say(self, text: str) -> None:
        if self.progress:
            self.progress(text)

    def not_run(self, experiment: str, why: str, hint: str = "", declared: str = "") -> None:
        self.trials.append(NotRun(name=experiment, experiment=experiment, why=why, hint=hint, declared=declared))

    @contextmanager
    def box(self, record: type[Trial], name: str, round_: int = 0, setup: Any = None) -> Iterator[Box]:
        """A fresh sandbox with setup done (the spec's, then `setup`); removed afterwards unless --keep."""
        if self.halt.is_set():  # interrupted beside another experiment: make nothing the run's cleanup may be removing
            raise KeyboardInterrupt
        sandbox = Sandbox(self.workdir, record.KIND, self.spec.spec_dir)
        root = sandbox.root
        served, broken = self._served(sandbox)
        box = Box(self.spec, sandbox, random.Random(f"{self.seed}/{record.KIND}/{name}/{round_}"), served)
        box.round = round_
        box.unusable = sandbox.tampered()  # the target of an earlier trial replaced the run folder
        box.halt = self.halt
        self.live.append(box)
        error, failure = None, None
        try:
            try:
                box.halted()
                if broken:  # the trial's own server did not start: the machine's doing, not the spec's
                    raise TrialFailed(broken, Failure.CLIRACE)
                box.setup()
                if setup:
                    box.setup(setup)
            except TrialFailed as exc:
                # A generator context manager must yield once: the body gets a box whose first command raises.
                # Whose failure it was, the setup says: the spec's only for a clear refusal (Box.setup).
                error = box.unusable = str(exc)
                failure = Failure(exc.failure)
            yield box
        except TrialFailed as exc:
            error, failure = (error, failure) if error else (str(exc), Failure(exc.failure))
        except Exception as exc:  # noqa: BLE001 - one experiment's failure must not sink the run
            if (stop := interrupt_behind(exc)) is not None:  # a clean-up failed on the way out of Ctrl-C or SIGTERM
                error, failure = INTERRUPTED_TRIAL, Failure.INTERRUPTED
                raise stop from None
            error, failure = (f"clirace failed inside this experiment ({type(exc).__name__}: {exc}); this is a bug "
                              "in clirace or a limit of this machine, please report it"), Failure.CLIRACE
        except BaseException:  # Ctrl-C, SIGTERM: the trial is incomplete and must not be judged
            error, failure = INTERRUPTED_TRIAL, Failure.INTERRUPTED
            raise
        finally:
            self.live.remove(box)
            box.end_all()
            if served is not None:  # what the trial's servers saw; then their state goes (before the sweep below)
                box.fields.update(served.finish(time.time() - (time.monotonic() - box.launcher.clock0)))
            if self.sweeping:  # (not while another trial runs beside this one: its children look adopted too)
                end_adopted()  # a daemon that shed the marker (cleared its environment), adopted by the CLI
            error = sandbox.tampered() or error  # the target's doing voids whatever the trial saw
            self.trials.append(record(name=name, round=round_, invocations=tuple(box.invocations),
                                      events=tuple(box.events), error=error, failed_by=failure, sandbox=str(root),
                                      **box.fields))
            box.close()
            self.not_removed.extend(sandbox.end(keep=self.keep))

    def _served(self, sandbox: Sandbox) -> tuple[Any, str]:
        """The trial's own servers (spec `services`), or why they could not start."""
        if self.services is None:
            return None, ""
        try:
            return self.services.for_trial(sandbox.private, sandbox.marker), ""
        except ServiceFailed as exc:
            return None, f"the trial's server could not start: {exc}"


class Box:
    def __init__(self, spec: Spec, sandbox: Sandbox, rng: random.Random, served: Any = None):
        self.spec = spec
        self.served = served  # services.TrialServices: the trial's own servers, if the spec declares any
        # Every random choice of a trial (tokens, delays, kill points) comes from here: derived from the run's
        # seed and the trial's identity, so `--only CHECK` replays a trial exactly as the full run made it.
        self.rng = rng
        self.sandbox = sandbox
        self.env = sandbox.environ(spec.env)
        env_changes = {k: self.env[k] for k in ("HOME", "TMPDIR", "XDG_CONFIG_HOME", "XDG_STATE_HOME")}
        if served is not None:  # the servers' addresses, in the environment and in tool.env's placeholders
            self.env.update(served.env())
            self.env.update({k: self.path(v) for k, v in spec.env.items()})
            env_changes.update(served.env())
        env_changes.update({k: self.env[k] for k in spec.env})
        self.launcher = Launcher(self.env, sandbox.expand(spec.cwd), env_changes, spec.timeout,
                                 cgroup=sandbox.cgroup.procs if sandbox.cgroup else None)
        self.invocations: list[Invocation] = []
        self.events: list[Event] = []
        self.fields: dict[str, Any] = {}  # the record's own fields (start, keys, runs, ...)
        self._running: list[Running] = []
        self.halt: threading.Event | None = None  # Context.halt: the run was interrupted, start nothing more
        self.unusable: str | None = None  # why the trial cannot go on (its setup failed), if it cannot
        self.round = 0  # which round of its experiment the trial is
        self._own: list[int] = []  # fds on clirace's own files of this trial (closed at its end)
        self._trace_dir: Path | None = None

    @property
    def trace_dir(self) -> Path:
        """Where strace writes this trial's traces (NAME.PID per process), made on first use in the sandbox's
        private folder, and named through the fd clirace holds on it (/proc/PID/fd/N): strace and clirace's
        readers reach it through that fd whatever is done to the folder's path."""
        if self._trace_dir is None:
            self._trace_dir = self._through_fd(self._open_trace_dir)
        return self._trace_dir

    def _open_trace_dir(self) -> int:
        name = f"trace-{secrets.token_hex(8)}"  # a name nobody can plant a link at in advance
        safefs.mkdirs(self.sandbox.private, name, 0o700)
        return safefs.open_dir(self.sandbox.private, name)

    def own_file(self, prefix: str) -> Path:
        """A new empty file for strace to write into (`-o`), made by clirace in the trace folder with
        O_EXCL|O_NOFOLLOW under a name nobody can guess, and named through clirace's fd on it (/proc/PID/fd/N):
        strace opens that file, never a name at which a target could have planted a link or FIFO first."""
        trace_dir = self.trace_dir

        def made() -> int:
            flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
            return os.open(trace_dir / f"{prefix}-{secrets.token_hex(8)}", flags, 0o600)
        return self._through_fd(made)

    def _through_fd(self, opener: Callable[[], int]) -> Path:
        try:
            fd = opener()
        except (safefs.Refused, FileExistsError) as exc:
            raise TrialFailed(f"clirace's private folder for this trial ({self.sandbox.private}) was tampered with: "
                              f"{exc}; the target went looking for it") from None
        self._own.append(fd)
        return Path(f"/proc/{os.getpid()}/fd/{fd}")

    def close(self) -> None:
        for fd in self._own:
            os.close(fd)
        self._own = []

    def file_ops(self, name: str) -> tuple[FileOp, ...]:
        """The file operations traced under trace_dir / name, as concern this sandbox (observe.file_events)."""
        return observe.file_events(self.trace_dir / name, self.launcher.cwd, str(self.sandbox.root))

    def token(self) -> str:
        return f"{self.rng.getrandbits(32):08x}"

    def values(self) -> dict[str, object]:
        """What the placeholders stand for in this trial: the sandbox's paths and its servers' addresses."""
        return {**self.sandbox.values(), **(self.served.values() if self.served is not None else {})}

    def path(self, template: str, **extra: object) -> str:
        return placeholders.expand(template, {**self.values(), **extra})

    def argv(self, sub: Any, prefix: Any = (), **extra: object) -> list[str]:
        """The full command line: base command, then `prefix` (e.g. a session flag), then `sub`; or `sub` alone, as it
        is, when it is a command of its own (OwnCommand: run or sh)."""
        if self.unusable:
            raise TrialFailed(self.unusable)
        tampered = self.sandbox.tampered()  # before every command: none runs in a folder swapped in by the target
        if tampered:
            self.unusable = tampered
            raise TrialFailed(tampered)
        values = {**self.values(), **extra}
        if isinstance(sub, OwnCommand):  # a program of its own (setup's `run`, lock.hold.run): not the tool
            return placeholders.expand_all(sub.argv, values)
        return [*placeholders.expand_all(self.spec.command, values), *placeholders.expand_all(prefix, values),
                *placeholders.expand_all(sub, values)]

    def now(self) -> float:
        return round(time.monotonic() - self.launcher.clock0, 6)

    def event(self, kind: EventKind, label: str = "", detail: str = "") -> None:
        self.events.append(Event(self.now(), kind, label, detail))

    def record(self, invocation: Invocation) -> Invocation:
        invocation = dataclasses.replace(invocation, sandbox=str(self.sandbox.root))
        self.invocations.append(invocation)
        return invocation

    def run(self, label: str, sub: Any, prefix: Any = (), extra_env: dict[str, str] | None = None, wrap: Any = (),
            timeout: float | None = None, **extra: object) -> Invocation:
        return self.run_argv(label, self.argv(sub, prefix, **extra), extra_env, timeout, wrap)

    def halted(self) -> None:
        """Raise KeyboardInterrupt in an experiment running beside one the interrupt reached (side_by_side)."""
        if self.halt is not None and self.halt.is_set():
            raise KeyboardInterrupt

    def run_argv(self, label: str, argv: list[str], extra_env: dict[str, str] | None = None,
                 timeout: float | None = None, wrap: Any = ()) -> Invocation:
        """Run one invocation to its end. It is registered while it runs, so that an interrupt ends it the
        way every invocation is ended (SIGTERM, a grace period, SIGKILL), not by the run's last sweep."""
        self.halted()
        running = self.launcher.start(label, argv, extra_env, timeout, wrap=wrap)
        self._running.append(running)
        return self.finish(running)

    def start(self, label: str, sub: Any, prefix: Any = (), extra_env: dict[str, str] | None = None, wrap: Any = (),
              timeout: float | None = None, pty: bool = False, stdin: Any = None, **extra: object) -> Running:
        """Start one invocation; its stdin is /dev/null unless `stdin` (an fd) is given."""
        more = {} if stdin is None else {"stdin": stdin}
        self.halted()
        running = self.launcher.start(label, self.argv(sub, prefix, **extra), extra_env, timeout, wrap=wrap, pty=pty,
                                      **more)
        self._running.append(running)
        return running

    def run_free(self, label: str, argv: list[str], extra_env: dict[str, str] | None = None,
                 watched: bool = False) -> Invocation:
        """Run a command that needs the tool's lock free, nothing else of the trial running (a reference run's command,
        a setup command, the release experiment's next). Failing while a process left by a finished invocation of
        the trial lives on, it is run again once that process has gone, and the refused run is kept as
        refused-LABEL (outlived.py: the tool's lock outlived its command). `watched`: under strace's watch, its
        file operations kept in the record's traces; one that strace kept to its deadline for a process the command
        left running is kept as traced-LABEL and run again unwatched."""
        inv = self._run_watched(label, label, argv, extra_env, watched)
        at = len(self.invocations) - 1
        if watched and inv.timed_out and (found := self.leftovers()):
            # strace -f follows a process the command leaves running, and waits for it: the invocation lasted to its
            # deadline for that process, not for the command. Run it again unwatched, that process ended first.
            self.fields["leftovers"] = (*self.fields.get("leftovers", ()), *outlived.let_go(found, wait=0.0))
            self.invocations[at] = dataclasses.replace(inv, label=f"traced-{label}")
            self.fields["traces"][f"traced-{label}"] = self.fields["traces"].pop(label)
            inv, watched = self.run_argv(label, argv, extra_env), False
            at = len(self.invocations) - 1
        if inv.outcome is not Outcome.FAIL:
            return inv
        found = self.leftovers()
        if not found:
            return inv

        def again() -> Invocation:
            self.invocations[at] = dataclasses.replace(inv, label=f"refused-{label}")
            if watched:
                self.fields["traces"][f"refused-{label}"] = self.fields["traces"].pop(label)
            return self._run_watched(label, f"again-{label}", argv, extra_env, watched)

        records, second = outlived.refused_while_left(found, inv, again)
        self.fields["leftovers"] = (*self.fields.get("leftovers", ()), *records)
        return second or inv

    def _run_watched(self, label: str, trace: str, argv: list[str], extra_env: dict[str, str] | None,
                     watched: bool) -> Invocation:
        if not watched:
            return self.run_argv(label, argv, extra_env)
        inv = self.run_argv(label, argv, extra_env, wrap=observe.watch_prefix(self.trace_dir / trace))
        self.fields.setdefault("traces", {})[label] = self.file_ops(trace)
        return inv

    def leftovers(self) -> list[Leftover]:
        """Processes the trial's finished invocations left running (outlived.find)."""
        ended = {inv.label: inv.ended for inv in self.invocations}
        return outlived.find(self._running, ended, self.now(), self.sandbox.cgroup.procs if self.sandbox.cgroup else None)

    def settle(self) -> None:
        """Before a step that needs the tool's lock free for every invocation it starts (a parallel round, a lock
        holder): a process left by a finished invocation that still holds a kernel lock is recorded, then ended
        once idle (outlived.py); whatever the step shows would otherwise be that process's doing."""
        holding = [found for found in self.leftovers() if found.locks]
        if holding:
            self.fields["leftovers"] = (*self.fields.get("leftovers", ()), *outlived.let_go(holding))

    def finish(self, running: Running) -> Invocation:
        return self.record(running.finish())

    def together(self, jobs: Any) -> list[Invocation]:
        """jobs: (label, full argv, extra env[, wrap]). Released at once from the barrier; all finished on return."""
        self.halted()
        runnings = self.launcher.start_together(jobs)
        self._running.extend(runnings)
        return [self.record(r.finish()) for r in runnings]

    def setup(self, commands: Any = None) -> None:
        """The spec's setup commands (or a workload's): each appended to tool.command, or run as it is when it
        is a command of its own (OwnCommand: `run` or `sh`)."""
        for n, sub in enumerate(self.spec.setup if commands is None else commands):
            label = f"setup-{n}" if commands is None else f"workload-setup-{n}"
            if isinstance(sub, OwnCommand):
                inv = self.run_free(label, placeholders.expand_all(sub.argv, self.sandbox.values()))
            else:
                inv = self.run_free(label, self.argv(sub))
            if inv.outcome is Outcome.UNKNOWN:  # killed at its deadline (a loaded machine, a hung tool): no answer
                raise TrialFailed(f"setup command {inv.command()!r} ended without an answer ({inv.ending()}; "
                                  f"{inv.printed()})", Failure.TOOL,
                                  meaning="whether the spec fits the tool is unknown")
            if not inv.ok:  # a clear refusal in a fresh sandbox: the spec asks for what the tool does not do
                raise TrialFailed(f"setup command {inv.command()!r} failed ({inv.ending()}; {inv.printed()})",
                                  Failure.SPEC)
        self.settle()  # the experiment starts from the setup's state, not from a lock its processes still hold

    def end_all(self) -> None:
        stop_all(list(self._running))  # together: one grace period, one proof that every group is gone
