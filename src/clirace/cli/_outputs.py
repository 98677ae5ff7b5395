"""Where reports go: `--format F` (stdout or -o PATH) and any number of `--report F=PATH`, plus `--history`.

Every path is checked writable before the run starts (a run can take minutes; a typo in a path must not
waste it) and pinned: its directory is opened and what stands at the path is noted. The target runs in between
and may swap the path for a directory, a FIFO or a link (the user's report path is no secret to it). So at the
end each file is written through the pinned directory's fd: a temp file made there with O_EXCL|O_NOFOLLOW,
then renamed over the path, never following a link and never replacing a directory or a FIFO; a path that is
not what it was when the run started is an error naming it (exit 2), after every other report is written.

A path that was a device or a FIFO when the run started (/dev/stdout, a pipe the user set up) is written in
place, opened without blocking (no reader: an error, not a hang). `$GITHUB_STEP_SUMMARY` is appended to, as
GitHub's convention asks (earlier steps' summaries stay).
"""
from __future__ import annotations

import errno
import fcntl
import os
import stat
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from clirace.errors import PathChanged as PathChanged  # raised here; tests import it from here
from clirace.errors import UsageError

if TYPE_CHECKING:
    from clirace.history import History
    from clirace.report._failed import Failed
    from clirace.verdict.result import Result

    Item = Result | Failed  # what a run reports on for each spec

FORMATS = ("text", "json", "markdown", "github", "junit", "sarif")
_KINDS = {stat.S_IFLNK: "a symbolic link", stat.S_IFIFO: "a named pipe (FIFO)", stat.S_IFCHR: "a character device",
          stat.S_IFBLK: "a block device", stat.S_IFSOCK: "a socket", stat.S_IFDIR: "a directory",
          stat.S_IFREG: "a file"}


@dataclass(frozen=True)
class Outputs:
    format: str = "text"
    output: Path | None = None  # -o: where --format goes instead of stdout
    reports: tuple[tuple[str, Path], ...] = ()
    history: Path | None = None  # with several specs: a directory, one history per spec
    color: str = "auto"  # --color, for text on stdout

    def paths(self) -> list[tuple[str, Path]]:
        pairs = ([("-o", self.output)] if self.output else []) + [("--report", p) for _, p in self.reports]
        return pairs + ([("--history", self.history)] if self.history else [])


def parse_report(value: str, formats: tuple[str, ...] = FORMATS) -> tuple[str, Path]:
    fmt, sep, path = value.partition("=")
    if not sep or not path:
        raise UsageError(f"--report {value!r} is not FORMAT=PATH.", hint=f"e.g. --report {formats[-1]}=clirace."
                         f"{formats[-1]}; formats: {', '.join(formats)}.")
    if fmt not in formats:
        raise UsageError(f"--report {value!r} names the format {fmt!r}, which does not exist here.",
                         hint=f"Formats: {', '.join(formats)}.")
    return fmt, Path(path)


def check_writable(option: str, path: Path) -> None:
    """Raise UsageError unless `path` can be written the way `Destination.write` writes it."""
    where = f"{option} {path}"
    if path.is_dir():
        raise UsageError(f"{where}: is a directory; expected a file path.")
    if path.exists() and not path.is_file():
        if not os.access(path, os.W_OK):
            raise UsageError(f"{where}: cannot be written.")
        return  # a device or FIFO, written in place
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        raise UsageError(f"{where}: the directory {parent} does not exist.", hint="Create it first.")
    if path.exists() and not os.access(path, os.W_OK):
        raise UsageError(f"{where}: the file is not writable.")
    try:  # the only sure test, also for root and for /proc or read-only mounts: create a temp file beside it
        import tempfile  # (here: tempfile and secrets cost more to import than `clirace --help` may spend)

        fd, probe = tempfile.mkstemp(dir=parent, prefix=f".{path.name}.", suffix=".probe")
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise UsageError(f"{where}: cannot write in {parent} ({exc.strerror}).") from None


def _identity(info: os.stat_result | None) -> tuple[int, int, int] | None:
    return None if info is None else (info.st_dev, info.st_ino, stat.S_IFMT(info.st_mode))


def _describe(identity: tuple[int, int, int] | None) -> str:
    return "nothing" if identity is None else _KINDS.get(identity[2], "a special file")


