"""Stage 4, history: the contract between launching and judging. Raw observations only, typed and versioned.

A trial is one experiment in one fresh sandbox. Its record holds what clirace did and saw, never what it
concluded: the invocations (argv, times, exit code or signal, capped output, and so a three-valued
outcome), timestamped events (lock held, released, signal sent, kill injected), file operations traced by
strace, config texts read back and samples taken. Each scenario has its own record type (below); the JSON
tags each trial with its `kind` and the file with its version, and `History.load` refuses what it cannot
read with the JSON path of the problem. Every judgement lives in checks/, so a history saved today is
judged by tomorrow's checks (`clirace judge`).

The folder history/: Stage 4, history: the contract between launching and judging: records, vocabulary, codec.

May import: clirace.errors only.
"""
from __future__ import annotations

import dataclasses
import json
import os
import random
import re
import shlex
import signal as _signal
import stat
import typing
from collections.abc import Iterator
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any, ClassVar, TypeVar, Union

from clirace.errors import HistoryError
from clirace.history import _stream
from clirace.history._codec import _Bad, _decode, _expect, _show
from clirace.history.vocab import ConfigFormat, EventKind, Failure, HoldMode, Outcome, Way

FORMAT = "clirace-history"
VERSION = 2
OUTPUT_CAP = 64 * 1024  # bytes of each stream kept; stdout_bytes/stderr_bytes count everything printed
# A history larger than this is not judged (docs/safety.md: a level-3 run at the defaults writes about 1 MB, a 10,000-round
# history joined from shards about 290 MB). It is read as a stream (_stream.py): judging holds its records, never its
# text and parsed tree at once (290 MB: 736 MB at the peak, report included, against 1,248 MB before; bighistory.py).
# The cap keeps the judge of the largest accepted history near 1 GB of memory (about 2.5x its size).
MAX_BYTES = 384 * 1024 * 1024
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f\x80-\x9f]")


@dataclass(frozen=True, slots=True)
class Invocation:
    label: str
    argv: tuple[str, ...]
    env: dict[str, str] = field(default_factory=dict)
    cwd: str = ""
    started: float = 0.0  # seconds since the trial's start
    ended: float = 0.0
    exit_code: int | None = None
    signal: int | None = None
    stdout: str = ""
    stderr: str = ""
    stdout_bytes: int = 0
    stderr_bytes: int = 0
    timed_out: bool = False
    wrapper: str = ""  # e.g. strace amplifying or killing it; argv above is the target's own command line
    wrapper_said: str = ""  # what the wrapper (strace) itself printed, kept apart from the target's stderr
    ended_by: str = ""  # why clirace itself sent the signal that ended it, when it did (not a deadline)
    sandbox: str = ""  # the trial's sandbox; shown as {sandbox} in reports, so that they read the same every run
    unread: str = ""  # why clirace could not read all it printed (run/launch.py's pump), "" when it could
    # Killed at its deadline: how many seconds its processes had then spent on a CPU, and runnable but queued for
    # one (a loaded machine's doing, not the tool's); None when not killed at a deadline, or not measured.
    cpu_used: float | None = None
    cpu_wait: float | None = None
    asleep_in: str = ""  # killed at its deadline: the kernel functions its sleeping processes were in (wchan)

    @property
    def ok(self) -> bool:
        return self.outcome is Outcome.OK

    @property
    def outcome(self) -> Outcome:
        """ok (exit 0), fail (another exit status) or unknown (timed out, or ended by a signal: it may or may
        not have done its work; or its answer could not be read whole)."""
        if self.timed_out or self.signal is not None or self.exit_code is None or self.unread:
            return Outcome.UNKNOWN
        return Outcome.OK if self.exit_code == 0 else Outcome.FAIL

    @property
    def duration(self) -> float:
        return self.ended - self.started

    def ending(self) -> str:
        """How it ended, in words: "exit 1", "killed at its deadline after 10.0s (0.4s on a CPU, 9.5s waiting for one)",
        "killed by SIGTERM"."""
        if self.timed_out:
            spent = [] if self.cpu_wait is None else [f"{self.cpu_used or 0:.1f}s on a CPU, {self.cpu_wait:.1f}s waiting for one"]
            spent += [f"asleep in {self.asleep_in}"] if self.asleep_in else []
            return f"killed at its deadline after {self.duration:.1f}s" + (f" ({'; '.join(spent)})" if spent else "")
        if self.signal:
            try:
                name = _signal.Signals(self.signal).name
            except ValueError:
                name = f"signal {self.signal}"
            return f"killed by {name}" + (f", {self.ended_by}" if self.ended_by else "")
        if self.exit_code is None:
            return "never ended"
        return f"exit {self.exit_code}" + (f"; {self.unread}" if self.unread else "")

    def command(self) -> str:
        """Its command line, for evidence."""
        return self._in_sandbox(shlex.join(self.argv))

    def _in_sandbox(self, text: str) -> str:
        return text.replace(self.sandbox, "{sandbox}") if self.sandbox else text

    def printed(self, limit: int = 160) -> str:
        """What it printed, on one line, for evidence. Control characters are shown escaped, so a target
        cannot send escape sequences to the terminal of whoever reads the report."""
        parts = []
        for name, text, total in (("stdout", self.stdout, self.stdout_bytes), ("stderr", self.stderr, self.stderr_bytes)):
            text = _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", " ".join(self._in_sandbox(text).split()))
            if total > OUTPUT_CAP:
                name = f"{name} ({total} bytes, first {OUTPUT_CAP} kept)"
            if text:
                parts.append(f"{name}: {text[:limit]}{'…' if len(text) > limit else ''}")
        return "; ".join(parts) or "printed nothing"


