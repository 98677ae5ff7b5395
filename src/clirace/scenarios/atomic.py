"""Atomic config writes: sample the config file while writers run in parallel, and kill a writer mid-write.

Crash injection: one traced run of a writer lists its write and rename calls that touch the config file's
directory (the config itself, or a temp file beside it); then, in a fresh sandbox each, the writer is
SIGKILLed by strace at each of those calls in turn (`inject=CALL:signal=SIGKILL:when=N`, N counted per
call and per thread, as strace does; behind a version manager's shim, from the writing process's last exec,
in that process only: `_numbered`). Calls on a temp file beside the config and an open of the config with
O_TRUNC are numbered over every thread and process instead, and the writer is stopped just after each and
killed after the one meant (`stopper.KillAfter`): Go and Node make them from threads strace's count cannot
single out. A daemon an earlier command of the trial left running, which the command reaches, is traced and
killed by pid (`_Attached`). The records keep the config before and after; the check decides whether it is the
old or the new one, whole.
"""
from __future__ import annotations

import sqlite3
import subprocess
import threading
import time
from pathlib import Path
from types import TracebackType
from typing import TypedDict

from clirace.checks.atomic_config import enough_samples
from clirace.errors import Busy, TrialFailed
from clirace.history import ConfigSampled, FileOp, KillPoint, KillPointsFound, Sample, WriterKilled
from clirace.history.vocab import ConfigFormat, EventKind, WorkloadKind
from clirace.run import observe, stopper
from clirace.scenarios import _sqlite
from clirace.scenarios._box import Box, Context
from clirace.scenarios.workloads import CONFIG_CAP, read_config, read_text
from clirace.spec import Workload

MAX_KILL_POINTS = 8
KILL_CALLS = f"{observe.WRITE_CALLS},fsync,fdatasync,{observe.RENAME_CALLS}"
TRUNCATING = "openat"  # traced too: an open of the config with O_TRUNC empties it (an in-place writer's first step)
KILL_LOG_CAP = 8 * 1024  # the end of a kill run's strace log kept in the history
WRITE_BATCHES = 3  # parallel write batches at most while the readers lack the samples a pass needs
MAX_DISTINCT_SAMPLES = 200  # distinct config contents kept; the rest are counted in `dropped`


class _Killing(TypedDict):
    """observe.kill_prefix's arguments for one kill point (a daemon's adds `attach`)."""
    calls: str
    when: int
    log: Path
    path: str | None


def _keys_workload(ctx: Context) -> Workload | None:
    return next((w for w in ctx.spec.workloads if w.kind is WorkloadKind.KEYS and w.config), None)


def run(ctx: Context) -> None:
    workload = _keys_workload(ctx)
    if workload is None:
        ctx.not_run("atomic-config", "the spec has no keys workload with a config file",
                    "Add a keys workload with config: {path, format}.")
        return
    _sampled(ctx, workload)
    if not ctx.strace:
        ctx.not_run("atomic-config/kill", f"the writer could not be killed mid-write: {ctx.strace_note}",
                    "Run without --no-strace to test kills mid-write." if "--no-strace" in ctx.strace_note else
                    "Install strace (apt-get install strace) and allow ptrace to test kills mid-write.")
        return
    for point in _kill_points(ctx, workload):
        ctx.say(f"atomic config: writer killed at {point.name}")
        with ctx.box(WriterKilled, f"writer killed at {point.name}", setup=workload.setup) as box:
            assert workload.config is not None
            box.fields.update(point=point, format=workload.config.format, key_path=workload.config.key,
                              query=workload.config.query, key=workload.key_name(1), value="after-kill")
            path = Path(box.path(workload.config.path))
            box.fields["config_path"] = str(path)
            _seed(box, workload)
            box.fields["old"] = read_config(box, path, workload.config.format)[0] or ""
            # Made by clirace, and handed to strace as /proc/<clirace>/fd/N: a target that reads the name from
            # strace's command line and plants a link or FIFO there first redirects or blocks nothing.
            log = box.own_file("kill")
            # Counted on the config's path in this sandbox, as the point was numbered in the traced one.
            killing: _Killing = {"calls": point.call, "when": point.when, "log": log, "path": str(path) if point.path else None}
            if point.daemon:
                _daemon_killed(box, workload, point, path, killing)
            elif point.after:
                _killed_just_after(box, workload, point, path, log)
            elif point.exec_path:
                _killed_after_exec(box, workload, point, killing)
            else:
                box.run("killed-writer", workload.run, wrap=observe.kill_prefix(**killing), key=workload.key_name(1),
                        value="after-kill", i=0, n=1, session_id="s0")
            writer = next((inv for inv in reversed(box.invocations) if inv.label == "killed-writer"), None)
            # clirace's own deadline kill leaves "killed by SIGKILL" in the log too: that is no injected kill.
            if observe.killed(log) and not (writer is not None and writer.timed_out):
                box.event(EventKind.KILL_INJECTED, "killed-writer", point.name)
            box.fields["after"] = read_config(box, path, workload.config.format)[0]
            box.fields["kill_log"] = (read_text(log, KILL_LOG_CAP * 64)[0] or "")[-KILL_LOG_CAP:]


