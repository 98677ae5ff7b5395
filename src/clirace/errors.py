"""The tool's own errors, kept apart from findings about the target.

A finding says something about the program under test; an error here says clirace could not do its job.
Every error renders as one paragraph: where, what was found, what was expected, and what to do.
Exit codes are part of the public contract (README, "Exit codes").
"""
from __future__ import annotations

EXIT_OK = 0
EXIT_BELOW_MIN_SCORE = 1
EXIT_USAGE = 2  # bad spec, bad option, missing target binary
EXIT_INTERNAL = 3  # a bug in clirace
EXIT_NOT_REMOVED = 4  # the check ran, but what it made could not all be removed (named in the notes and on stderr)
EXIT_INTERRUPTED = 130
EXIT_PIPE_CLOSED = 141  # stdout's reader closed it early (`clirace judge h.json | head -1`); 128 + SIGPIPE, as a shell says
EXIT_TERMINATED = 143


class CliraceError(Exception):
    """Base of every error clirace reports to the user without a traceback."""

    exit_code = EXIT_USAGE

    def __init__(self, message: str, *, where: str | None = None, hint: str | None = None):
        super().__init__(message)
        self.message = message
        self.where = where
        self.hint = hint

    def paragraph(self) -> str:
        parts = [f"{self.where}: {self.message}" if self.where else self.message]
        if self.hint:
            parts.append(self.hint)
        return " ".join(p.rstrip() for p in parts)


class SpecError(CliraceError):
    """The spec file cannot be read or does not describe a runnable check.

    Common causes: YAML syntax, a misspelt key (the message suggests the nearest valid one), a placeholder
    that does not exist in that field, a command whose program is not on PATH.
    """


class UsageError(CliraceError):
    """A command-line option is invalid."""


class HistoryError(CliraceError):
    """A saved history file cannot be re-judged (missing, not JSON, or from an incompatible version)."""


class InternalError(CliraceError):
    """clirace itself broke. The message says so and asks for a report."""

    exit_code = EXIT_INTERNAL

    def paragraph(self) -> str:
        return (f"internal error (a bug in clirace, please report it with the spec and this message): "
                f"{self.message}")