@dataclass(frozen=True, slots=True)
class Event:
    at: float  # seconds since the trial's start, on the invocations' clock
    kind: EventKind
    label: str = ""  # the invocation it concerns
    detail: str = ""


@dataclass(frozen=True, slots=True)
class FileOp:
    """One traced system call on a file, as strace printed it (paths absolute, fds resolved to paths)."""
    pid: int
    call: str
    paths: tuple[str, ...]
    ok: bool
    flags: tuple[str, ...] = ()  # O_* flags of an open
    writes: bool = False  # it opened for writing, or wrote
    lock: bool = False  # a flock or fcntl call that takes a lock
    args: str = ""
    fd: int | None = None  # the fd an open returned, or the one a call on an fd used
    at: float = 0.0  # when (seconds since the epoch) in traces that have times (strace -ttt); 0 in older ones
    child: int | None = None  # the thread or process a clone or fork made


@dataclass(frozen=True, slots=True)
class ServerOp:
    """One command a server of the trial (spec `services`) received from a client: a line of Redis's MONITOR, or
    a statement of PostgreSQL's log (log_statement=all). Raw, as the server showed it; checks/server_hazards.py
    reads them."""
    service: str  # "redis" or "postgres"
    client: str  # the connection: Redis's client address ("127.0.0.1:53122"), PostgreSQL's backend pid
    at: float = 0.0  # seconds since the trial's start (the server's clock, on the invocations' time line)
    words: tuple[str, ...] = ()  # Redis: the command and its arguments
    sql: str = ""  # PostgreSQL: the statement, as logged ("execute <unnamed>: ..." without that prefix)
    params: str = ""  # PostgreSQL: the bound parameters, as logged ("$1 = '7'")
    xact: str = ""  # PostgreSQL: the virtual transaction id (statements of one transaction share it)
    line: str = ""  # the server's own line, for evidence (capped)


@dataclass(frozen=True, slots=True)
class Leftover:
    """A process an invocation of the trial left running after it exited (it left the invocation's process group),
    found when a command that needed the tool's lock free was refused, or when clirace was about to start a
    parallel round or a lock holder and it held a kernel lock. What it held is what /proc showed then."""
    pid: int
    parent: int  # its parent then (after a daemon's double fork: init or clirace, which adopts orphans)
    age: float  # seconds it had been running when found
    left_by: str  # the label of the finished invocation it came from
    command: str  # its command line, capped
    locks: tuple[str, ...] = ()  # kernel locks it held, from /proc/locks: "FLOCK WRITE /path"
    outlived: float = 0.0  # seconds between the end of `left_by` and when it was found still running
    refused: str = ""  # the command it refused (kept as refused-LABEL; LABEL is its run once this one ended)
    waited: float = 0.0  # how long clirace waited for it to end (it was left to work, ended once idle)
    ended_by_clirace: bool = False  # it was still there after the wait, so clirace ended it
    still_running: bool = False  # still there: it held no kernel lock clirace could name, or outlived its SIGKILL


