"""One rule for every file clirace touches inside a sandbox: never follow a link the target could have planted.

The target owns its sandbox: before clirace reads a config, writes an input, makes a FIFO or restores a state
file, the target (its setup, or a daemon it left) may have replaced any component of that path by a symbolic
link to a file outside (the user's own), by a FIFO that blocks a reader forever, or by /dev/zero. So every
path is walked from the sandbox directory's fd, one component at a time, with O_NOFOLLOW (and O_DIRECTORY for
the directories on the way); what is not a directory or regular file where one is expected is reported as a
`Special`, never opened for reading or writing; reads are capped; files are created with O_EXCL and replaced
by rename within the same directory fd, so no write ever lands outside.

Paths are given relative to the sandbox root (`within()` turns an absolute one into that, or refuses it).

The directories clirace makes below its run folder (the run folder, each sandbox, its own private folders) are
*held*: made with `make_dir`, which keeps an fd open on each, so that every later path under one is walked from
that fd, not from its name. A target that renames its sandbox (or the run folder) away and puts a link in its
place redirects nothing clirace writes; `replaced()` says that it happened, and `remove()` removes what clirace
made wherever the target moved it, saying what it could not remove.
"""
from __future__ import annotations

import errno
import os
import secrets
import select
import stat
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from clirace.run import _ending
from clirace.run._waits import ready

_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_PATH = os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC  # a directory to work in by *at() calls only
_KINDS = {stat.S_IFLNK: "a symbolic link", stat.S_IFIFO: "a named pipe (FIFO)", stat.S_IFCHR: "a character device",
          stat.S_IFBLK: "a block device", stat.S_IFSOCK: "a socket", stat.S_IFDIR: "a directory",
          stat.S_IFREG: "a regular file"}


@dataclass(frozen=True)
class Special:
    """What stands where a regular file (or a directory on the way to it) was expected: never followed or read."""
    rel: str  # the path, relative to the sandbox root, of the component that is special
    kind: str  # "a symbolic link", "a named pipe (FIFO)", "a character device", "a directory", ...

    def __str__(self) -> str:
        return f"{self.rel} is {self.kind}"


class Refused(OSError):
    """A write or FIFO was refused because a component of its path is a link or a special file."""

    def __init__(self, special: Special):
        super().__init__(errno.ELOOP if special.kind == "a symbolic link" else errno.EINVAL,
                         f"refused to follow: {special}")
        self.special = special


def within(root: str | Path, path: str | Path) -> str:
    """`path` (absolute, or relative to root) as a path relative to `root`; ValueError if it leaves root."""
    root = os.path.normpath(os.fspath(root))
    full = os.path.normpath(os.path.join(root, os.fspath(path)))
    if full == root:
        return "."
    if not full.startswith(root.rstrip("/") + "/"):
        raise ValueError(f"{path} is outside {root}")
    return os.path.relpath(full, root)


def _parts(rel: str) -> list[str]:
    parts = [p for p in os.fspath(rel).split("/") if p not in ("", ".")]
    if os.fspath(rel).startswith("/") or ".." in parts:
        raise ValueError(f"{rel!r} is not a plain relative path (absolute, or with '..')")
    return parts


def _kind_at(dir_fd: int, name: str) -> str:
    try:
        return _KINDS.get(stat.S_IFMT(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode), "special")
    except OSError:
        return "missing"