class Destination:
    """A path to be written when the run ends, pinned when it starts (see the module docstring)."""

    def __init__(self, option: str, path: Path):
        self.option, self.path = option, Path(path)
        self.name = self.path.name
        self.parent = self.path.parent if str(self.path.parent) else Path(".")
        self.dir_fd = os.open(self.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)  # the user's own dir
        self.dir_id = _identity(os.fstat(self.dir_fd))
        self.before = self._now()
        followed = _stat(self.path)
        self.in_place = followed is not None and (stat.S_ISCHR(followed.st_mode) or stat.S_ISFIFO(followed.st_mode))
        self.in_place_id = _identity(followed) if self.in_place else None
        summary = os.environ.get("GITHUB_STEP_SUMMARY")
        self.append = bool(summary) and followed is not None and stat.S_ISREG(followed.st_mode) and \
            _same(self.path, Path(summary))  # type: ignore[arg-type]

    def _now(self) -> tuple[int, int, int] | None:
        try:
            return _identity(os.stat(self.name, dir_fd=self.dir_fd, follow_symlinks=False))
        except FileNotFoundError:
            return None

    def _changed(self, why: str) -> PathChanged:
        return PathChanged(f"{self.option} {self.path}: {why}; nothing was written there.",
                           hint="Something changed the path while clirace ran (the tool under test can reach it); "
                                "give a path outside the tool's reach, e.g. in a fresh directory.")

    def _same_as_before(self) -> None:
        if _identity(_stat(self.parent)) != self.dir_id:
            raise self._changed(f"its directory {self.parent} was replaced or moved during the run")
        now = self._now()
        if now != self.before and not (self.before is None and now is None):
            raise self._changed(f"it was {_describe(self.before)} when the run started and is {_describe(now)} now")

    def write(self, text: str) -> None:
        data = text.encode()
        if self.in_place:
            self._write_in_place(data)
        elif self.append:
            self._same_as_before()
            fd = os.open(self.name, os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                         dir_fd=self.dir_fd)
            try:
                if _identity(os.fstat(fd)) != self.before:
                    raise self._changed("it was replaced during the run")
                _write_all(fd, (b"\n" if os.fstat(fd).st_size else b"") + data)
            finally:
                os.close(fd)
        else:
            self._replace(data)

    def _write_in_place(self, data: bytes) -> None:
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
        except OSError as exc:
            if exc.errno == errno.ENXIO:
                raise UsageError(f"{self.option} {self.path}: a named pipe with no reader.") from None
            raise UsageError(f"{self.option} {self.path}: cannot be written ({exc.strerror}).") from None
        try:
            if _identity(os.fstat(fd)) != self.in_place_id:
                raise self._changed("it is not the device or pipe it was when the run started")
            fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
            _write_all(fd, data)
        finally:
            os.close(fd)

    def _replace(self, data: bytes) -> None:
        self._same_as_before()
        temp = f".{self.name}.{os.urandom(4).hex()}.tmp"
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600,
                     dir_fd=self.dir_fd)
        try:
            try:
                _write_all(fd, data)
                os.fchmod(fd, self._mode())
            finally:
                os.close(fd)
            self._same_as_before()
            if self.before is None:
                self._link_new(temp)  # never replaces what appeared meanwhile
            else:
                os.rename(temp, self.name, src_dir_fd=self.dir_fd, dst_dir_fd=self.dir_fd)
        except BaseException:
            try:
                os.unlink(temp, dir_fd=self.dir_fd)
            except OSError:
                pass
            raise

    def _link_new(self, temp: str) -> None:
        """Put the temp file at the path only if nothing stands there (link(2) never replaces)."""
        try:
            os.link(temp, self.name, src_dir_fd=self.dir_fd, dst_dir_fd=self.dir_fd, follow_symlinks=False)
        except FileExistsError:
            raise self._changed(f"{_describe(self._now())} appeared there during the run") from None
        except OSError as exc:
            if exc.errno not in (errno.EPERM, errno.EOPNOTSUPP, errno.ENOSYS):
                raise
            self._same_as_before()  # a file system without hard links: rename, after one more look
            os.rename(temp, self.name, src_dir_fd=self.dir_fd, dst_dir_fd=self.dir_fd)
            return
        os.unlink(temp, dir_fd=self.dir_fd)

    def _mode(self) -> int:
        if self.before is not None and stat.S_ISREG(self.before[2]):
            return stat.S_IMODE(os.stat(self.name, dir_fd=self.dir_fd, follow_symlinks=False).st_mode)
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask

    def close(self) -> None:
        fd, self.dir_fd = self.dir_fd, -1  # before the close: a close interrupted after it is not repeated
        if fd >= 0:
            os.close(fd)


def _stat(path: Path) -> os.stat_result | None:
    try:
        return os.stat(path)
    except OSError:
        return None


