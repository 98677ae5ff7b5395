"""Every exception type of clirace, each saying whose failure it is; kept apart from findings about the target.

A finding says something about the program under test; an error here says clirace could not do its job, or
could not decide. Three families:
- CliraceError and its kinds: what the user is told, as one paragraph (where, what was found, what was
  expected, what to do), with an exit code that is part of the public contract (README, "Exit codes");
- the undecided: a trial, a reading or a server that gave no answer. Caught inside a stage and turned into
  data (an unknown verdict, a trial's failure), never a finding and never a pass;
- the bugs: a check or a reader of clirace's own that broke its contract.
The modules that raise them re-export the few that tests import from there.
"""
from __future__ import annotations

from collections.abc import Iterable

EXIT_OK = 0
EXIT_BELOW_MIN_SCORE = 1
EXIT_USAGE = 2  # bad spec, bad option, missing target binary
EXIT_INTERNAL = 3  # a bug in clirace
EXIT_NOT_REMOVED = 4  # the check ran, but what it made could not all be removed (named in the notes and on stderr)
EXIT_INTERRUPTED = 130
EXIT_PIPE_CLOSED = 141  # stdout's reader closed it early (`clirace judge h.json | head -1`); 128 + SIGPIPE, as a shell says
EXIT_TERMINATED = 143


def did_you_mean(word: object, options: Iterable[object], template: str = "'{}'") -> str | None:
    """The closest of `options` to a word the user gave, formatted with template, for the hint of an error; here,
    at the bottom, so that an error of the command line or the plugin does not load the spec package for it."""
    import difflib

    guess = difflib.get_close_matches(str(word), [str(o) for o in options], n=1, cutoff=0.6)
    return template.format(guess[0]) if guess else None


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


class PathChanged(UsageError):
    """The user's: a report or history path was swapped (for a directory, a FIFO, a link, another file) during
    the run (cli/_outputs.py)."""


# --- undecided: no answer, so no verdict either way --------------------------------------------------------

class TrialFailed(Exception):
    """The trial could not be carried out (setup failed, a holder never became ready): its outcome is unknown.
    `failure` says whose failure it was, as a history.vocab.Failure value: the tool's unless said otherwise (a
    setup refused in a fresh sandbox is the spec's; one killed at its deadline gave no answer, and is not)."""

    def __init__(self, message: str, failure: str = "tool", *, meaning: str = ""):
        # `meaning`, what the failure leaves unknown, is kept apart so that a caller quoting several failures in
        # one sentence (services.postgres.setup run twice) can say it once: `what` is the message without it.
        super().__init__(f"{message}: {meaning}" if meaning else message)
        self.what, self.failure = message, failure


class Undecided(Exception):
    """A check's: raised by a `judge_one` whose trial cannot decide the invariant: Undecided(reason, hint)."""


class NotAvailable(RuntimeError):
    """The machine's: strace cannot stop processes here (not installed, ptrace forbidden, or disabled on
    purpose), so the experiments that need it are not tested."""


class Busy(Exception):
    """The target's, for now: the live SQLite database was locked by a writer, so no sample was taken."""


class ServiceFailed(Exception):
    """The machine's or clirace's: a server of the spec's `services` could not be started or reached, so the
    trial cannot be carried out."""


class RedisError(Exception):
    """The server's: it answered clirace's own command with an error reply (-ERR ...), or the connection broke."""


class PgError(Exception):
    """The server's: it answered clirace's own query with an ErrorResponse, or the connection broke."""


class PatternTimeout(Exception):
    """The spec's pattern on the target's output: a regex did not finish within its time bound, so the check
    cannot decide."""

    def __init__(self, pattern: str, seconds: float, size: int):
        super().__init__(f"pattern {pattern!r} used more than {seconds:g} s of CPU on {size:,} bytes of output")
        self.pattern, self.seconds, self.size = pattern, seconds, size


class Unparseable(ValueError):
    """The target's: a config file it wrote is not valid in its format (empty, torn, or never valid)."""


class TooLarge(Unparseable):
    """Nobody's: a config file too large, too deep or too aliased to judge, neither whole nor torn as far as
    clirace can tell.

    A subclass so that `except Unparseable` still stops at it; a check must test for it first and answer
    "could not decide" (the file may be perfectly valid)."""


class OverBudget(ValueError):
    """Nobody's: a YAML document too deep or, through aliases, too large to turn into data; not invalid, just
    too big to judge (an alias bomb expands a few hundred bytes into billions of values)."""


# --- bugs in clirace ----------------------------------------------------------------------------------------

class ReaderFailed(Exception):
    """clirace's: its own config reader raised something other than its format's parse error, a bug in clirace
    (or a limit of the library it uses), not evidence that the file is torn. Not an Unparseable, so no check
    reads it as one."""


class VerdictWithoutEvidence(AssertionError):
    """clirace's: a check tried to fail without a finding, or pass without a record (see checks.findings.Verdict)."""


# --- the pytest plugin's -------------------------------------------------------------------------------------

class CriterionFailed(AssertionError):
    """The target's, as a pytest failure: a criterion of a collected *.clirace.yaml spec failed; the message
    holds its findings."""


# --- stops: the run ends early, cleanly ----------------------------------------------------------------------

class Terminated(BaseException):
    """The user's (or the system's): SIGTERM, turned into an exception so that sandboxes and children are cleaned
    up on the way out. A BaseException, as KeyboardInterrupt is: no `except Exception` may swallow it."""


def interrupt_behind(exc: BaseException) -> BaseException | None:
    """The Ctrl-C or SIGTERM that `exc` was raised while handling, else None. A clean-up that fails on the way out
    of an interrupt (a descriptor closed twice: EBADF) raises an Exception of its own, which hides the interrupt
    from every `except Exception` above it: the run would go on as if nothing had been asked, and call the
    clean-up's error a bug in the experiment."""
    seen: set[int] = set()
    behind = exc.__context__
    while behind is not None and id(behind) not in seen:
        if isinstance(behind, (KeyboardInterrupt, Terminated)):
            return behind
        seen.add(id(behind))
        behind = behind.__context__
    return None
