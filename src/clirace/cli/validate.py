"""`clirace validate`: what a spec will and will not let clirace test, without running anything of the tool.

The spec is loaded exactly as `check` loads it (schema, placeholders, the program exists); then each criterion
says which parts of the spec exercise it, or what to add. The only processes started are strace's own probe and, for
the subcommands the spec never runs (cli/_unrun.py), the tool's --help.
"""
from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clirace.checks.catalogue import load_section
from clirace.cli._unrun import NOT_LOOKED, Unrun, lines, unrun
from clirace.errors import CliraceError, SpecError
from clirace.history.version import __version__
from clirace.spec import Lock, Spec, load_spec, placeholders, words
from clirace.spec._paths import shown_path

FULL, PARTIAL, NONE = "will test", "partly", "will not test"


@dataclass(frozen=True)
class Coverage:
    criterion: str
    level: int
    extent: str  # FULL; PARTIAL (can fail, cannot pass: a part is not exercised); NONE
    how: str  # what will exercise it, and what to add for the rest

    @property
    def testable(self) -> bool:
        return self.extent != NONE


def _lock_release(lock: Lock, strace: tuple[bool, str]) -> tuple[str, str]:
    how = "the holder's normal exit, Ctrl-C and SIGTERM"
    if lock.hold.kind is not None and lock.hold.kind.on_server:
        return NONE, (f"with lock.hold.take {lock.hold.kind} clirace holds the lock itself, and cannot hold a real "
                      "invocation at a server lock; add lock.hold.command (a hook that takes the lock and waits) so "
                      "that the tool is the holder")
    if lock.hold.own:
        return NONE, ("lock.hold.run is a helper program, not the tool, so the tool is never the holder; add "
                      "lock.hold.command or lock.hold.park to test the tool's release")
    if lock.hold.how == "take":
        # The holder is then a real lock.contender that strace stops just after its lock call (scenarios/hold.py).
        usable, why = strace
        if not usable:
            return NONE, (f"with lock.hold.take the holder is a real lock.contender stopped at its lock call by "
                          f"strace, which cannot run here ({why}); install strace, or use lock.hold.command or "
                          "lock.hold.park")
        how = "a real lock.contender stopped by strace just after its lock call (lock.hold.take): " + how
    if lock.error_command or lock.hold.invalid_content:
        return FULL, how + " and error exit (" + ("lock.error_command" if lock.error_command else
                                                 "lock.hold.park.invalid_content") + ")"
    return PARTIAL, how + "; it cannot pass without the error exit: add lock.error_command"


def _effects(spec: Spec) -> str:
    """How the lock experiments read back what their commands wrote, or why they cannot (scenarios/effects.py)."""
    lock = spec.lock
    assert lock is not None
    writers = [name for name, command in (("lock.contender", lock.contender), ("the hold command", lock.hold.command))
               if command and any({"key", "value"} & set(placeholders.names_in(arg)) for arg in words(command))]
    keys = spec.workload("keys")
    if not writers:
        return ("; what it writes is not read back: give lock.contender {key} and {value} to catch one that exits 0 "
                "without its change")
    if keys is None:
        return (f"; {' and '.join(writers)} write {{key}}, but no keys workload says how to read it back: what they "
                "write is not checked (add a keys workload with config or read)")
    how = f"{keys.config.path} ({keys.config.format})" if keys.config else "the keys workload's read command"
    return f"; the keys {' and '.join(writers)} write are read back from {how} once the holder has ended"


SQLITE_NAMES = (".db", ".sqlite", ".sqlite3", ".db3")


def _sqlite_take(spec: Spec) -> str:
    """Advice when lock.hold.take locks a SQLite database as a whole file: a contender is then refused at its
    read, at start-up, and never reaches the write where a real SQLite tool meets its lock."""
    hold = spec.lock.hold if spec.lock else None
    if hold is None or hold.how != "take" or hold.kind is None or hold.kind.value not in ("fcntl", "flock"):
        return ""
    keys = spec.workload("keys")
    sqlite_state = keys is not None and keys.config is not None and keys.config.format == "sqlite" \
        and keys.config.path == hold.path
    if not (sqlite_state or (hold.path or "").lower().endswith(SQLITE_NAMES)):
        return ""
    return (f"; lock.hold.take.path {hold.path} is a SQLite database: kind {hold.kind} locks the whole file, so a "
            "contender is refused at its read, never at its write; use `take: {path: ..., kind: sqlite-write}` "
            "to hold SQLite's write lock as a writing tool does (readers still get in)")