@contextmanager
def _parent(root: str | Path, rel: str, create: bool = False, mode: int = 0o755) -> Iterator[tuple[int, str]]:
    """Yields (fd of the directory holding rel's last component, that component), walked without following
    links; raises Refused for a link or special file on the way, FileNotFoundError / NotADirectoryError."""
    parts = _parts(rel)
    if not parts:
        raise ValueError("the sandbox root itself is not a file")
    fd = _open_root(root)
    try:
        for depth, name in enumerate(parts[:-1]):
            try:
                child = os.open(name, _DIR, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    raise
                try:
                    os.mkdir(name, mode, dir_fd=fd)
                except FileExistsError:  # made meanwhile (by the target?): judged by the open below
                    pass
                child = _open_dir(fd, name, parts[:depth + 1])
            except (NotADirectoryError, OSError) as exc:
                if exc.errno not in (errno.ENOTDIR, errno.ELOOP):
                    raise
                kind = _kind_at(fd, name)
                if kind == "a regular file":
                    raise NotADirectoryError(errno.ENOTDIR, "Not a directory", "/".join(parts[:depth + 1])) from None
                raise Refused(Special("/".join(parts[:depth + 1]), kind)) from None
            # `fd` names the child before the parent is closed: a Ctrl-C or SIGTERM raised just after a close
            # (where a signal is most often acted on) must not send the `finally` below to close it again.
            parent, fd = fd, child
            os.close(parent)
        yield fd, parts[-1]
    finally:
        os.close(fd)


def _open_dir(fd: int, name: str, parts: list[str]) -> int:
    try:
        return os.open(name, _DIR, dir_fd=fd)
    except OSError as exc:
        if exc.errno not in (errno.ENOTDIR, errno.ELOOP):
            raise
        raise Refused(Special("/".join(parts), _kind_at(fd, name))) from None


# ---------------------------------------------------------------------------------------------- reading

def read_capped(root: str | Path, rel: str, limit: int) -> bytes | None | Special:
    """The content of the regular file at `rel`, at most `limit` + 1 bytes (more than `limit` means the file is
    larger: too large to judge); None if it does not exist (or a component on the way is a regular file);
    a Special when it, or a directory on the way, is a link, FIFO, device, socket or directory.

    Opened with O_NONBLOCK, so a FIFO planted there is reported, not waited on."""
    try:
        with _parent(root, rel) as (dir_fd, name):
            try:
                fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dir_fd)
            except FileNotFoundError:
                return None
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENXIO, errno.EISDIR):  # ENXIO: a socket
                    return Special(_join(rel), _kind_at(dir_fd, name))
                raise
            try:
                kind = stat.S_IFMT(os.fstat(fd).st_mode)
                if kind != stat.S_IFREG:
                    return Special(_join(rel), _KINDS.get(kind, "special"))
                chunks, size = [], 0
                while size <= limit:
                    chunk = os.read(fd, min(1 << 20, limit + 1 - size))
                    if not chunk:
                        break
                    chunks.append(chunk)
                    size += len(chunk)
                return b"".join(chunks)
            finally:
                os.close(fd)
    except Refused as exc:
        return exc.special
    except (FileNotFoundError, NotADirectoryError):
        return None


def kind(root: str | Path, rel: str) -> str:
    """What is at `rel` ("a regular file", "a symbolic link", ..., "missing"), without following anything."""
    try:
        with _parent(root, rel) as (dir_fd, name):
            return _kind_at(dir_fd, name)
    except Refused as exc:
        return f"behind {exc.special}"
    except (FileNotFoundError, NotADirectoryError):
        return "missing"


def _join(rel: str) -> str:
    return "/".join(_parts(rel))


# ---------------------------------------------------------------------------------------------- writing

def mkdirs(root: str | Path, rel: str, mode: int = 0o755) -> None:
    """Make the directory `rel` and its parents; Refused if any component is a link or not a directory."""
    with _parent(root, f"{_join(rel)}/.placeholder", create=True, mode=mode):
        pass


def open_at(root: str | Path, rel: str, flags: int, mode: int = 0o644, *, parents: bool = False) -> int:
    """os.open of `rel` with O_NOFOLLOW added (a link there is Refused); for a lock file clirace takes, or a
    log it hands to strace by fd. The parents are made with `parents`."""
    with _parent(root, rel, create=parents) as (dir_fd, name):
        try:
            fd = os.open(name, flags | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, mode, dir_fd=dir_fd)
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENXIO):
                raise Refused(Special(_join(rel), _kind_at(dir_fd, name))) from None
            raise
        info = os.fstat(fd)
        kind = stat.S_IFMT(info.st_mode)
        if kind != stat.S_IFREG:
            os.close(fd)
            raise Refused(Special(_join(rel), _KINDS.get(kind, "special")))
        if info.st_nlink > 1 and flags & (os.O_WRONLY | os.O_RDWR):
            # A hard link the target made to a file of the user's (same owner, same filesystem): writing through
            # it would change that file. Renaming over it (replace_atomically) is safe; writing into it is not.
            os.close(fd)
            raise Refused(Special(_join(rel), f"a hard link shared with {info.st_nlink - 1} other name(s)"))
        os.set_blocking(fd, True)
        return fd


def open_dir(root: str | Path, rel: str) -> int:
    """An fd on the directory `rel`, walked without following links; Refused for a link or special file there."""
    with _parent(root, f"{_join(rel)}/.placeholder") as (dir_fd, _name):
        return os.open(".", _DIR, dir_fd=dir_fd)


