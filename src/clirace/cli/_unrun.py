"""`clirace validate`: the subcommands the tool's --help shows that the spec never runs.

A command that skips the lock (`config unset` beside a locked `config set`) is only caught when something runs it:
a spec that runs set, incr and claim scores such a tool 3. So validate reads the tool's `--help` (and each
command's, one level down), in a scratch home, and warns about every subcommand no command of the spec runs, with
the line that would. Read-only names (get, list, show, ...) are left out; what cannot be read (the tool does not
run, prints no command list) is said, never guessed.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clirace.spec import Spec, placeholders, words

HELP_TIMEOUT = 5.0  # seconds for one --help
MAX_COMMANDS = 24  # top-level commands whose own --help is read (the rest are listed as they are)
MAX_SHOWN = 12  # warnings printed; the rest are counted
READ_ONLY = frozenset("""help completion completions version get list ls show status cat info view search describe
    print env doctor which path dump export diff check validate inspect query read find log logs explain man docs
    about whoami""".split())
_HEADER = re.compile(r"^\s*(?:available\s+)?(?:sub)?commands\s*:?\s*$", re.I)
_POSITIONALS = re.compile(r"^\s*(?:positional arguments|arguments)\s*:?\s*$", re.I)
_BRACES = re.compile(r"\{([A-Za-z][A-Za-z0-9_-]*(?:,[A-Za-z][A-Za-z0-9_-]*)+)\}")
_ENTRY = re.compile(r"^\s+([a-z][a-z0-9_-]*)(?:\s*,\s*[a-z][a-z0-9_-]*)*(?:\s{2,}\S.*)?$")


def commands_in(text: str) -> list[str]:
    """The subcommand names a --help text lists: argparse's {a,b,c}, and the entries under a "Commands:" (cobra's
    "Available Commands:", clap's "SUBCOMMANDS:") heading, each the first word of an indented line."""
    found = [name for group in _BRACES.findall(text) for name in group.split(",")]
    listing = False
    for line in text.splitlines():
        if _HEADER.match(line):
            listing = True
            continue
        if _POSITIONALS.match(line) or (line.strip() and not line[:1].isspace()):
            listing = False
            continue
        if listing and (entry := _ENTRY.match(line)):
            found.append(entry.group(1))
    return list(dict.fromkeys(found))


def _run_help(argv: list[str], env: dict[str, str], cwd: str) -> tuple[str | None, str]:
    """What `argv` printed (stdout, else stderr), or None and why it could not be read."""
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, errors="replace", timeout=HELP_TIMEOUT,
                              stdin=subprocess.DEVNULL, env=env, cwd=cwd)
    except (OSError, subprocess.SubprocessError) as exc:
        return None, f"{' '.join(argv)}: {exc}"
    printed = proc.stdout if proc.stdout.strip() else proc.stderr
    if proc.returncode not in (0, 1, 2) or not printed.strip():
        return None, f"{' '.join(argv)} exited {proc.returncode} and printed {'nothing' if not printed.strip() else 'an error'}"
    return printed, ""


def _scratch(spec: Spec, root: Path) -> tuple[list[str], dict[str, str]]:
    values: dict[str, object] = {name: root / rel for name, rel in placeholders.LAYOUT.items()}
    values.update(sandbox=root, spec_dir=spec.spec_dir, python=sys.executable)
    for path in values.values():
        if isinstance(path, Path) and str(path).startswith(str(root)):
            path.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k not in ("TMP", "TEMP", "XDG_CONFIG_DIRS")}
    env.update(HOME=str(values["home"]), TMPDIR=str(values["tmp"]), XDG_CONFIG_HOME=str(values["config_home"]),
               XDG_CACHE_HOME=str(values["cache_home"]), XDG_STATE_HOME=str(values["state_home"]),
               XDG_DATA_HOME=str(values["data_home"]),
               XDG_RUNTIME_DIR=str(values["runtime_dir"]))
    env.update({k: placeholders.expand(v, values) for k, v in spec.env.items()})
    return placeholders.expand_all(spec.command, values), env