def coverage(spec: Spec, strace: tuple[bool, str], servers: bool = True) -> list[Coverage]:
    """Per criterion, what will exercise it. `servers`: say none can run when a server the spec declares is not
    installed (services.missing_message says which binary and how to install it)."""
    found = _coverage(spec, strace)
    message = _missing_servers(spec, [c.criterion for c in found if c.testable]) if servers else None
    if message is None:
        return found
    return [Coverage(c.criterion, c.level, NONE, message) if c.testable else c for c in found]


def _missing_servers(spec: Spec, criteria: list[str]) -> str | None:
    """services.missing_message; the servers' modules are imported only for a spec that declares one (validate
    starts in under 100 ms, docs/benchmarks.md)."""
    if spec.services is None:
        return None
    from clirace.run import services
    return services.missing_message(spec, criteria)


def _coverage(spec: Spec, strace: tuple[bool, str]) -> list[Coverage]:
    usable, why = strace
    kinds = [w.kind for w in spec.workloads]
    keys = spec.workload("keys")
    out = {}
    out["no-silent-corruption"] = (FULL, f"workloads: {', '.join(kinds)}") if kinds else (NONE, "")
    if spec.lock:
        hold = "lock.hold.run" if spec.lock.hold.own else \
            {"command": "lock.hold.command", "park": "lock.hold.park", "take": "lock.hold.take"}[spec.lock.hold.how]
        out["lock-excludes"] = (FULL, f"lock.contender while {hold} holds the lock" + _effects(spec) + _sqlite_take(spec))
        out["lock-error-structured"] = (FULL, "what lock.contender prints while the lock is held")
        out["lock-released-on-exit"] = _lock_release(spec.lock, strace)
        given = [f"lock.wait_option {' '.join(spec.lock.wait_option)}"] if spec.lock.wait_option else []
        given += [f"lock.wait_env {' '.join(f'{k}={v}' for k, v in spec.lock.wait_env)}"] if spec.lock.wait_env else []
        out["lock-wait-timeout"] = ((FULL, f"{' and '.join(given)}, wait {spec.lock.wait:g}s") if given else
                                    (FULL, "lock.never_waits: the contender's prompt answer is its lock timeout")
                                    if spec.lock.never_waits else (NONE, ""))
    session = spec.session
    if session and session.none:
        out["session-isolation"] = (PARTIAL, "session.none: the tool has no session id, so this criterion fails")
    elif session and (session.flag or session.env):
        how = " and ".join(f"session.{way}" for way in ("flag", "env") if getattr(session, way)) + ", temp files of " + (
            "session.run" if session.run else "the output workload")
        out["session-isolation"] = (FULL, how) if usable else (NONE, f"needs strace: {why}")
    if keys and keys.config:
        how = (f"readers of {keys.config.path} ({keys.config.format}) during parallel writes" if keys.config.format != "sqlite"
               else f"readers of the SQLite database {keys.config.path}, through its own lock, during parallel writes")
        if usable:
            out["atomic-config-writes"] = (FULL, how + "; writers killed mid-write (strace)")
        else:
            out["atomic-config-writes"] = (PARTIAL, how + f"; it cannot pass without the mid-write kills ({why})")
    result = []
    for level in load_section("s15")["levels"]:
        for c in level.get("criteria", []):
            extent, how = out.get(c["id"], (NONE, ""))
            result.append(Coverage(c["id"], level["score"], extent, how or c.get("to_test", "")))
    return result