@dataclass(frozen=True, slots=True)
class Trial:
    """What every record has. `error` says why the experiment could not decide (setup failed, a holder never
    became ready, clirace was interrupted or failed): such a trial is judged unknown, never passed."""
    KIND: ClassVar[str] = ""
    name: str = ""
    round: int = 0
    invocations: tuple[Invocation, ...] = ()
    events: tuple[Event, ...] = ()
    error: str | None = None
    sandbox: str = ""
    server_ops: tuple[ServerOp, ...] = ()  # what the trial's servers saw (spec `services`), in their order
    server_note: str = ""  # what the server observation could not see (lines dropped, log unreadable)
    failed_by: Failure | None = None  # with `error`: whose failure it was (older histories: see `failure`)
    leftovers: tuple[Leftover, ...] = ()  # processes left by its finished invocations, found holding on (above)

    @property
    def failure(self) -> Failure | None:
        """Whose failure kept the trial from finishing, None when it finished. Histories written before the
        kinds were recorded say it only in words; the words they used are read here."""
        if not self.error:
            return None
        if self.failed_by is not None:
            return self.failed_by
        if self.error.startswith("setup command"):
            return Failure.SPEC
        if self.error.startswith("interrupted"):
            return Failure.INTERRUPTED
        if self.error.startswith("clirace failed"):
            return Failure.CLIRACE
        return Failure.TOOL

    def invocation(self, label: str) -> Invocation | None:
        return next((i for i in self.invocations if i.label == label), None)

    def labelled(self, prefix: str) -> list[Invocation]:
        return [i for i in self.invocations if i.label.startswith(prefix)]

    def unanswered(self) -> Invocation | None:
        """Its first invocation that counts and gave no answer (unknown: killed at its deadline, by a signal, or its
        output unread); a run clirace did again (RAN_AGAIN), or a first silent run kept as evidence
        (UNANSWERED_ALONE), does not count."""
        return next((i for i in self.invocations if i.outcome is Outcome.UNKNOWN and not i.label.startswith(RAN_AGAIN)
                     and i.label != UNANSWERED_ALONE), None)

    def event(self, kind: EventKind, label: str | None = None) -> Event | None:
        return next((e for e in self.events if e.kind is kind and (label is None or e.label == label)), None)


Traces = dict[str, tuple[FileOp, ...]]  # invocation label -> the file operations strace saw it make


@dataclass(frozen=True, slots=True)
class Rendezvous:
    """A round whose invocations were each stopped inside their race window and released together."""
    paths: tuple[str, ...]  # the state (and lock) files the stops were aimed at, from an earlier traced round
    calls: str  # the system calls each invocation was stopped after, on them, until it had arrived
    aimed: str  # why there: "the first read of its state", "its lock call, which comes after it read its state"
    arrived: dict[str, float] = field(default_factory=dict)  # label -> seconds after the start when it stopped
    stopped_at: dict[str, str] = field(default_factory=dict)  # label -> the traced call it stopped just after
    exited_before: tuple[str, ...] = ()  # labels that ended without ever stopping (refused by the lock, failed)
    released_after: float | None = None  # seconds after the start
    why_released: str = ""  # "all arrived", "the others blocked on the lock", "overall cap" ("the others idle": older)
    blocked: dict[str, str] = field(default_factory=dict)  # label -> the proof it was blocked on a lock, not arrived


@dataclass(frozen=True, slots=True)
class WorkloadRound(Trial):
    """One parallel round of a workload: `parallel` invocations released together from a barrier."""
    workload: str = ""  # the workload's name in the spec
    serial: bool = False  # a reference run: the same commands one at a time, the oracle for the parallel rounds
    # A reference pass in which an invocation gave no answer (killed at its deadline), run once more in a fresh
    # sandbox: kept as the evidence of why, never judged; the pass after it (same workload and round) counts.
    superseded: bool = False
    amplified: bool = False  # run under strace, writes and renames delayed by delays_ms
    delays_ms: dict[str, int] = field(default_factory=dict)
    traces: Traces = field(default_factory=dict)
    rendezvous: Rendezvous | None = None


@dataclass(frozen=True, slots=True)
class CounterRound(WorkloadRound):
    """inc-N increment; read-before (unless the spec gives `start`) and read-after print the counter."""
    KIND: ClassVar[str] = "counter"
    start: int | None = None  # the spec's `start`, when it gives one instead of a read before the round
    pattern: str | None = None  # the spec's `value` regex: group 1 is the counter in read's output


@dataclass(frozen=True, slots=True)
class ConfigSnapshot:
    path: str
    format: ConfigFormat
    key: str  # the spec's key template ("{key}", "section.{key}")
    text: str | None  # the file's content after the round; None when it did not exist or was not a file
    why_none: str = ""  # when text is None: "missing", "a FIFO", ...
    query: bool = False  # `key` is a JMESPath expression (the spec's config.query)