def _killed_just_after(box: Box, workload: Workload, point: KillPoint, path: Path, log: Path) -> None:
    """The killed writer, stopped just after each of its `point.call` calls (on the config only, for an open
    with O_TRUNC) and SIGKILLed after the `point.when`-th on the file meant, counted over all its threads
    (stopper.KillAfter). The log written is the killed thread's call and its kill, as strace's own would be."""
    prefix = box.trace_dir / "after"
    wrap = stopper.stop_prefix(prefix, [str(path)] if point.path else [], point.call, when="1+")
    running = box.start("killed-writer", workload.run, wrap=wrap, key=workload.key_name(1), value="after-kill", i=0,
                        n=1, session_id="s0")
    killer = stopper.KillAfter(running, prefix, lambda line: _on_point_file(line, point, path), point.when)
    try:
        killer.run(box.spec.timeout)
    finally:
        box.finish(running)
        killer.close()
        log.write_text(killer.log())


def _daemon_killed(box: Box, workload: Workload, point: KillPoint, path: Path, killing: _Killing) -> None:
    """The command run plainly while the daemon that writes for it (started again by this sandbox's setup or
    seed write) is killed at `point` by an strace attached to it by pid."""
    pid = next((p for p, command in _daemons(box).items() if command == point.daemon), None)
    if pid is None:
        raise TrialFailed(f"the daemon that wrote the config in the traced run ({point.daemon}) was not running "
                          "before this kill run's command")
    log = killing["log"]
    if point.after:
        prefix = box.trace_dir / "after"
        argv = stopper.stop_prefix(prefix, [str(path)] if point.path else [], point.call, when="1+")[:-1]
        with _Attached(argv, {pid: point.daemon}):
            running = box.start("killed-writer", workload.run, key=workload.key_name(1), value="after-kill", i=0,
                                n=1, session_id="s0")
            killer = stopper.KillAfter(_Pid(pid), prefix, lambda line: _on_point_file(line, point, path), point.when)
            try:
                killer.run(box.spec.timeout, over=lambda: stopper.ended(running))
            finally:
                box.finish(running)
                killer.close()
                log.write_text(killer.log())
        return
    argv = observe.kill_prefix(point.call, point.when, log, killing["path"], attach=pid)
    with _Attached(argv[:-2], {pid: point.daemon}):
        box.run("killed-writer", workload.run, key=workload.key_name(1), value="after-kill", i=0, n=1,
                session_id="s0")


class _Pid:
    """A process clirace did not start (a daemon), for stopper.ended."""

    def __init__(self, pid: int):
        self.pid = pid


def _daemons(box: Box) -> dict[int, str]:
    """pid -> command line ({sandbox} for the sandbox) of each process the trial's finished commands left
    running: a daemon a client started, which later commands reach to do their writes."""
    root = str(box.sandbox.root)
    return {left.pid: left.command.replace(root, "{sandbox}") for left in box.leftovers()}


