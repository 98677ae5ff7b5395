"""`clirace init --probe`: a spec written from one observed run of each of the tool's mutating commands.

Each command runs once, alone, in a sandbox of its own under strace (the trace clirace's checks read): the files
it wrote are its state, the lock calls it made are its lock (locking.read decides lock file from state, as the
checks do), the state file's first bytes give its format, and the measured time sizes `timeout` and `prompt`.
`--help` is searched for a session flag and a lock-wait option. Every guess is written as a comment the
maintainer can check; what the probe could not tell is said in the spec (`# NOT FOUND: ...`), never guessed
silently.
"""
from __future__ import annotations

import json
import re
import shlex
import subprocess
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from clirace.errors import UsageError
from clirace.history import FileOp
from clirace.run import locking, observe
from clirace.spec import placeholders

PROBE_VALUES = {"key": "cliracek0", "value": "cliracev0", "i": "0", "item": "item0", "session_id": "probe0"}
_SESSION = re.compile(r"(--[\w-]*session[\w-]*)(?:[ =]([A-Z_<>\[\]]+))?")
_SERVER = re.compile(r"connect|server|socket", re.I)  # what a client says of a server it cannot reach
_WAIT = re.compile(r"(--(?:lock-)?(?:wait|timeout|lock-timeout|wait-timeout)[\w-]*)(?:[ =]([A-Z_<>\[\]]+))?")


@dataclass
class Observed:
    command: list[str]  # as given, placeholders kept
    seconds: float
    exit_code: int
    state: list[str] = field(default_factory=list)  # written files, relative to the sandbox
    locks: list[tuple[str, str]] = field(default_factory=list)  # (path relative to the sandbox, kind)
    formats: dict[str, str] = field(default_factory=dict)  # state file -> json, yaml, toml, ini, sqlite
    queries: dict[str, str] = field(default_factory=dict)  # sqlite state file -> the JMESPath that reads {key}
    keys: dict[str, str | None] = field(default_factory=dict)  # text state file -> config.key, None: not found
    note: str = ""


def _kind(op: FileOp) -> str:
    return "flock" if op.call == "flock" else "fcntl" if op.call == "fcntl" else "exclusive-create"


def _format(path: Path) -> str:
    try:
        head = path.read_bytes()[:4096]
    except OSError:
        return ""
    if head.startswith(b"SQLite format 3\x00"):
        return "sqlite"
    suffix = path.suffix.lower().lstrip(".")
    if suffix in ("json", "yaml", "toml", "ini"):
        return suffix
    if suffix == "yml":
        return "yaml"
    text = head.decode("utf-8", "replace").strip()
    if text.startswith(("{", "[")):
        try:
            json.loads(path.read_text())
            return "json"
        except ValueError:
            pass
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.strip().startswith(("#", ";"))]
    if lines and all(re.match(r"^\[[^\]]+\]$|^[^=\s][^=]*=", line) for line in lines):
        return "ini"  # sections and key = value lines only (app.conf, .npmrc, .gitconfig)
    if lines and all(re.match(r"^[^:\s]+:\S", line) for line in lines):
        return "ini"  # name:value lines, no space after the colon (.htpasswd): YAML would read them as one string
    return ""