@dataclass(frozen=True, slots=True)
class KeysRound(WorkloadRound):
    """set-N writes its own key; get-N (with a `read` command) reads it back, or `config` is the file after."""
    KIND: ClassVar[str] = "keys"
    keys: dict[str, tuple[str, str]] = field(default_factory=dict)  # set-N -> (key, value)
    config: ConfigSnapshot | None = None
    # Keys that existed before the parallel writes: earlier-N wrote its key one at a time before them (read back
    # by get-earlier-N, or looked up in `config`), and `before` is the config file just before them.
    earlier: dict[str, tuple[str, str]] = field(default_factory=dict)  # earlier-N -> (key, value)
    before: ConfigSnapshot | None = None


@dataclass(frozen=True, slots=True)
class ClaimRound(WorkloadRound):
    """add-N queued items; claim-N claimed in parallel; list-after (when the spec has `list`) shows the rest."""
    KIND: ClassVar[str] = "claim"
    items: tuple[str, ...] = ()
    pattern: str | None = None  # the spec's `claimed` regex


@dataclass(frozen=True, slots=True)
class OutputRun:
    marker: str  # the unique text in its input file
    output: str  # the output path it was given
    session_id: str = ""
    produced: str | None = None  # the output file's content afterwards (capped); None when absent


@dataclass(frozen=True, slots=True)
class OutputRound(WorkloadRound):
    """out-N each turned its own input into its own output."""
    KIND: ClassVar[str] = "output"
    runs: dict[str, OutputRun] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Watched:
    """How a process group spent a span it was watched: a waiting process sleeps in the kernel and uses almost no
    CPU; a slow one works. Read from /proc (timing.Usage)."""
    seconds: float  # the span
    cpu_seconds: float  # CPU its processes used meanwhile
    states: tuple[str, ...] = ()  # each process's state at the end (S sleeping, R running, D disk, ...)
    sleeping_in: tuple[str, ...] = ()  # each process's wchan at the end, where the kernel shows it
    wakes: int = 0  # times its processes went to sleep of their own accord meanwhile (a retry loop wakes often)
    # What shows it blocked on a lock at the end ("" when nothing does): its lock call, its place in /proc/locks'
    # waiters, or a retry loop on a file another process holds locked. Idle alone is no proof: a sleep is idle too.
    blocked: str = ""


@dataclass(frozen=True, slots=True)
class LockTrial(Trial):
    """What the lock experiments' records share: the effects of their commands. A command given {key} and {value}
    (lock.contender, the hold command) wrote that key; after the holder ended, it was read back the way the spec's
    keys workload reads its keys: `effects_config` is its config file then, or get-LABEL read it.
    A contender without them (`config unset theme`) has its change read instead: the keys workload's config file
    just before it ran (`state_before`, with the holder not yet started), and after the holder ended
    (`effects_config`); what it changes alone (Alone) is what must be there."""
    effects: dict[str, tuple[str, str]] = field(default_factory=dict)  # invocation label -> (key, value)
    effects_config: ConfigSnapshot | None = None
    state_before: ConfigSnapshot | None = None


@dataclass(frozen=True, slots=True)
class LockConflict(LockTrial):
    """baseline: the contender alone; holder takes the lock (events: held, then maybe reached-state, asked,
    blocked-on-lock, stopped, released); contender runs while it is held, its stdin a pipe nobody writes to (a
    tool that asks on a conflict waits there, as under an agent); retry-N obey a LOCK_HELD hint once the holder
    ended.
    The holder is held for `window` (the prompt plus the contender's run-alone time), then `follow` longer while
    the contender is still running, then `retried` longer while it is shown blocked on the lock (up to
    tool.timeout in all), and only then released. Round 2 repeats a trial whose contender outlived
    the window, or answered too close to it to tell (`close_from`): a verdict made by the clock is seen twice."""
    KIND: ClassVar[str] = "lock-conflict"
    hold: HoldMode = HoldMode.COMMAND
    prompt: float = 5.0  # the spec's prompt
    retry_wait_ms: int = 0  # how long clirace waited before each retry-N, obeying the hint (capped)
    alone: float | None = None  # seconds the contender took alone (its reference run): the prompt is scaled by it
    window: float = 0.0  # prompt + alone: how long it had to answer (0: older histories, where it was `prompt`)
    # prompt + the fastest of its runs alone: an answer after this, yet within `window`, is too close to call (the
    # runs alone on a loaded machine differ by more than the answer's margin); such a trial runs twice (0: older
    # histories, which have no such band)
    close_from: float = 0.0
    follow: float = 0.0  # how much longer a contender still running was followed before the holder let go
    watched: Watched | None = None  # the contender over the follow, when it was still running after the window
    retried: float = 0.0  # seconds it was followed past the follow, the lock still held, while shown blocked on it