class _Attached:
    """strace (`argv`, which ends where the target would be given) attached by pid to each of `pids` while the
    block runs; told to let go after it (SIGTERM makes an attached strace detach, leaving the process running)."""
    ATTACH_WAIT = 5.0
    DETACH_WAIT = 5.0

    def __init__(self, argv: list[str], pids: dict[int, str], required: bool = True):
        self.argv, self.pids, self.required = argv, list(pids), required
        self.proc: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> _Attached:
        if not self.pids:
            return self
        argv = list(self.argv)
        for pid in self.pids:
            argv += ["-p", str(pid)]
        self.proc = proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                            stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + self.ATTACH_WAIT
        while time.monotonic() < deadline and proc.poll() is None:
            if all(stopper.tracer_of(pid) in (proc.pid, None) for pid in self.pids):
                return self
            time.sleep(stopper.POLL)
        self.__exit__(None, None, None)
        if not self.required:
            return self
        raise TrialFailed(f"strace could not attach to the daemon{'s' if len(self.pids) > 1 else ''} "
                          f"{', '.join(map(str, self.pids))}")

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.terminate()
        try:
            self.proc.wait(self.DETACH_WAIT)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc = None


def _on_point_file(line: str, point: KillPoint, path: Path) -> bool:
    """Whether a trace line is a call of `point`'s kind on its file: the config opened with O_TRUNC, or a temp
    file beside the config (any file in its directory but the config itself; its name is random)."""
    op = observe.parse_line(line, str(path.parent))
    if op is None or op.call != point.call or not op.paths:
        return False
    if point.path:
        return point.path in op.paths and "O_TRUNC" in op.flags
    return Path(op.paths[0]).parent == path.parent and op.paths[0] != str(path)


def _killed_after_exec(box: Box, workload: Workload, point: KillPoint, killing: _Killing) -> None:
    """The killed writer, started under a strace that stops it at its exec of `point.exec_path` with the argv the
    traced run saw; an strace that counts and kills from there takes it over (stopper.Handover)."""
    root = str(box.sandbox.root)
    wanted = [arg.replace("{sandbox}", root) for arg in point.exec_argv]
    prefix = box.trace_dir / "exec"
    running = box.start("killed-writer", workload.run, wrap=stopper.exec_stop_prefix(prefix, point.exec_path),
                        key=workload.key_name(1), value="after-kill", i=0, n=1, session_id="s0")
    handover = stopper.Handover(running, prefix, lambda argv: argv == wanted,
                                lambda pid: observe.kill_prefix(**killing, attach=pid))
    try:
        handover.take_over(box.spec.timeout)
        box.finish(running)
    finally:
        handover.close()
        box.fields["taken_over"] = handover.note