def write_new(root: str | Path, rel: str, data: bytes, mode: int = 0o644, *, parents: bool = False) -> None:
    """Create `rel` holding `data`; FileExistsError if anything (a dangling link included) is there already."""
    fd = open_at(root, rel, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode, parents=parents)
    try:
        _write_all(fd, data)
    finally:
        os.close(fd)


def replace_atomically(root: str | Path, rel: str, data: bytes, mode: int = 0o644, *, parents: bool = False) -> None:
    """Put a regular file holding `data` at `rel`, replacing whatever is there (a link or FIFO is replaced,
    never followed): written to a fresh O_EXCL temp name in the same directory, then renamed over `rel`."""
    with _parent(root, rel, create=parents) as (dir_fd, name):
        for _ in range(100):
            temp = f".{name[:200]}.clirace-{secrets.token_hex(6)}"
            try:
                fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode,
                             dir_fd=dir_fd)
                break
            except FileExistsError:
                continue
        else:
            raise FileExistsError(errno.EEXIST, "no free temporary name", _join(rel))
        try:
            try:
                _write_all(fd, data)
                os.fchmod(fd, mode)  # the umask does not decide a restored file's mode
            finally:
                os.close(fd)
            os.rename(temp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        except BaseException:
            try:
                os.unlink(temp, dir_fd=dir_fd)
            except OSError:
                pass
            raise


def mkfifo_at(root: str | Path, rel: str, mode: int = 0o600, *, replace: bool = False) -> tuple[int, int]:
    """Make a FIFO at `rel` (with `replace`, after removing what is there: a link is removed, not followed);
    returns its (st_dev, st_ino), by which the caller later knows it is still its own FIFO."""
    with _parent(root, rel) as (dir_fd, name):
        if replace:
            _unlink(dir_fd, name, rel)
        os.mkfifo(name, mode, dir_fd=dir_fd)
        info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        return info.st_dev, info.st_ino


def identity(root: str | Path, rel: str) -> tuple[int, int, int] | None:
    """(st_dev, st_ino, st_mode) of what is at `rel` itself (a link is not followed), or None."""
    try:
        with _parent(root, rel) as (dir_fd, name):
            info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
            return info.st_dev, info.st_ino, info.st_mode
    except (Refused, FileNotFoundError, NotADirectoryError):
        return None


def open_fifo_writer(root: str | Path, rel: str, fifo_id: tuple[int, int]) -> int:
    """Open the FIFO at `rel` for writing without blocking (OSError ENXIO while no reader has it open),
    after checking that it is still the FIFO `fifo_id` that clirace made (Refused otherwise)."""
    with _parent(root, rel) as (dir_fd, name):
        try:
            fd = os.open(name, os.O_WRONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise Refused(Special(_join(rel), "a symbolic link")) from None
            raise
        info = os.fstat(fd)
        if not stat.S_ISFIFO(info.st_mode) or (info.st_dev, info.st_ino) != tuple(fifo_id):
            os.close(fd)
            raise Refused(Special(_join(rel), _KINDS.get(stat.S_IFMT(info.st_mode), "special") + " (replaced)"))
        return fd


def unlink_at(root: str | Path, rel: str, missing_ok: bool = True) -> None:
    """Remove the file or link at `rel` (never what a link points to); a directory there raises IsADirectoryError."""
    try:
        with _parent(root, rel) as (dir_fd, name):
            _unlink(dir_fd, name, rel, missing_ok)
    except (FileNotFoundError, NotADirectoryError):
        if not missing_ok:
            raise


def _unlink(dir_fd: int, name: str, rel: str, missing_ok: bool = True) -> None:
    try:
        os.unlink(name, dir_fd=dir_fd)
    except FileNotFoundError:
        if not missing_ok:
            raise


def write_all(fd: int, data: bytes, timeout: float | None = None) -> None:
    """Write all of `data` to `fd`, also a non-blocking one: a FIFO takes 64 KiB at a time, and one unchecked
    os.write of a larger state file leaves its reader with a truncated one. TimeoutError when the reader has
    taken nothing for `timeout` seconds (it stopped reading)."""
    view = memoryview(data)
    while view:
        try:
            view = view[os.write(fd, view):]
        except BlockingIOError:
            if not ready(fd, timeout, select.POLLOUT):
                raise TimeoutError(f"the reader took nothing for {timeout:g} s; {len(view):,} bytes unwritten") from None


_write_all = write_all


# ------------------------------------------------------------------------------- directories clirace holds

_held: dict[str, int] = {}  # a directory clirace made (its path when made) -> an fd clirace keeps open on it
_holding = threading.Lock()


def _key(path: str | Path) -> str:
    return os.path.normpath(os.fspath(path))


def _open_root(root: str | Path) -> int:
    """A new fd on the directory `root`: through the fd clirace holds on it, or on its parent, when it holds one;
    else by its path, its last component not followed (a sandbox root swapped for a link is refused)."""
    key = _key(root)
    held = _held.get(key)
    if held is not None:
        return os.open(".", _DIR, dir_fd=held)  # a new open file: listings in two threads never share an offset
    parent, name = os.path.split(key)
    held = _held.get(parent)
    if held is not None and name:
        return _open_dir(held, name, [name])
    try:
        return os.open(key, _DIR)
    except OSError as exc:
        if exc.errno not in (errno.ENOTDIR, errno.ELOOP):
            raise
        try:
            kind = _KINDS.get(stat.S_IFMT(os.lstat(key).st_mode), "special")
        except OSError:
            kind = "missing"
        raise Refused(Special(key, kind)) from None


def make_dir(parent: str | Path, prefix: str, mode: int = 0o700) -> Path:
    """Make a new directory named `prefix` + 16 random hex digits under `parent` (through the fd clirace holds on
    `parent`, when it holds one), hold it, and return its path."""
    held = _held.get(_key(parent))
    # O_PATH: making an entry needs no right to list the folder (clirace's private one is mode 0300)
    opened = (os.open(".", _PATH, dir_fd=held) if held is not None else  # else the user's own folder ($TMPDIR)
              os.open(os.fspath(parent), _PATH & ~os.O_NOFOLLOW))
    with closing_fd(opened) as parent_fd:
        for _ in range(100):
            name = f"{prefix}{secrets.token_hex(8)}"
            try:
                os.mkdir(name, 0o700, dir_fd=parent_fd)
                break
            except FileExistsError:
                continue
        else:
            raise FileExistsError(errno.EEXIST, "no free directory name", os.fspath(parent))
        path = os.path.join(_key(parent), name)
        fd = _open_dir(parent_fd, name, [name])  # (opened before `mode` may take its owner's right to list it)
        os.chmod(fd, mode)  # the umask does not decide it
    with _holding:
        _held[path] = fd
    return Path(path)


def release(path: str | Path) -> None:
    """Stop holding the directory made at `path` (it is kept)."""
    with _holding:
        fd = _held.pop(_key(path), None)
    if fd is not None:
        os.close(fd)


def held_fd(path: str | Path) -> int | None:
    """The fd clirace holds on the directory made at `path`, or None."""
    return _held.get(_key(path))


def replaced(path: str | Path) -> str | None:
    """Why `path` no longer leads to the directory clirace made there (renamed away, a link or another folder put
    in its place, by the target), or None while it does (or clirace does not hold it)."""
    key = _key(path)
    fd = _held.get(key)
    if fd is None:
        return None
    mine = os.fstat(fd)
    try:
        seen = os.lstat(key)
    except OSError as exc:
        return f"{key} is gone ({exc.strerror}): moved or removed"
    if (seen.st_dev, seen.st_ino) == (mine.st_dev, mine.st_ino):
        return None
    if stat.S_ISLNK(seen.st_mode):
        try:
            return f"{key} is now a symbolic link to {os.readlink(key)}"
        except OSError:
            return f"{key} is now a symbolic link"
    return f"{key} is now {_KINDS.get(stat.S_IFMT(seen.st_mode), 'something else')} that clirace did not make"


def remove(path: str | Path) -> list[str]:
    """Remove the held directory made at `path` and everything in it, wherever it is now (found through the held
    fd, not by its name), and stop holding it. Links in it are removed, never followed. Returns what could not be
    removed, each as "PATH: why" (an immutable file, a busy mount point, a tree nested too deep); a directory
    clirace does not hold is removed by its path."""
    key = _key(path)
    with _holding:
        fd = _held.pop(key, None)
    if fd is None:
        try:
            fd = _open_root(key)
        except FileNotFoundError:
            return []
        except OSError as exc:
            return [f"{key}: {exc.strerror or exc}"]
    try:
        return _ending.remove_tree(fd, _ending.where_now(fd) or key)  # a folder the target moved: named where it is
    finally:
        os.close(fd)


@contextmanager
def closing_fd(fd: int) -> Iterator[int]:
    try:
        yield fd
    finally:
        os.close(fd)