@dataclass(frozen=True, slots=True)
class LockRelease(LockTrial):
    """holder takes the lock and ends `way`; next runs the contender afterwards."""
    KIND: ClassVar[str] = "lock-release"
    way: Way = Way.NORMAL
    hold: HoldMode = HoldMode.COMMAND
    signal_wait: float = 5.0  # how long a signalled holder was given to exit


@dataclass(frozen=True, slots=True)
class LockWait(LockTrial):
    """alone: the contender with the wait option and the lock free; contender: the same while it is held."""
    KIND: ClassVar[str] = "lock-wait"
    hold: HoldMode = HoldMode.COMMAND
    option: str = ""
    wait_ms: int = 0
    margin_ms: int = 0  # before adding how long `alone` took
    limit_s: float = 0.0  # the contender's own deadline
    # The contender from its start while the lock was held: the first look that showed it blocked on the lock
    # (Watched.blocked), else the last look before it ended. None: older histories, which did not watch it.
    watched: Watched | None = None


@dataclass(frozen=True, slots=True)
class SessionRun(Trial):
    """run-N in parallel, with distinct session ids or without any, traced when strace could."""
    KIND: ClassVar[str] = "session"
    with_ids: bool = False
    runs: dict[str, OutputRun] = field(default_factory=dict)
    temp_dirs: tuple[str, ...] = ()
    traced: bool = False
    traces: Traces = field(default_factory=dict)
    reference: str = ""  # the output workload whose command it ran (its serial runs say what each output must be)


@dataclass(frozen=True, slots=True)
class Sample:
    text: str
    count: int


@dataclass(frozen=True, slots=True)
class ConfigSampled(Trial):
    """The config file read again and again while set-N wrote in parallel; each distinct content kept once."""
    KIND: ClassVar[str] = "config-sampled"
    format: ConfigFormat = ConfigFormat.JSON
    samples: int = 0
    missing: int = 0  # samples that found no file
    distinct: tuple[Sample, ...] = ()
    dropped: int = 0  # distinct contents beyond the cap, not kept


@dataclass(frozen=True, slots=True)
class KillPoint:
    call: str  # the system call strace kills the writer at
    when: int  # its number among the thread's calls of that name (on `path` only, when there is one)
    name: str  # for people: "write #2 to config.json itself"
    path: str = ""  # set when the call is on the config itself: the kill counts only calls on it (strace -P)
    # Set when other processes of the invocation make such calls too (a shim's helpers): the program the writing
    # process exec'd last and its argv ({sandbox} for the sandbox); the kill is then counted from that exec on,
    # in that process only (`when` is numbered so), by an strace that takes it over just after the exec.
    exec_path: str = ""
    exec_argv: tuple[str, ...] = ()
    # Set when strace's count per thread cannot name the call (a temp file's random name cannot be given to -P,
    # and a runtime's other threads write to pipes and eventfds; an open with O_TRUNC is told from a read's
    # open by its flags): `when` then counts the calls on that file over every thread and process of the
    # invocation, each one stops it (stopper.KillAfter), and the process is SIGKILLed just after the `when`-th.
    after: bool = False
    # Set when the call is a daemon's (a process an earlier command of the trial left running, which the command
    # reached): its command line ({sandbox} for the sandbox). The kill run attaches to the process running it
    # and counts from the attach, in it only (`when` is numbered so).
    daemon: str = ""


@dataclass(frozen=True, slots=True)
class KillPointsFound(Trial):
    """One traced run of the config writer, and the kill points chosen from its trace."""
    KIND: ClassVar[str] = "kill-points"
    points: tuple[KillPoint, ...] = ()
    traces: Traces = field(default_factory=dict)
    config_dir: str = ""
    after: str | None = None  # the config once that writer ended: the new content a killed writer may leave


