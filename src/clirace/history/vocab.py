"""The closed vocabularies shared by the spec, the history and the checks: each word defined once.

Every enum is a str, so specs, saved histories and JSON carry the plain words ("park", "counter").
"""
from __future__ import annotations

from enum import Enum


class _Word(str, Enum):
    def __str__(self) -> str:
        return str(self.value)


class WorkloadKind(_Word):
    COUNTER = "counter"
    KEYS = "keys"
    CLAIM = "claim"
    OUTPUT = "output"


class HoldMode(_Word):
    """How the lock is kept busy (spec `lock.hold`)."""
    COMMAND = "command"  # a test hook of the tool holds it until released
    PARK = "park"  # a real invocation, parked while it reads a state file made a named pipe
    TAKE = "take"  # clirace takes the lock itself; the tool is never the holder


class ReadyKind(_Word):
    """How a hook holder shows that it holds the lock (spec `lock.hold.ready`)."""
    FILE = "file"
    STDOUT = "stdout"
    STDERR = "stderr"
    DELAY = "delay"


class LockKind(_Word):
    """The lock clirace takes itself with `lock.hold.take`."""
    EXCLUSIVE_CREATE = "exclusive-create"
    FLOCK = "flock"
    FCNTL = "fcntl"
    LINK = "link"  # a lock file made by link(2) of a pid file onto its name: clirace makes it, as exclusive-create
    SQLITE_WRITE = "sqlite-write"  # SQLite's write lock on a database: BEGIN IMMEDIATE in a connection kept open
    REDIS_NX = "redis-nx"  # a Redis key set with SET key value NX PX ttl (spec `services.redis`)
    PG_ADVISORY = "pg-advisory"  # pg_advisory_lock(key), held by a session of clirace's own
    PG_ROW = "pg-row"  # SELECT ... FOR UPDATE on the row the spec names, in a transaction kept open

    @property
    def on_server(self) -> bool:
        return self in (LockKind.REDIS_NX, LockKind.PG_ADVISORY, LockKind.PG_ROW)


class ConfigFormat(_Word):
    JSON = "json"
    YAML = "yaml"
    TOML = "toml"
    INI = "ini"
    SQLITE = "sqlite"  # a SQLite database, recorded as its tables (scenarios/_sqlite.py)


class Outcome(_Word):
    """What an invocation's end says about its effect, as Jepsen records it: ok (exit 0: applied), fail
    (a non-zero exit: not applied, as far as the tool says), unknown (timed out or killed: it may or may not
    have applied). Every invariant takes an unknown as a bound, never as a failure."""
    OK = "ok"
    FAIL = "fail"
    UNKNOWN = "unknown"


class Way(_Word):
    """How the lock holder ends in the release experiment."""
    NORMAL = "normal"
    ERROR = "error"
    SIGINT = "sigint"
    SIGTERM = "sigterm"
    SIGKILL = "sigkill"


class EventKind(_Word):
    """Timestamped things clirace did or saw during a trial, beside the invocations themselves."""
    HELD = "held"  # the holder was seen holding the lock
    RELEASED = "released"  # clirace let the holder go on (release file, pipe fed, lock dropped)
    SIGNAL_SENT = "signal-sent"  # clirace sent a signal to an invocation (detail: the signal name)
    REACHED_STATE = "reached-state"  # a contender opened the state file the parked holder was reading
    STOPPED = "stopped"  # clirace stopped a contender on purpose (detail: why)
    KILL_INJECTED = "kill-injected"  # strace's log shows it SIGKILLed a process of the invocation
    HOLDER_GONE = "holder-gone"  # the holder had exited on its own, before clirace let it go
    ASKED = "asked"  # a contender was seen blocked reading its stdin, a pipe nobody writes to (detail: what it printed)
    BLOCKED_ON_LOCK = "blocked-on-lock"  # a contender holding the parked file open was seen in its lock call (detail)


# The codes of a structured refusal: a lock held (§15), or a write refused because the state changed since it was
# read (optimistic concurrency, §58). Both carry retry_after_ms and are judged alike.
CONFLICT_CODES = ("LOCK_HELD", "CONCURRENT_MODIFICATION")


class Failure(_Word):
    """Whose failure kept a trial from finishing (history `Trial.failure`): the three kinds are judged apart."""
    TOOL = "tool"  # the target did not get through it (hung, crashed, never held its lock): could not decide
    SPEC = "spec"  # the spec does not fit the tool (its setup fails in a fresh sandbox): exit 2 before any round
    CLIRACE = "clirace"  # clirace itself failed (a bug, or a limit of this machine): exit 3 in a reference run
    INTERRUPTED = "interrupted"  # Ctrl-C or SIGTERM stopped the run in the middle of the trial


# A trial's `error` when Ctrl-C or SIGTERM stopped it (older histories are read by its first word: Trial.failure).
INTERRUPTED_TRIAL = "interrupted before the trial finished"
