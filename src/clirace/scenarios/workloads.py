"""Parallel workloads: N invocations released together, then the state read back.

One trial per workload per round. When strace can trace, every round after the first is amplified: each
invocation runs under strace, which records its file operations and delays its writes and renames by a
few milliseconds chosen from the seed (see observe.amplify_prefix). The first round stays plain, so a tool
is also seen at its natural speed. The record keeps every value the invariant needs (start, keys written,
items queued, inputs, delays) and what was read back, raw: the checks parse and judge it.
"""
from __future__ import annotations

import os
import stat
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from clirace.errors import NotAvailable, TrialFailed
from clirace.history import (
    ClaimRound,
    ConfigSnapshot,
    CounterRound,
    KeysRound,
    OutputRound,
    OutputRun,
    Rendezvous,
    WorkloadRound,
    shards,
)
from clirace.history.vocab import ConfigFormat, Outcome, WorkloadKind
from clirace.run import observe, safefs
from clirace.run.launch import Running
from clirace.run.locking import CALLS as LOCK_CALLS
from clirace.run.rendezvous import OVERALL, Arrival, cap_for, commit_point_prefix
from clirace.run.rendezvous import Rendezvous as RendezvousRun
from clirace.run.services.meet import ServerAim, ServerRendezvous, server_aim
from clirace.run.stopper import require
from clirace.scenarios import _sqlite
from clirace.scenarios._box import Box, Context
from clirace.scenarios.aim import Aim, aim
from clirace.spec import Workload

DELAY_MS = (2, 20)  # range of injected delays; wide enough to overlap python start-up spread on 2 cores
READ_CAP = 256 * 1024  # bytes of a target-written output kept in the history
# A config up to the size the checks judge (configfile.MAX_BYTES; a test holds the two equal), plus a byte, so
# that a larger one says so. Scenarios record and do not parse: they do not import configfile.
CONFIG_CAP = 1 << 20


MAX_ROUNDS = 1000  # a budget never runs more rounds than this per workload


def run(ctx: Context) -> None:
    chosen = ctx.workloads  # --only counter: that workload alone
    for workload in chosen:
        record, runner = RUNNERS[workload.kind]
        target: Aim | None = None  # where to stop them, once a traced round has shown their state
        in_server: ServerAim | None = None  # or, for state in a server (spec services), where the proxy holds them
        extra_until = None  # with --budget, when this workload's extra rounds must stop
        alone = _slowest_alone(ctx, workload.name)  # (its serial reference rounds ran before any of these)
        for round_ in range(MAX_ROUNDS):
            if round_ >= ctx.rounds:
                if not ctx.budget:
                    break
                extra_until = extra_until or time.monotonic() + ctx.budget / len(chosen)
                if time.monotonic() >= extra_until:
                    break
            amplified = ctx.strace and round_ > 0
            mine = shards.owns(ctx.shard, round_)
            # Another shard's round is skipped, except the first traced one while this shard has rounds at a
            # rendezvous still to run: it shows where to stop them, and is dropped once it has (its shard keeps it).
            teaches = amplified or ctx.services is not None  # a trace or the server's log shows where to stop
            later = any(shards.owns(ctx.shard, r) for r in range(round_ + 1, ctx.rounds))
            if not mine and not (teaches and later and target is None and in_server is None):
                continue
            meet = target if amplified and round_ > 1 and rendezvous_usable() else None
            at_server = in_server if round_ > 0 and meet is None else None
            how = " (at a rendezvous)" if meet or at_server else " (amplified)" if amplified else ""
            of = f"{ctx.rounds}" if round_ < ctx.rounds else f"{ctx.rounds}+ (--budget)"
            ctx.say(f"{workload.name}: round {round_ + 1}/{of}, {ctx.parallel} in parallel{how}")
            with ctx.box(record, workload.name, round_, setup=workload.setup) as box:
                box.fields.update(workload=workload.name, amplified=amplified)
                runner(ctx, box, workload, Parallel(box, amplified, meet, at_server, alone), ctx.parallel)
            done = ctx.trials[-1]
            if isinstance(done, WorkloadRound) and done.traces and not done.error:
                target = aim(done) or target
            if isinstance(done, WorkloadRound) and done.server_ops and not done.error:
                in_server = server_aim(done) or in_server
            if not mine:
                ctx.trials.remove(done)