@dataclass(frozen=True, slots=True)
class WriterKilled(Trial):
    """killed-writer, SIGKILLed by strace at `point`; the config before and after."""
    KIND: ClassVar[str] = "writer-killed"
    point: KillPoint | None = None
    config_path: str = ""
    format: ConfigFormat = ConfigFormat.JSON
    key_path: str = "{key}"
    query: bool = False
    key: str = ""
    value: str = ""
    old: str = ""
    after: str | None = None
    kill_log: str = ""  # the end of strace's log of the killed run: which call of which thread it killed
    taken_over: str = ""  # with KillPoint.exec_path: which process the killing strace took over, or why it could not


# The label prefixes of runs clirace did again (scenarios/_box.py Box.run_free): refused by a process an earlier
# command left running, or kept to its deadline by strace following one; the run that counts has the plain label.
RAN_AGAIN = ("refused-", "traced-")
# The label of a lock command's first run alone when it gave no answer (killed at its deadline): it ran again in a
# fresh sandbox, and that Alone record keeps the first run as the evidence of why.
UNANSWERED_ALONE = "unanswered-alone"


@dataclass(frozen=True, slots=True)
class Alone(LockTrial):
    """A lock command run alone on fresh state (`alone`), as the reference for the lock experiments."""
    KIND: ClassVar[str] = "alone"
    command: str = ""  # "contender", "error_command", "holder" (the hold command) or "waiter" (with wait_option)
    traces: Traces = field(default_factory=dict)  # its file operations, when strace could watch it


@dataclass(frozen=True, slots=True)
class NotRun(Trial):
    """An experiment that did not run, and why (the spec gives no way, --only, strace off): never a pass."""
    KIND: ClassVar[str] = "not-run"
    experiment: str = ""
    why: str = ""
    hint: str = ""
    declared: str = ""  # what the spec says instead of a way to run it ("no-session-id", "never-waits")


RECORDS: dict[str, type[Trial]] = {cls.KIND: cls for cls in (
    CounterRound, KeysRound, ClaimRound, OutputRound, LockConflict, LockRelease, LockWait, SessionRun,
    ConfigSampled, KillPointsFound, WriterKilled, Alone, NotRun)}


@dataclass(frozen=True, slots=True)
class Planned:
    """One part of the run's plan, written into the history before anything runs. As Jepsen logs each
    operation's invoke before it completes and keeps the test map with its history, a check can then tell an
    experiment that was never reached (an interrupt, a scenario that failed) from one the spec does not ask for.
    Which records fulfil it: checks/_plan.py."""
    experiment: str  # the scenario: reference, workloads, lock-conflict, lock-release, lock-wait, session, atomic-config
    part: str = ""  # a workload's name, a way the lock holder ends, lock.contender, ...: "" for the whole
    trials: int = 1  # records it leaves; 0: as many as an earlier record says (one per kill point found)
    checks: tuple[str, ...] = ()  # the checks its records decide

    def describe(self) -> str:
        return f"{self.experiment} ({self.part})" if self.part else self.experiment


@dataclass(frozen=True, slots=True)
class RunOptions:
    """The options of one run: built by the command line (`clirace check`) or by `clirace.check()`, taken by the
    pipeline, and saved in the history as they are, so that `replay` reproduces the run exactly. Whoever builds
    them draws the seed (new_seed()) when none was given: a saved history always names the one it ran with."""
    seed: int
    rounds: int | None = None
    parallel: int | None = None
    budget: float | None = None  # --budget SECONDS: extra rounds (their number depends on the machine's speed)
    only: tuple[str, ...] = ()
    strace: bool = True  # False: --no-strace
    allow_outside_sandbox: bool = False
    # --confidence C --rate R: the rounds were raised so that a race showing in R of rounds would have shown
    # with probability >= C (`rounds` holds the number run, so the replay repeats it); C also words the bounds.
    confidence: float | None = None
    rate: float | None = None
    # --shard K/N: this run did the K-th of N shares of the plan (merge.py joins the shards' histories into one
    # with "" here); what the other shards do is missing from this history alone, so it judges undecided.
    shard: str = ""


def new_seed() -> int:
    """A seed for a run given none (`--seed` unset): printed with the result, so the run can be replayed."""
    return random.SystemRandom().randrange(1, 2**31)