def seen_in_help(spec: Spec) -> tuple[list[tuple[str, ...]] | None, str]:
    """The command paths (("config", "unset"), ("hold",)) the tool's --help shows, one level into each command; or
    None and why not (the tool did not run, or printed no command list)."""
    with tempfile.TemporaryDirectory(prefix="clirace-help-") as tmp:
        base, env = _scratch(spec, Path(tmp))
        top, why = _run_help([*base, "--help"], env, tmp)
        if top is None:
            return None, f"the tool's --help could not be read ({why})"
        names = [n for n in commands_in(top) if n != "help"]
        if not names:
            return None, "the tool's --help lists no subcommands"
        paths: list[tuple[str, ...]] = []
        for n, name in enumerate(names):
            inner, _ = _run_help([*base, name, "--help"], env, tmp) if n < MAX_COMMANDS else (None, "")
            children = [c for c in commands_in(inner or "") if c not in (name, "help") and c not in names]
            paths.extend([(name, child) for child in children] or [(name,)])
        return paths, ""


def _spec_argvs(spec: Spec) -> Iterator[tuple[str, ...]]:
    # An own command (run, sh: a dispatcher script) counts by the words it is written with.
    setups = [*spec.setup, *(s for w in spec.workloads for s in w.setup)]
    yield from (tuple(" ".join(words(s)).split()) for s in setups)
    for w in spec.workloads:
        yield from (tuple(" ".join(words(a)).split()) for a in (w.run, w.read, w.add, w.list) if a)
    if spec.lock is not None:
        yield from (tuple(" ".join(words(a)).split()) for a in (spec.lock.contender, spec.lock.hold.command,
                                                                  spec.lock.error_command) if a)
    if spec.session is not None and spec.session.run:
        yield tuple(spec.session.run)
    if spec.services is not None:
        yield from (tuple(a) for a in spec.services.postgres_setup)


def _runs(argv: tuple[str, ...], path: tuple[str, ...]) -> bool:
    return any(argv[i:i + len(path)] == path for i in range(len(argv)))


def never_run(spec: Spec, paths: list[tuple[str, ...]]) -> list[tuple[str, ...]]:
    """The paths no command of the spec runs, read-only names left out."""
    argvs = list(_spec_argvs(spec))
    return [p for p in paths if p[-1] not in READ_ONLY and not any(_runs(a, p) for a in argvs)]


@dataclass(frozen=True)
class Unrun:
    """What validate found of the subcommands: how many its --help shows (None: none could be found, `why`
    says why), and those the spec never runs."""
    seen: int | None
    never_run: list[tuple[str, ...]]
    why: str = ""

    def warning(self, path: tuple[str, ...]) -> str:
        shown = ", ".join(f'"{word}"' for word in path)
        return (f"the spec never runs `{' '.join(path)}` (seen in --help): a change it makes without the lock is not "
                f"caught; add e.g. `lock.contender: [{shown}, ...]` (its arguments as its --help says), or a workload "
                "running it")

    def to_dict(self) -> dict[str, Any]:
        return {"seen": self.seen, "why_none": self.why or None,
                "never_run": [{"subcommand": " ".join(p), "warning": self.warning(p)} for p in self.never_run]}


NOT_LOOKED = Unrun(None, [], "not looked for (--no-tool)")


def unrun(spec: Spec) -> Unrun:
    paths, why = seen_in_help(spec)
    return Unrun(None, [], why) if paths is None else Unrun(len(paths), never_run(spec, paths))


def lines(found: Unrun) -> list[str]:
    """validate's lines on the subcommands: a warning per one never run, with the line that would run it."""
    if found is NOT_LOOKED:
        return [f"  subcommands: {found.why}"]
    if found.seen is None:
        return [f"  subcommands: none found ({found.why})"]
    if not found.never_run:
        return [f"  subcommands: the spec runs every one the tool's --help shows that may change state ({found.seen} "
                "seen)"]
    out = [f"  warning: {found.warning(path)}" for path in found.never_run[:MAX_SHOWN]]
    if len(found.never_run) > MAX_SHOWN:
        out.append(f"  warning: and {len(found.never_run) - MAX_SHOWN} more subcommands the spec never runs")
    return out