def describe(spec: Spec, strace: tuple[bool, str]) -> list[str]:
    static: dict[str, object] = {"spec_dir": str(spec.spec_dir), "python": sys.executable}
    command = " ".join(placeholders.expand(a, static) for a in spec.command)
    lines = [f"  tool: {command}", f"  rounds {spec.rounds} x {spec.parallel} in parallel per workload"]
    if spec.services is not None:
        declared = [name for name in ("redis", "postgres") if getattr(spec.services, name)]
        missing = _missing_servers(spec, [c.criterion for c in _coverage(spec, strace) if c.testable])
        lines.append(f"  services: {', '.join(declared)}" + (f": {missing}" if missing else
                                                               " (started by clirace, a fresh state per trial)"))
    cov = coverage(spec, strace)
    width = max(len(c.criterion) for c in cov)
    for c in cov:
        lines.append(f"  level {c.level}  {c.criterion:{width}}  {c.extent:13}  {c.how}")
    if not any(c.testable for c in cov) and not (spec.services and _missing_servers(spec, [])):
        lines.append("  nothing can be tested with this spec: add workloads, lock, or session (clirace init shows all)")
    return lines


EXTENTS = {FULL: "full", PARTIAL: "partial", NONE: "none"}  # the JSON's words: stable, unlike the text's


@dataclass
class Validated:
    """One spec as validate saw it: loaded (its coverage, its description, the subcommands it never runs) or
    refused (`error`, as `check` reports a spec it cannot load)."""
    path: str  # as given
    error: CliraceError | None = None
    coverage: list[Coverage] = field(default_factory=list)
    described: list[str] = field(default_factory=list)
    unrun: Unrun | None = None  # None: not looked for (only one line per spec was asked for)

    @property
    def testable(self) -> bool:
        return any(c.testable for c in self.coverage)

    @property
    def passed(self) -> bool:
        return self.error is None and self.testable

    def text(self, quiet: bool, errors_too: bool) -> list[str]:
        """The text lines; the error of a refused spec only with `errors_too` (on stdout it went to stderr)."""
        if self.error is not None:
            return [f"clirace: {self.error.paragraph()}"] if errors_too else []
        first = f"{shown_path(self.path)}: " + ("valid" if self.testable else "valid, but nothing can be tested")
        return [first] if quiet else [first, *self.described, *(lines(self.unrun) if self.unrun else [])]

    def to_dict(self) -> dict[str, Any]:
        if self.error is not None:
            from clirace.report._failed import Failed
            from clirace.report.jsonout import failed_dict
            return {"clirace_version": __version__, "spec": shown_path(self.path), "valid": False, "testable": False,
                    "error": failed_dict(Failed(self.path, self.error))["error"]}
        return {"clirace_version": __version__, "spec": shown_path(self.path), "valid": True,
                "testable": self.testable,
                "criteria": [{"id": c.criterion, "level": c.level, "extent": EXTENTS[c.extent], "how": c.how}
                             for c in self.coverage],
                "subcommands": self.unrun.to_dict() if self.unrun else None}


def validated(path: Path, strace: tuple[bool, str], no_tool: bool, allow_outside_sandbox: bool,
              subcommands: bool) -> Validated:
    """Load `path` as `check` would and say what it lets clirace test; `subcommands`: read the tool's --help for
    the ones the spec never runs (not with `no_tool`)."""
    try:
        spec = load_spec(path, allow_outside_sandbox=allow_outside_sandbox, check_programs=not no_tool)
    except SpecError as exc:
        return Validated(str(path), exc)
    found = NOT_LOOKED if no_tool else unrun(spec) if subcommands else None
    return Validated(str(path), None, coverage(spec, strace), describe(spec, strace), found)


def render(items: list[Validated], fmt: str, quiet: bool, errors_too: bool = True) -> str:
    """`items` in `fmt`: text, one block per spec; json, one object (several specs: a list), as `check`'s."""
    if fmt == "json":
        data = [item.to_dict() for item in items]
        return json.dumps(data[0] if len(data) == 1 else data, indent=2) + "\n"
    return "".join(line + "\n" for item in items for line in item.text(quiet, errors_too))


FORMATS = ("text", "json")