class Serial:
    """Runs a round's invocations one at a time, in order or reversed: the reference for the parallel rounds.
    `watched`: each under strace's watch (observe.watch_prefix), its file operations kept in the record."""

    def __init__(self, box: Box, reverse: bool = False, watched: bool = False):
        self.box, self.reverse, self.watched = box, reverse, watched

    def run(self, jobs: list[Any]) -> None:
        if self.watched:
            self.box.fields["traces"] = {}
        unknown_in_a_row = 0
        for label, argv, env, *_ in reversed(jobs) if self.reverse else jobs:
            # Alone, each command must find the lock free: one refused by a process an earlier one left holding
            # it is run again once that process has gone (Box.run_free), and the leftover is recorded.
            inv = self.box.run_free(label, argv, env, watched=self.watched)
            unknown_in_a_row = unknown_in_a_row + 1 if inv.outcome is Outcome.UNKNOWN else 0
            if unknown_in_a_row == 2:  # it hangs or crashes alone (one slow first run is allowed): stop here,
                # since every command after this one would only wait for its deadline too
                raise TrialFailed(f"{inv.command()!r} ended without saying whether it did its work, twice in a row "
                                  f"({inv.ending()}; {inv.printed()})")


class Parallel:
    """Starts one parallel round: plain, amplified (traced, writes delayed), or at a rendezvous (each stopped
    inside its race window where `meet` says, then all released together); keeps what it observed."""

    def __init__(self, box: Box, amplified: bool, meet: Aim | None = None, at_server: ServerAim | None = None,
                 alone: float | None = None):
        self.box, self.amplified, self.meet, self.at_server = box, amplified, meet, at_server
        self.alone = alone  # the slowest serial reference run of the workload (s): what sizes a rendezvous' cap

    def wrap(self, label: str) -> list[str]:
        if self.meet is not None:  # the lock files too: a refused lock call is what proves one blocked
            paths = [str(self.box.sandbox.root / p) for p in (*self.meet.paths, *self.meet.locks)]
            return commit_point_prefix(self.box.trace_dir / label, paths, self.meet.calls, cwd=self.box.launcher.cwd,
                                       also_trace=",".join(LOCK_CALLS.values()))
        if not self.amplified:
            return []
        delay = self.box.rng.randint(*DELAY_MS)
        self.box.fields.setdefault("delays_ms", {})[label] = delay
        return observe.amplify_prefix(self.box.trace_dir / label, delay)

    def run(self, jobs: list[Any]) -> None:
        """jobs: (label, full argv, extra env, [ignored wrap]); the amplifier wraps each when on."""
        self.box.settle()  # a lock an earlier command's leftover process still holds would refuse the whole round
        if self.at_server is not None and self.box.served is not None:
            self._meet_at_server([(label, argv, env, ()) for label, argv, env, *_ in jobs])  # no strace needed
            return
        wrapped = [(label, argv, env, self.wrap(label)) for label, argv, env, *_ in jobs]
        if self.meet is not None:
            self._meet(wrapped)
            return
        self.box.together(wrapped)
        if self.amplified:
            self.box.fields["traces"] = {label: self.box.file_ops(label) for label, *_ in jobs}


    def _meet(self, jobs: list[Any]) -> None:
        """Start them, wait until each has stopped inside its window (or the others are proven blocked on a
        lock), release them in turn, and record who arrived and when."""
        assert self.meet is not None
        box = self.box
        arrival = Arrival.of([str(box.sandbox.root / p) for p in self.meet.paths], self.meet.ends, self.meet.count,
                             cwd=box.launcher.cwd)
        cap = cap_for(len(jobs), self.alone)
        seen = self._in_turn(jobs, cap, lambda runnings: RendezvousRun.of(runnings, box.trace_dir, overall=cap,
                                                                           arrival=arrival))
        box.fields["rendezvous"] = Rendezvous(
            paths=self.meet.paths, calls=self.meet.calls, aimed=self.meet.why,
            arrived={label: float(a["after_s"]) for label, a in seen["arrived"].items()},
            stopped_at={label: str(a["call"]).replace(str(box.sandbox.root), "{sandbox}")
                        for label, a in seen["arrived"].items()},
            exited_before=tuple(seen["exited_before_arriving"]), released_after=seen["released_after_s"],
            why_released=seen["why"], blocked=dict(seen["blocked"]))

    def _meet_at_server(self, jobs: list[Any]) -> None:
        """The rendezvous for state in a server: the invocations reach it through a proxy that holds each one
        just after its first read of the state (run/services/proxy.py, meet.py); they go on one at a time."""
        assert self.at_server is not None
        box = self.box
        proxy, via = box.served.proxied(self.at_server)
        moved = {name: via(value) for name, value in box.env.items() if via(value) != value}
        jobs = [(label, [via(a) for a in argv], {**(env or {}), **moved}, wrap) for label, argv, env, wrap in jobs]
        try:
            # Not sized from the width (cap_for): 256 redis-py clients held until all had arrived (33 s on two
            # cores) then waited over 5 s for the proxy's answers, and 77 of them gave up with a command maybe
            # applied, a failure clirace would have made. The clients' timeout bounds the hold (meet.HOLD_BUDGET).
            seen = self._in_turn(jobs, OVERALL, lambda runnings: ServerRendezvous(proxy, runnings))
        finally:
            proxy.close()
        box.fields["rendezvous"] = Rendezvous(
            paths=(self.at_server.shown,), calls="the next command after its first read", aimed=self.at_server.why,
            arrived=seen["arrived"], stopped_at=seen["stopped_at"], exited_before=seen["exited_before"],
            released_after=seen["released_after"], why_released=seen["why"])
        box.fields["amplified"] = False  # the proxy holds them; strace does not run

    def _in_turn(self, jobs: list[Any], cap: float,
                 meeting_of: Callable[[list[Running]], RendezvousRun | ServerRendezvous]) -> Mapping[str, Any]:
        """Start the jobs together; the meeting (`meeting_of(runnings)`) waits until they have arrived and lets
        them go on in turn; every invocation recorded; what the meeting saw."""
        box = self.box
        runnings = box.launcher.start_together(jobs, timeout=box.spec.timeout + cap)
        box._running.extend(runnings)
        meeting = meeting_of(runnings)
        try:
            meeting.wait_all_arrived()
            meeting.release_in_turn()
            for running in runnings:
                box.record(running.finish())
        finally:
            meeting.close()
        return meeting.record()


