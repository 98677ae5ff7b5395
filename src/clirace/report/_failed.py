"""A spec (or saved history) that could not be checked: every report format still describes it, so that a CI
step uploading SARIF or JUnit finds a file saying what went wrong and where, not no file at all."""
from __future__ import annotations

from dataclasses import dataclass

from clirace.errors import CliraceError
from clirace.report._locate import Place, display_path
from clirace.verdict.result import Result


@dataclass
class Failed:
    spec_path: str
    error: CliraceError

    @property
    def exit_code(self) -> int:
        return self.error.exit_code

    @property
    def kind(self) -> str:
        return {"SpecError": "spec error", "HistoryError": "history error"}.get(type(self.error).__name__, "error")

    def message(self) -> str:
        """The error without its `where` prefix (the place says it)."""
        return " ".join(p for p in (self.error.message.rstrip(), self.error.hint or "") if p)

    def place(self) -> Place:
        """Where the error points: file:line:col from the error, else the spec itself (line 1)."""
        where = self.error.where or ""
        try:
            path, line, column = where.rsplit(":", 2)
            return Place(display_path(path), int(line), int(column))
        except ValueError:
            return Place(display_path(where or self.spec_path))


Item = Result | Failed  # one spec in a report: a run, or a spec that could not be checked
Items = Item | list[Item]  # what a renderer takes: one spec, or several, each in turn