def _same(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


class Pinned:
    """Every destination of a run, checked writable and pinned before it starts; close() when done."""

    def __init__(self, outputs: Outputs, spec_paths: tuple[str, ...] = ()):
        self.outputs = outputs
        self.several = len(spec_paths) > 1
        self.by_path: dict[tuple[str, Path], Destination] = {}
        try:
            for option, path in _pairs(outputs, spec_paths):
                self.by_path[(option, path)] = Destination(option, path)
        except OSError as exc:
            self.close()
            raise UsageError(f"cannot open the directory of a report path: {exc}.") from None

    def destination(self, option: str, path: Path) -> Destination:
        if (option, path) not in self.by_path:  # not given before the run (a caller that did not pin)
            self.by_path[(option, path)] = Destination(option, path)
        return self.by_path[(option, path)]

    def close(self) -> None:
        for destination in self.by_path.values():
            destination.close()

    def __enter__(self) -> Pinned:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def check_all(outputs: Outputs, spec_paths: tuple[str, ...] = ()) -> Pinned:
    """Check every destination (exit 2 at once for a bad one) and pin it for the end of the run. With several
    specs, --history is a directory that gets one history per spec."""
    if len(spec_paths) > 1 and outputs.history is not None and not outputs.history.is_dir():
        raise UsageError(f"--history {outputs.history}: with several specs, give a directory (one history per "
                         "spec).")
    seen: dict[Path, str] = {}
    for option, path in _pairs(outputs, spec_paths):
        check_writable(option, path)
        key = path.resolve()
        if key in seen:
            raise UsageError(f"{option} {path}: the same file is also given to {seen[key]}.")
        seen[key] = option
    return Pinned(outputs, spec_paths)


def _pairs(outputs: Outputs, spec_paths: tuple[str, ...]) -> list[tuple[str, Path]]:
    if len(spec_paths) <= 1 or outputs.history is None:
        return outputs.paths()
    histories = [("--history", _history_file(outputs.history, spec)) for spec in spec_paths]
    return [(o, p) for o, p in outputs.paths() if o != "--history"] + histories


def history_path(outputs: Outputs, spec_path: str, several: bool) -> Path | None:
    """Where a spec's history goes: --history itself, or with several specs a file per spec in that directory."""
    if outputs.history is None or not several:
        return outputs.history
    return _history_file(outputs.history, spec_path)


def _history_file(directory: Path, spec_path: str) -> Path:
    from clirace.report._locate import display_path
    stem = display_path(str(spec_path)).replace(os.sep, "_").lstrip("._") or "spec"
    return directory / f"{stem}.history.json"


def emit(items: Item | list[Item], outputs: Outputs, pinned: Pinned | None = None) -> None:
    """Write one result (or a list: one per spec) everywhere it goes. A path that fails is named in the
    UsageError raised once every other destination is written (exit 2)."""
    from clirace.report import render_all, renderer

    items = items if isinstance(items, list) else [items]
    own = pinned is None
    pinned = pinned or check_all(outputs, tuple(getattr(item, "spec_path", "") for item in items))
    failed: list[str] = []

    def write(option: str, path: Path, text: str) -> None:
        try:
            pinned.destination(option, path).write(text)
        except UsageError as exc:
            failed.append(exc.paragraph())
        except OSError as exc:
            failed.append(f"{option} {path}: cannot be written ({exc.strerror or exc}).")

    try:
        for item in items:
            history = getattr(item, "history", None)
            where = history_path(outputs, getattr(item, "spec_path", ""), pinned.several)
            if history is not None and where is not None:
                write("--history", where, _history_text(history))
        for fmt, path in outputs.reports:
            write("--report", path, _terminated(renderer(fmt)(items)))
        if outputs.output:
            write("-o", outputs.output, _terminated(renderer(outputs.format)(items)))
        elif outputs.format == "text":  # a spec that could not be checked was said on stderr already
            from clirace.report.text import console
            render_all([item for item in items if hasattr(item, "score")], console(color=outputs.color), items)
        else:
            sys.stdout.write(_terminated(renderer(outputs.format)(items)))
            sys.stdout.flush()
    finally:
        if own:
            pinned.close()
    if failed:
        raise PathChanged(" ".join(failed))


def _terminated(text: str) -> str:
    return text if text.endswith("\n") else text + "\n"


def _history_text(history: History) -> str:
    """The history as History.save writes it (made in memory: no temporary folder outside the run's folders,
    which an interrupt at this moment would leave behind)."""
    return history.text()