@dataclass(frozen=True, slots=True)
class Environment:
    strace: bool  # strace was used
    strace_note: str = ""  # why not, when it was not
    clirace_version: str = ""
    rounds: int = 0  # what the run used, after the spec's and the options' say
    parallel: int = 0
    # How the trials' processes were kept together, to be ended (README, Safety): "cgroup" (a cgroup v2 of its
    # own per trial) or "marker" (the environment marker, the child subreaper and the watchdog only); "" before.
    isolation: str = ""
    isolation_note: str = ""  # the run's cgroup, or why it has none
    # Wall seconds each stage took ("reference", "workloads", "lock-conflict+lock-wait+lock-release" when side by
    # side, ...): where a check's time goes (benchmarks/cost.py), never read by a check.
    stage_seconds: dict[str, float] = field(default_factory=dict)
    # What was checked, so that shards of different specs or tools are never merged: the spec file's bytes and
    # the tool's own files (tool.command's program and the files it names), hashed ("" when unreadable).
    spec_sha256: str = ""
    tool_sha256: str = ""


@dataclass(frozen=True, slots=True)
class SpecPlace:
    """Where the spec declared a part a finding can be about (a workload, the lock's contender, the session...),
    recorded when the spec was loaded (spec/places.py), so that a report places its annotations from the history
    alone, at the lines of the spec that ran: the file may have changed or gone since."""
    line: int
    column: int
    workload: str = ""  # at a workload (the key "workloads[N]"): "KIND: NAME", as its trials are named


T = TypeVar("T", bound=Trial)