def _slowest_alone(ctx: Context, name: str) -> float | None:
    """The longest an invocation of the workload's serial reference rounds took (s): the tool's own time, alone,
    on this machine at this load; None without a reference round (a shard's, or --only without it)."""
    runs = [inv.duration for t in (*ctx.earlier, *ctx.trials) if isinstance(t, WorkloadRound) and t.serial
            and t.workload == name and not t.error and not t.superseded for inv in t.invocations if not inv.timed_out]
    return max(runs, default=None)


def rendezvous_usable() -> bool:
    try:
        require()
    except NotAvailable:
        return False
    return True


# The reads, adds and earlier writes around a round run one at a time and need the lock free, as the serial runs'
# commands do (Box.run_free): one refused by a process an earlier command left holding the lock runs again once that
# process has gone, and the lock that outlived its command is on record, not taken for the spec's misfit.
def _counter(ctx: Context, box: Box, workload: Workload, parallel: Runner, n: int) -> None:
    box.fields.update(start=workload.start, pattern=workload.value)
    if workload.start is None:
        box.run_free("read-before", box.argv(workload.read))
    parallel.run([(f"inc-{i}", box.argv(workload.run, i=i, n=n, session_id=f"s{i}"), None) for i in range(n)])
    box.run_free("read-after", box.argv(workload.read))


EARLIER_KEYS = 1  # keys written one at a time before each parallel round after the first


def _keys(ctx: Context, box: Box, workload: Workload, parallel: Runner, n: int) -> None:
    token = box.token()
    keys = {f"set-{i}": (workload.key_name(i), f"v{i}-{token}") for i in range(n)}
    # Keys that exist before the round, which a tool that rewrites its state from a stale or empty read wipes.
    # Not in the first round, which starts from the setup's state alone (a config that may not exist yet).
    earlier = {f"earlier-{j}": (workload.key_name(n + j), f"e{j}-{token}") for j in range(EARLIER_KEYS)} \
        if isinstance(parallel, Parallel) and box.round > 0 else {}
    box.fields.update(keys=keys, earlier=earlier)
    for j, (label, (key, value)) in enumerate(earlier.items()):
        box.run_free(label, box.argv(workload.run, i=n + j, n=1, key=key, value=value, session_id="s0"))
    if workload.config:
        box.fields["before"] = snapshot(box, workload)
    parallel.run([(label, box.argv(workload.run, i=i, n=n, key=k, value=v, session_id=f"s{i}"), None)
                  for i, (label, (k, v)) in enumerate(keys.items())])
    if workload.config:
        box.fields["config"] = snapshot(box, workload)
        return
    for label, (key, _value) in {**earlier, **keys}.items():
        writer = next(inv for inv in box.invocations if inv.label == label)
        if writer.outcome is not Outcome.FAIL:  # a write that may have applied is read back too
            box.run_free(f"get-{label.removeprefix('set-')}", box.argv(workload.read, key=key))


def snapshot(box: Box, workload: Workload) -> ConfigSnapshot:
    assert workload.config is not None
    path = Path(box.path(workload.config.path))
    text, why = read_config(box, path, workload.config.format)
    return ConfigSnapshot(str(path), workload.config.format, workload.config.key, text, why, workload.config.query)