def _kill_points(ctx: Context, workload: Workload) -> list[KillPoint]:
    """Trace one writer and choose where to kill the next ones (the record keeps the trace and the choice)."""
    assert workload.config is not None
    ctx.say("atomic config: tracing one writer to find its kill points")
    points: list[KillPoint] = []
    with ctx.box(KillPointsFound, "writer traced to find kill points", setup=workload.setup) as box:
        _seed(box, workload)
        path = Path(box.path(workload.config.path))
        box.fields["config_dir"] = str(path.parent)
        calls = f"{KILL_CALLS},{TRUNCATING},{','.join(sorted(observe.PROCESS_CALLS))}"
        daemons = _daemons(box)  # left running by the setup or the seed write: the command may hand them the write
        # Not required: a leftover gone meanwhile (or one strace may not trace) leaves the command's own trace.
        with _Attached(observe.trace_prefix(box.trace_dir / "daemon", calls)[:-1], daemons, required=False):
            inv = box.run("traced-writer", workload.run, wrap=observe.trace_prefix(box.trace_dir / "writer", calls),
                          key=workload.key_name(1), value="after-kill", i=0, n=1, session_id="s0")
        ops = tuple(sorted(box.file_ops("writer") + box.file_ops("daemon"), key=lambda op: op.at))
        box.fields.update(traces={"traced-writer": ops}, after=read_config(box, path, workload.config.format)[0])
        if not inv.ok:
            raise TrialFailed(f"the config writer failed under trace ({inv.ending()}; {inv.printed()})")
        points = _numbered(ops, path, str(box.sandbox.root), daemons)
        if len(points) > MAX_KILL_POINTS:  # keep the first writes, the last ones and the commit (last call)
            keep = sorted({*range(MAX_KILL_POINTS // 2), *range(len(points) - MAX_KILL_POINTS // 2, len(points))})
            points = [points[i] for i in keep]
        box.fields["points"] = tuple(points)
    return points


def _numbered(ops: tuple[FileOp, ...], path: Path, root: str, daemons: dict[int, str] | None = None
              ) -> list[KillPoint]:
    """The kill points of a traced writer: its write and rename calls on the config or beside it, numbered as
    the kill run will count them. strace counts per thread (its pid files are per thread), and calls on the
    config itself only among those (the kill run traces just that path). When other processes of the
    invocation make such calls too (a version manager's shim runs helpers that write to pipes), the kill run is
    taken over at the writing process's last exec, so the calls are counted from that exec on, in its threads."""
    daemons = daemons or {}
    tgid = _processes(ops)
    kills = [op for op in ops if op.call not in observe.PROCESS_CALLS and op.call != TRUNCATING]
    placed = _just_after(ops, path, {pid: command.replace(root, "{sandbox}") for pid, command in daemons.items()},
                         tgid)
    for at, op in enumerate(kills):
        if not any(Path(p).parent == path.parent for p in op.paths) or _temp_beside(op, path):
            continue
        # strace 6's -P follows fds but not the paths of a rename: renames are counted among all of them.
        on_config = str(path) in op.paths and not op.call.startswith("rename")
        counted = [n for n, o in enumerate(kills) if o.call == op.call and (not on_config or str(path) in o.paths)]
        daemon = daemons.get(tgid[op.pid], "").replace(root, "{sandbox}")
        if daemon:  # the kill run's strace attaches to the daemon: it counts there only, from the attach on
            counted = [n for n in counted if tgid[kills[n].pid] == tgid[op.pid]]
        execed = None
        if not daemon and any(tgid[kills[n].pid] != tgid[op.pid] for n in counted):  # another process counts too: hand over
            execed = next((o for o in reversed(ops) if o.call == "execve" and o.ok and tgid[o.pid] == tgid[op.pid]
                           and o.at <= op.at), None)
        if execed is not None:
            counted = [n for n in counted if tgid[kills[n].pid] == tgid[op.pid] and kills[n].at > execed.at]
        when = sum(1 for n in counted if kills[n].pid == op.pid and n <= at)
        if op.call.startswith("rename"):  # mv tries renameat2(RENAME_NOREPLACE), then rename
            name = f"{op.call} #{when} onto {Path(op.paths[-1]).name}"
        else:  # on the config itself (a temp file's calls are _just_after's)
            name = f"{op.call} #{when} to {path.name} itself"
        argv = stopper.exec_argv(f"execve({execed.args}) = 0") if execed is not None else None
        placed.append((op.at, KillPoint(op.call, when, name + (" in the daemon" if daemon else ""),
                                        str(path) if on_config else "",
                                        exec_path=_exec_path(execed) if execed is not None else "",
                                        exec_argv=tuple(a.replace(root, "{sandbox}") for a in argv or ()),
                                        daemon=daemon)))
    return [point for _, point in sorted(placed, key=lambda pair: pair[0])]  # in the order the writer made them


def _temp_beside(op: FileOp, path: Path) -> bool:
    """A write-path call (not a rename) on a file beside the config, not the config itself."""
    return (not op.call.startswith("rename") and op.call != TRUNCATING and bool(op.paths)
            and Path(op.paths[0]).parent == path.parent and op.paths[0] != str(path))


def _truncating(op: FileOp, path: Path) -> bool:
    return op.call == TRUNCATING and op.ok and str(path) in op.paths and "O_TRUNC" in op.flags


def _just_after(ops: tuple[FileOp, ...], path: Path, daemons: dict[int, str] | None = None,
                tgid: dict[int, int] | None = None) -> list[tuple[float, KillPoint]]:
    """The kill points strace's per-thread count cannot name (KillPoint.after): each call on a temp file
    beside the config, and each open of the config with O_TRUNC, numbered over every thread and process of the
    invocation (or of the daemon that made it: the kill run attaches to it alone), in the order the trace shows
    them (the kill run stops at each, so they come one at a time)."""
    daemons, tgid = daemons or {}, tgid or {}
    points: list[tuple[float, KillPoint]] = []  # (when the call was made, the point)
    seen: dict[tuple[str, str], int] = {}
    for op in ops:
        if _temp_beside(op, path):
            call, what = op.call, f"to a temp file beside {path.name}"
        elif _truncating(op, path):
            call, what = "O_TRUNC", f"of {path.name} with O_TRUNC"
        else:
            continue
        daemon = daemons.get(tgid.get(op.pid, op.pid), "")
        key = (call, daemon)
        seen[key] = seen.get(key, 0) + 1
        points.append((op.at, KillPoint(op.call, seen[key], f"{op.call} #{seen[key]} {what}"
                                        f"{' in the daemon' if daemon else ''}, killed just after it",
                                        str(path) if call == "O_TRUNC" else "", after=True, daemon=daemon)))
    return points


def _exec_path(op: FileOp) -> str:
    """The program an execve ran, as the process named it (strace's -P matches that string)."""
    match = stopper.QUOTED.match(op.args)
    return observe.unescape(match.group(1)) if match else ""


def _processes(ops: tuple[FileOp, ...]) -> dict[int, int]:
    """Thread id -> process id, from the clones a trace shows (a thread is made by clone with CLONE_THREAD)."""
    tgid: dict[int, int] = {}
    for op in ops:
        tgid.setdefault(op.pid, op.pid)
        if op.call in ("clone", "clone3") and op.child and "CLONE_THREAD" in op.args:
            tgid[op.child] = tgid[op.pid]
    return tgid


def _seed(box: Box, workload: Workload) -> None:
    inv = box.run("seed-write", workload.run, key=workload.key_name(0), value="seeded", i=0, n=1, session_id="s0")
    if not inv.ok:
        raise TrialFailed(f"the first config write failed ({inv.ending()}; {inv.printed()})")


def _sampled(ctx: Context, workload: Workload) -> None:
    assert workload.config is not None
    ctx.say(f"atomic config: sampling the config during {ctx.parallel} parallel writes")
    with ctx.box(ConfigSampled, "config sampled during parallel writes", setup=workload.setup) as box:
        box.fields["format"] = workload.config.format
        _seed(box, workload)
        sampler = _Sampler(Path(box.path(workload.config.path)), box.sandbox.root, workload.config.format)
        n = ctx.parallel
        # Started inside the `try`: an interrupt acted on as it starts must still stop it, or it reads on through
        # the sandbox's fd after the trial's end has closed it (its number then someone else's), to the run's end.
        try:
            sampler.start()
            # A fast tool's batch can end before a reader starved of CPU (a loaded machine) has read enough, or
            # seen the config change: more batches, each writing new keys, until it has the evidence a pass needs.
            for batch in range(WRITE_BATCHES):
                box.together([(f"set-{batch * n + i}", box.argv(workload.run, i=i, n=n, key=workload.key_name(
                    2 + batch * n + i), value=f"v{batch * n + i}", session_id=f"s{i}"), None) for i in range(n)])
                if enough_samples(sampler.samples - sampler.dropped, len(sampler.seen)):
                    break
        finally:
            sampler.stop()
            box.fields.update(samples=sampler.samples, missing=sampler.missing, dropped=sampler.dropped,
                              distinct=tuple(Sample(text, count) for text, count in sampler.seen.items()))


class _Sampler(threading.Thread):
    """Reads the config file as fast as it can until stopped, keeping each distinct content once."""

    def __init__(self, path: Path, root: Path, fmt: ConfigFormat = ConfigFormat.JSON):
        super().__init__(daemon=True)
        self.path, self.root, self.fmt = path, root, fmt
        self.samples = self.missing = self.dropped = 0
        self.seen: dict[str, int] = {}
        self._halt = threading.Event()

    def run(self) -> None:
        while not self._halt.is_set():
            if self.fmt is ConfigFormat.SQLITE:  # read through SQLite's own lock, as a reader of it would
                try:
                    text = _sqlite.read_live(self.root, self.path, CONFIG_CAP)
                except (Busy, sqlite3.Error):  # a writer has it, or SQLite could not look: no sample
                    time.sleep(0)
                    continue
            else:
                text, _ = read_text(self.path, CONFIG_CAP, self.root)
            self.samples += 1
            if text is None:  # the file vanished: a reader would find no config at all
                self.missing += 1
            elif text in self.seen or len(self.seen) < MAX_DISTINCT_SAMPLES:
                self.seen[text] = self.seen.get(text, 0) + 1
            else:
                self.dropped += 1
            time.sleep(0)

    def stop(self) -> None:
        self._halt.set()
        if self.is_alive():  # (not started, or not yet running: it stops at its first look at _halt)
            self.join(5)