@dataclass
class History:
    spec_path: str
    options: RunOptions
    environment: Environment
    trials: list[Trial] = field(default_factory=list)
    kept: str | None = None  # where the sandboxes were kept (--keep)
    not_removed: tuple[str, ...] = ()  # what clirace made and could not remove, each "PATH: why"
    # What the run set out to do, written before anything ran. Required in a saved history (History.from_json
    # refuses one without); None only in a history built in memory that was never saved.
    plan: tuple[Planned, ...] | None = None
    stopped: str = ""  # why the run ended before its plan was done ("interrupted (Ctrl-C) during ...")
    # Spec key path, as messages.dotted spells it ("lock.contender", "workloads[0].config") -> where the spec
    # declared it. Empty in a history written before they were recorded: its findings point at the spec's line 1.
    spec_places: dict[str, SpecPlace] = field(default_factory=dict)

    def of(self, kind: type[T]) -> list[T]:
        return [t for t in self.trials if type(t) is kind]

    def not_run(self, experiment: str) -> NotRun | None:
        return next((t for t in self.of(NotRun) if t.experiment == experiment), None)

    def to_json(self) -> dict[str, Any]:
        return {"format": FORMAT, "version": VERSION, "spec_path": self.spec_path,
                "options": _encode(self.options), "environment": _encode(self.environment),
                "kept": self.kept, "not_removed": list(self.not_removed), "plan": _encode(self.plan),
                "stopped": self.stopped, "spec_places": _encode(self.spec_places),
                "trials": [{"kind": t.KIND, **_encode(t)} for t in self.trials]}

    def text(self) -> str:
        return json.dumps(self.to_json(), indent=1)

    def save(self, path: Path | str) -> None:
        Path(path).write_text(self.text())

    @classmethod
    def load(cls, path: Path | str) -> History:
        """The history saved at `path`, read a piece at a time (history/_stream.py): its trials are decoded into
        records as they are read, so the JSON text and its parsed tree are never held whole."""
        where = str(path)
        too_big = HistoryError(f"the file is larger than {MAX_BYTES >> 20} MiB, more than clirace judges.",
                               where=where, hint="A history that large comes from thousands of invocations; "
                               "run the check again with fewer --rounds or a smaller --parallel.")
        try:  # without blocking, and only a regular file: a FIFO would hang, /dev/zero never ends
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        except FileNotFoundError:
            raise HistoryError("history file not found.", where=where) from None
        except OSError as exc:
            raise HistoryError(f"cannot read the history: {exc.strerror or exc}.", where=where) from None
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise HistoryError("is not a regular file; expected a history saved by `clirace check --history`.",
                                   where=where)
            if info.st_size > MAX_BYTES:
                raise too_big
            with os.fdopen(os.dup(fd), "rb") as handle:
                return cls._read(handle, where)
        except OSError as exc:
            raise HistoryError(f"cannot read the history: {exc.strerror or exc}.", where=where) from None
        except _stream.TooLarge:  # it grew while it was read
            raise too_big from None
        except _stream.NotAnObject:
            raise HistoryError(f"not a {FORMAT} file.", where=where,
                               hint="Save one with `clirace check SPEC --history FILE`.") from None
        except (_stream.StreamError, RecursionError) as exc:
            raise HistoryError(f"not JSON ({str(exc)[:120]}).", where=where) from None
        finally:
            os.close(fd)

    @classmethod
    def _read(cls, handle: typing.BinaryIO, where: str) -> History:
        data: dict[str, Any] = {}
        trials: list[Trial] | None = None
        for key, value in _stream.members(handle, MAX_BYTES, "trials"):
            if key == "trials":
                trials = None  # a key given twice: the last one counts, as with json.loads
                if isinstance(value, Iterator):
                    if {"format", "version", "plan"} <= data.keys():  # the header first, as clirace writes it: checked
                        # before any trial is decoded, and each trial decoded as it is read
                        cls._check(data, where)
                        trials = cls._trials(value, where)
                        value = []
                    else:
                        value = list(value)
            data[key] = value
        return cls._build(data, where, trials)

    @classmethod
    def _trials(cls, items: Iterator[Any], where: str) -> list[Trial]:
        try:
            return [_trial(n, item) for n, item in enumerate(items)]
        except _Bad as bad:
            raise _damaged(bad, where) from None

    @classmethod
    def from_json(cls, data: Any, where: str = "history") -> History:
        return cls._build(data, where, None)

    @staticmethod
    def _check(data: Any, where: str) -> None:
        """Refuse what is not a history of this version, before reading its records."""
        if not isinstance(data, dict) or data.get("format") not in (FORMAT, f"{FORMAT}/1"):
            raise HistoryError(f"not a {FORMAT} file.", where=where,
                               hint="Save one with `clirace check SPEC --history FILE`.")
        version = data.get("version", 1)
        if version != VERSION:
            raise HistoryError(
                f"this history is version {version!r}; this clirace ({_version()}) reads version {VERSION} only.",
                where=where, hint="Run the check again with this clirace to get a history it can judge "
                                  "(`clirace check SPEC --history FILE`).")
        if data.get("plan") is None:  # a plan is part of this version: without it a missing record reads as unasked
            raise HistoryError(
                "this history has no plan ($.plan): without it clirace cannot tell an experiment that never ran "
                "from one the spec does not ask for, so it judges no history without one.", where=where,
                hint="Run the check again with this clirace to get a history it can judge "
                     "(`clirace check SPEC --history FILE`).")

    @classmethod
    def _build(cls, data: Any, where: str, trials: list[Trial] | None) -> History:
        """The history from its JSON members; `trials` already decoded when they were read as a stream."""
        cls._check(data, where)
        try:
            if trials is None:
                trials = [_trial(n, item) for n, item in enumerate(_expect(data, "trials", list, "$"))]
            return cls(spec_path=_decode(str, data.get("spec_path"), "$.spec_path"),
                       options=_decode(RunOptions, data.get("options"), "$.options"),
                       environment=_decode(Environment, data.get("environment"), "$.environment"),
                       trials=trials, kept=_decode(Union[str, None], data.get("kept"), "$.kept"),  # noqa: UP007
                       not_removed=_decode(tuple[str, ...], data.get("not_removed", []), "$.not_removed"),
                       plan=_decode(Union[tuple[Planned, ...], None], data.get("plan"), "$.plan"),  # noqa: UP007
                       stopped=_decode(str, data.get("stopped", ""), "$.stopped"),
                       spec_places=_decode(dict[str, SpecPlace], data.get("spec_places", {}), "$.spec_places"))
        except _Bad as bad:
            raise _damaged(bad, where) from None
        except RecursionError:
            raise HistoryError("the history is nested too deeply to be one clirace wrote.", where=where) from None


def _trial(n: int, item: Any) -> Trial:
    at = f"$.trials[{n}]"
    if not isinstance(item, dict):
        raise _Bad(at, "an object", item)
    kind = item.get("kind")
    if not isinstance(kind, str) or kind not in RECORDS:
        raise _Bad(f"{at}.kind", f"one of {', '.join(RECORDS)}", kind)
    record: Trial = _decode(RECORDS[kind], {k: v for k, v in item.items() if k != "kind"}, at)
    return record


def _damaged(bad: _Bad, where: str) -> HistoryError:
    return HistoryError(f"{bad.at} is {_show(bad.found)}; expected {bad.expected}.", where=where,
                        hint="The file was changed by hand or is damaged; save a new one with "
                             "`clirace check SPEC --history FILE`.")


def _version() -> str:
    from clirace.history.version import __version__
    return __version__


# --- JSON encoding (the decoder: _codec.py) ---------------------------------------------------------------

def _encode(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _encode(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, (list, tuple)):
        return [_encode(v) for v in value]
    if isinstance(value, dict):
        return {k: _encode(v) for k, v in value.items()}
    return value