def read_config(box: Box, path: Path, fmt: ConfigFormat) -> tuple[str | None, str]:
    """The keys workload's state as the next caller would find it: a config file's text (read_text), or a SQLite
    database's tables (read from a private copy, with its journal rolled back)."""
    if fmt is ConfigFormat.SQLITE:
        return _sqlite.copy_and_read(box.sandbox.root, path, box.sandbox.private / "state-copy", CONFIG_CAP)
    return read_text(path, CONFIG_CAP, box.sandbox.root)


def _claim(ctx: Context, box: Box, workload: Workload, parallel: Runner, n: int) -> None:
    token = box.token()
    items = tuple(f"item{i}-{token}" for i in range(n))
    box.fields.update(items=items, pattern=workload.claimed)
    for i, item in enumerate(items):
        box.run_free(f"add-{i}", box.argv(workload.add, item=item, i=i))
    parallel.run([(f"claim-{i}", box.argv(workload.run, i=i, n=n, session_id=f"s{i}"), None) for i in range(n)])
    if workload.list:
        box.run_free("list-after", box.argv(workload.list))


def _output(ctx: Context, box: Box, workload: Workload, parallel: Runner, n: int) -> None:
    box.fields["runs"] = run_outputs(ctx, box, workload.run, "out", run=parallel.run)


def run_outputs(ctx: Context, box: Box, command: Any, prefix: str, session_flag: Any = None,
                session_env: str | None = None, wrap: Any = None, session_ids: list[str] | None = None,
                run: Any = None) -> dict[str, OutputRun]:
    """N runs, each with its own input file; returns what each produced. The inputs are the same in every
    round and in the serial reference runs (derived from the seed), so each output can be compared with what
    the same input gave when the tool ran alone."""
    token = ctx.input_token
    io = box.sandbox.root / "io"
    runs = {}
    jobs = []
    for i in range(ctx.parallel):
        label = f"{prefix}-{i}"
        inp, out = io / f"{prefix}-input-{i}.txt", io / f"{prefix}-output-{i}"
        marker = f"clirace-input-{i}-{token}"
        try:  # never through a link the target planted at io/ or at the input's name
            safefs.write_new(box.sandbox.root, safefs.within(box.sandbox.root, inp), marker.encode(), parents=True)
        except (safefs.Refused, FileExistsError) as exc:
            raise TrialFailed(f"cannot write the input file {inp}: {getattr(exc, 'special', exc)}") from None
        sid = session_ids[i] if session_ids else f"s{i}"
        argv = box.argv(command, prefix=session_flag or (), i=i, n=ctx.parallel, input=inp, output=out, session_id=sid)
        jobs.append((label, argv, {session_env: sid} if session_env else None, wrap(label) if wrap else ()))
        runs[label] = OutputRun(marker=marker, output=str(out), session_id=sid)
    (run or box.together)(jobs)
    root = box.sandbox.root
    return {label: OutputRun(r.marker, r.output, r.session_id, read_text(Path(r.output), root=root)[0])
            for label, r in runs.items()}


def read_text(path: Path, limit: int = READ_CAP, root: Path | None = None) -> tuple[str | None, str]:
    """(the file's text, "") or (None, why there is none): a missing file, or not a regular file.

    Inside the sandbox `root` the path is walked with O_NOFOLLOW from the sandbox's fd (safefs), so a link
    the target planted is reported, never followed; a named pipe or device is reported, never read; at
    most `limit` + 1 bytes are read (more than `limit` means: too large to judge). A path outside the
    sandbox (the spec allowed it) is opened without blocking and read only if it is a regular file."""
    if root is not None:
        try:
            rel = safefs.within(root, path)
        except ValueError:
            rel = None
        if rel is not None:
            found = safefs.read_capped(root, rel, limit)
            if found is None:
                return None, "missing"
            if isinstance(found, safefs.Special):
                return None, f"not a regular file ({found})"
            return found.decode("utf-8", errors="replace"), ""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return None, "missing"
    except OSError as exc:
        return None, exc.strerror or str(exc)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None, "not a regular file (a named pipe, device or directory)"
        with os.fdopen(fd, "rb", closefd=False) as handle:
            return handle.read(limit + 1).decode("utf-8", errors="replace"), ""
    except OSError as exc:
        return None, exc.strerror or str(exc)
    finally:
        os.close(fd)


Runner = Serial | Parallel

RUNNERS: dict[WorkloadKind, tuple[type[WorkloadRound], Any]] = {
    WorkloadKind.COUNTER: (CounterRound, _counter),
    WorkloadKind.KEYS: (KeysRound, _keys),
    WorkloadKind.CLAIM: (ClaimRound, _claim),
    WorkloadKind.OUTPUT: (OutputRound, _output),
}