def _sqlite_query(path: Path) -> str:
    """The JMESPath over the database's tables that finds {key}'s value: the table and columns where the probe's
    key and value landed (read-only), or "" when they are not in one row."""
    import sqlite3

    key, value = PROBE_VALUES["key"], PROBE_VALUES["value"]
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            for (table,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall():
                cursor = db.execute(f'SELECT * FROM "{table}"')
                columns = [d[0] for d in cursor.description]
                for row in cursor.fetchall():
                    cells = dict(zip(columns, row, strict=True))
                    k = next((c for c, v in cells.items() if v == key), None)
                    v = next((c for c, v in cells.items() if v == value), None)
                    if k and v:
                        return f"{table}[?{k}=='{{key}}'].{v} | [0]"
        finally:
            db.close()
    except sqlite3.Error:
        return ""
    return ""


def _key_path(path: Path, fmt: str) -> str | None:
    """Where the probe's key landed in a json, yaml, toml or ini file, as config.key says it ("{key}",
    "section.{key}", "@{key}:registry", "{key}.remote"), or None when it is not found. The file is read by the
    checks' own reader; the key is the path of names to the probe's value (else to a name holding the probe's
    key), so that the spec names what the checks will read back."""
    from clirace.spec import configfile

    key, value = PROBE_VALUES["key"], PROBE_VALUES["value"]
    try:
        data = configfile.parse(path.read_text(), fmt)
    except Exception:  # noqa: BLE001 - a file the probe cannot parse: said as NOT FOUND
        return None
    named = sorted((p for p in configfile.key_paths(data) if any(key in part for part in p)), key=len)
    values = {p: configfile.lookup(data, ".".join(p), fmt) for p in named}
    holding = [p for p in named if not isinstance(values[p], dict) and value in str(values[p])]
    ending = [p for p in named if key in p[-1]]
    for found in holding or ending:
        short = found[1:] if fmt == "ini" and found[0] == "DEFAULT" else found  # outside any section: no section
        if configfile.lookup(data, ".".join(short), fmt) is not None:  # the name config.key will say reads back
            return ".".join(part.replace(key, "{key}") for part in short)
    return None


def _placeholder(rel: str) -> str:
    """A sandbox-relative path as the spec's placeholders say it, most precise first ({config_home}/x)."""
    for name, prefix in sorted(placeholders.LAYOUT.items(), key=lambda kv: -len(kv[1])):
        if rel == prefix or rel.startswith(prefix + "/"):
            return "{" + name + "}" + rel[len(prefix):]
    return "{sandbox}/" + rel


def observe_once(program: list[str], args: list[str], setup: list[list[str] | str], timeout: float = 30) -> Observed:
    """Run `program + args` once in a fresh sandbox (after `setup`, untraced: the tool's arguments, or a shell
    command) under strace; what it did."""
    from clirace.run.cleanup import end_run, interrupts_held, make_workdir
    from clirace.run.sandbox import Sandbox

    workdir: Path | None = None
    try:
        with interrupts_held():  # made whole, then acted on: the clean-up below finds all of it
            workdir = make_workdir()
        box = Sandbox(workdir, "probe", Path.cwd())
        env = box.environ({})
        values: dict[str, object] = {**PROBE_VALUES, **{k: str(v) for k, v in box.values().items()}}

        def expand(argv: list[str]) -> list[str]:
            return [placeholders.expand(a, values) for a in argv]
        for step in setup:
            argv = ["sh", "-c", placeholders.expand(step, values)] if isinstance(step, str) else expand(program + step)
            subprocess.run(argv, cwd=box.root, env=env, capture_output=True, timeout=timeout)
        prefix = box.private / "trace"
        started = time.monotonic()
        proc = subprocess.run(observe.trace_prefix(prefix, observe.FILE_CALLS + "," + observe.WRITE_CALLS)
                              + expand(program + args), cwd=box.root, env=env, capture_output=True, timeout=timeout)
        seconds = time.monotonic() - started
        ops = observe.file_events(prefix, str(box.root), within=str(box.root))
        root = str(box.root).rstrip("/") + "/"
        reading = locking.read([ops])
        seen = Observed(program + args, seconds, proc.returncode)
        for op in ops:
            # One trace cannot tell git's config.lock (created O_EXCL, then renamed over the config) from a temp
            # file; its name can: taken as the lock, a GUESS in the spec like every other.
            named_lock = op.ok and locking.exclusive_create(op) and op.paths and op.paths[0].endswith(".lock")
            if (reading.held(op) or named_lock) and op.paths[0].startswith(root):
                lock = (op.paths[0][len(root):], _kind(op))
                if lock not in seen.locks:
                    seen.locks.append(lock)
        # (rclone's shape, its config renamed away as a backup and replaced by a rename onto it, is state there too)
        state = locking.state_files({"probe": ops}, str(box.root), ("io",), ("tmp", "run"))
        seen.state = sorted(state)
        seen.formats = {rel: _format(box.root / rel) for rel in seen.state}
        seen.queries = {rel: _sqlite_query(box.root / rel) for rel, fmt in seen.formats.items() if fmt == "sqlite"}
        seen.keys = {rel: _key_path(box.root / rel, fmt) for rel, fmt in seen.formats.items() if fmt and fmt != "sqlite"}
        if proc.returncode != 0:
            said = " ".join(proc.stderr.decode(errors="replace").split())  # one line: it goes in a YAML comment
            seen.note = f"it exited {proc.returncode}: {said[:200]}"
        return seen
    finally:
        if workdir is not None:
            with interrupts_held():  # removed whole: an interrupt now (a second one) waits until it has ended
                end_run(workdir)


def help_text(program: list[str]) -> str:
    try:
        proc = subprocess.run(program + ["--help"], capture_output=True, timeout=10, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return (proc.stdout + proc.stderr).decode(errors="replace")


def _duration(seconds: float, factor: float, floor: float) -> str:
    return f"{max(floor, round(seconds * factor + 0.5)):g}s"


def write_spec(path: Path, probes: list[str], read: str | None, setup: list[str], force: bool,
               tool: str | None = None) -> Path:
    """Probe each command and write the commented spec at `path`; raise UsageError for bad commands."""
    if path.exists() and not force:
        raise UsageError(f"{path} already exists.", hint="Pass --force to overwrite it, or another path.")
    if not observe.available()[0]:
        raise UsageError(f"--probe needs strace, which cannot trace here: {observe.available()[1]}.")
    commands = [shlex.split(p) for p in probes]
    if not all(commands):
        raise UsageError("--probe was given an empty command.", hint='e.g. --probe "mytool config set {key} {value}"')
    program = shlex.split(tool) if tool else [commands[0][0]]
    if not program or any(c[:len(program)] != program for c in commands):
        raise UsageError("every --probe command must start with tool.command "
                         f"({shlex.join(program) if program else 'empty'}).",
                         hint="Give --tool the words every command starts with, e.g. --tool \"git config --global\".")

    def after_tool(command: str) -> list[str]:
        words = shlex.split(command)
        return words[len(program):] if words[:len(program)] == program else words
    def setup_step(command: str) -> list[str] | str:
        # A command that does not start with the tool is the shell's (a file written first): a `sh` step.
        return after_tool(command) if shlex.split(command)[:len(program)] == program else command
    setup_args = [setup_step(s) for s in setup]
    seen = [observe_once(program, c[len(program):], setup_args) for c in commands]
    read_args = after_tool(read) if read else None
    here = str(path.parent.resolve()) + "/"
    named = [("{spec_dir}/" + program[0][len(here):]) if program[0].startswith(here) else program[0], *program[1:]]
    text = _render(named, seen, read_args, setup_args, help_text(program))
    from clirace.spec.starter import SCHEMA_FILE, schema_line, schema_text
    path.write_text(schema_line() + text)
    if not (path.parent / SCHEMA_FILE).exists():
        (path.parent / SCHEMA_FILE).write_text(schema_text())
    return path


def _flow(argv: Iterable[str]) -> str:
    return json.dumps(list(argv))


def _render(program: list[str], seen: list[Observed], read: list[str] | None, setup: list[list[str] | str],
            helptext: str) -> str:
    slowest = max(s.seconds for s in seen)
    out = ["# clirace spec written by `clirace init --probe` from one run of each command, alone, under strace.",
           "# Every line marked GUESS is what the run suggested: check it. NOT FOUND says what the run could not tell.",
           "version: 1", "tool:", f"  command: {_flow(program)}",
           f"  timeout: {_duration(slowest, 10, 5)}   # GUESS: 10x the slowest run alone ({slowest:.2f}s)"]
    if setup:
        out += ["setup:"] + [f"  - {{sh: {json.dumps(s)}}}" if isinstance(s, str) else f"  - {_flow(s)}" for s in setup]
    out.append("workloads:")
    for s in seen:
        args = s.command[len(program):]
        words = set(placeholders.names_in(" ".join(args)))
        out.append(f"  # observed: {shlex.join(s.command)} ({s.seconds:.2f}s, exit {s.exit_code})"
                   + (f"; {s.note}" if s.note else ""))
        out.append(f"  #   wrote: {', '.join(s.state) or 'nothing under the sandbox'}; locks: "
                   + (", ".join(f"{k} on {p}" for p, k in s.locks) or "none"))
        if s.exit_code != 0 and not s.state:
            out.append("  # NOT FOUND: the state it changes: it failed run alone and wrote nothing under the sandbox"
                       + ("; it could not reach a server, which the probe does not start: declare it under services "
                          "(postgres or redis: clirace starts one per trial, with its setup), hold its lock with "
                          "lock.hold.take (pg-row, pg-advisory or redis-nx), and check the guesses below against a "
                          "running server" if _SERVER.search(s.note) else ""))
        if {"key", "value"} <= words:
            state = next((p for p in s.state if s.keys.get(p) or s.queries.get(p)), None) or \
                next((p for p in s.state if s.formats.get(p)), None)
            out += ["  - kind: keys", f"    run: {_flow(args)}"]
            if state:
                fmt = s.formats[state]
                query, key = s.queries.get(state), s.keys.get(state)
                extra = f", query: {json.dumps(query)}" if query else f", key: {json.dumps(key)}" if key and \
                    key != "{key}" else ""
                out.append(f"    config: {{path: {json.dumps(_placeholder(state))}, format: {fmt}{extra}}}   "
                           f"# GUESS: the {fmt} file it wrote" + (", where the key landed" if query or key else ""))
                if (fmt == "sqlite" and not query) or (fmt != "sqlite" and key is None):
                    out.append(f"    # NOT FOUND: where {PROBE_VALUES['key']} landed in it; config."
                               f"{'query' if fmt == 'sqlite' else 'key'} must say")
            elif read:
                out.append(f"    read: {_flow(read)}   # the --read command")
            else:
                out.append(f"    read: {_flow(['TODO'])}   # NOT FOUND: no state file of a known format; give "
                           "a command printing {key}'s value (--read)")
        elif read:
            out += ["  - kind: counter   # GUESS: a command without {key} {value}, with a read command",
                    f"    run: {_flow(args)}", f"    read: {_flow(read)}"]
        else:
            out += [f"  # NOT FOUND: {shlex.join(s.command)} has no {{key}} {{value}} and no --read was given:",
                    "  # its workload kind (counter, claim, output) cannot be told from one run"]
    out += _lock(seen, helptext, slowest, len(program))
    out += _session(helptext)
    return "\n".join(out) + "\n"


def _lock(seen: list[Observed], helptext: str, slowest: float, tool_words: int) -> list[str]:
    locked = next((s for s in seen if s.locks), None)
    if locked is None:
        return ["# NOT FOUND: no lock call (flock, fcntl, O_EXCL create) in any run alone: no lock section.",
                "# (A tool that locks in a server, or with link(), is not seen here.)"]
    lock_path, kind = locked.locks[0]
    out = ["lock:", f"  contender: {_flow(locked.command[tool_words:])}",
           "  hold:", f"    take: {{path: {json.dumps(_placeholder(lock_path))}, kind: {kind}}}   "
           f"# GUESS: the {kind} lock `{shlex.join(locked.command)}` took",
           f"  prompt: {_duration(slowest, 5, 2)}   # GUESS: 5x the slowest run alone"]
    wait = _WAIT.search(helptext)
    if wait:
        out.append(f"  wait_option: [{json.dumps(wait.group(1))}, \"{{timeout_s}}\"]   # GUESS: from --help; "
                   "check its unit (seconds: {timeout_s}, milliseconds: {timeout_ms})")
    else:
        out.append("  # NOT FOUND: no lock-wait option in --help (wait_option)")
    out.append("  # NOT FOUND: error_command (a command that takes the lock, then fails): one run cannot tell one")
    return out


def _session(helptext: str) -> list[str]:
    found = _SESSION.search(helptext)
    if found:
        return ["session:", f"  flag: [{json.dumps(found.group(1))}, \"{{session_id}}\"]   # GUESS: from --help"]
    return ["# NOT FOUND: no session flag in --help (session.flag)"]
