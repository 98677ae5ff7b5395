"""Stage 4, history: what happened, as plain data that can be saved and judged again without re-running.

A trial is one experiment in one fresh sandbox: the invocations it started (argv, env changes, times, exit
code or signal, capped output) and the facts it observed (files read back, samples, traces). Checks read
only this; a history saved with `--history FILE` is re-judged by `clirace judge FILE`.
"""
from __future__ import annotations

import json
import re
import shlex
import signal as _signal
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .errors import HistoryError

FORMAT = "clirace-history/1"
OUTPUT_CAP = 64 * 1024  # bytes of each stream kept; stdout_bytes/stderr_bytes count everything printed
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f\x80-\x9f]")


@dataclass
class Invocation:
    label: str
    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)
    cwd: str = ""
    started: float = 0.0
    ended: float = 0.0
    exit_code: int | None = None
    signal: int | None = None
    stdout: str = ""
    stderr: str = ""
    stdout_bytes: int = 0
    stderr_bytes: int = 0
    timed_out: bool = False
    wrapper: str = ""  # e.g. strace amplifying or killing it; argv above is the target's own command line
    ended_by: str = ""  # why clirace itself sent the signal that ended it, when it did (not a deadline)
    sandbox: str = ""  # the trial's sandbox; shown as {sandbox} in reports, so that they read the same every run

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out

    @property
    def duration(self) -> float:
        return self.ended - self.started

    def outcome(self) -> str:
        if self.timed_out:
            return f"killed at its deadline after {self.duration:.1f}s"
        if self.signal:
            try:
                name = _signal.Signals(self.signal).name
            except ValueError:
                name = f"signal {self.signal}"
            return f"killed by {name}" + (f", {self.ended_by}" if self.ended_by else "")
        return f"exit {self.exit_code}"

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


@dataclass
class Trial:
    """One experiment's record. `facts` holds what the scenario observed; `error` an indeterminate outcome."""
    scenario: str
    name: str
    round: int = 0
    invocations: list[Invocation] = field(default_factory=list)
    facts: dict = field(default_factory=dict)
    error: str | None = None

    def invocation(self, label: str) -> Invocation | None:
        return next((i for i in self.invocations if i.label == label), None)

    def labelled(self, prefix: str) -> list[Invocation]:
        return [i for i in self.invocations if i.label.startswith(prefix)]


@dataclass
class History:
    spec_path: str
    seed: int
    environment: dict = field(default_factory=dict)
    trials: list[Trial] = field(default_factory=list)
    spec: dict = field(default_factory=dict)

    def of(self, scenario: str) -> list[Trial]:
        return [t for t in self.trials if t.scenario == scenario]

    def save(self, path: Path) -> None:
        data = {"format": FORMAT, **asdict(self)}
        Path(path).write_text(json.dumps(data, indent=1))

    @classmethod
    def load(cls, path: Path) -> "History":
        try:
            data = json.loads(Path(path).read_text())
        except FileNotFoundError:
            raise HistoryError("history file not found.", where=str(path)) from None
        except (OSError, ValueError) as exc:
            raise HistoryError(f"cannot read the history: {exc}.", where=str(path)) from None
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise HistoryError(f"not a {FORMAT} file.", where=str(path),
                               hint="Save one with `clirace check SPEC --history FILE`.")
        try:
            trials = [Trial(**{**t, "invocations": [Invocation(**i) for i in t["invocations"]]})
                      for t in data["trials"]]
            return cls(spec_path=data["spec_path"], seed=data["seed"], environment=data.get("environment", {}),
                       trials=trials, spec=data.get("spec", {}))
        except (KeyError, TypeError) as exc:
            raise HistoryError(f"the history is incomplete or from another version ({exc}).", where=str(path)) from None
