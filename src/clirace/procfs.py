"""Everything clirace reads from /proc, in one place: which processes exist, their state, group, parent,
environment, open files and where they sleep. Each reader returns an empty value once the process is gone."""
from __future__ import annotations

import os
import stat
from collections.abc import Iterator


def pids() -> Iterator[int]:
    """Every process on the machine but this one."""
    me = os.getpid()
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != me:
            yield int(entry)


def stat_fields(pid: int) -> list[str]:
    """The fields of /proc/PID/stat after "pid (comm)": state, ppid, pgrp, session, ...; [] once it is gone.
    (comm may hold spaces and parentheses, hence the split at the last ")".)"""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            return handle.read().rsplit(b")", 1)[1].decode(errors="replace").split()
    except (OSError, IndexError):
        return []


def environ(pid: int) -> bytes:
    try:
        with open(f"/proc/{pid}/environ", "rb") as handle:
            return handle.read()
    except OSError:
        return b""


def wchan(pid: int) -> str:
    """The kernel function the process sleeps in ("pipe_read", ...); "" or "0" where hidden or running."""
    try:
        with open(f"/proc/{pid}/wchan") as handle:
            return handle.read().strip()
    except OSError:
        return ""


def group(pgid: int) -> list[int]:
    """Processes whose process group is `pgid` (each invocation leads its own group)."""
    return [pid for pid in pids() if stat_fields(pid)[2:3] == [str(pgid)]]


def children_of(ppid: int) -> list[int]:
    return [pid for pid in pids() if stat_fields(pid)[1:2] == [str(ppid)]]


def fd_links(pid: int) -> set[str]:
    """What the process's open fds point at ("/path", "socket:[123]", "pipe:[45]"); empty once it is gone."""
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return set()
    links = set()
    for fd in fds:
        try:
            links.add(os.readlink(f"/proc/{pid}/fd/{fd}"))
        except OSError:
            continue
    return links


def has_open_fifo(pid: int, fifo_id: tuple[int, int]) -> bool:
    """Whether `pid` has the named pipe (st_dev, st_ino) open."""
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return False
    for fd in fds:
        try:
            st = os.stat(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if (st.st_dev, st.st_ino) == fifo_id and stat.S_ISFIFO(st.st_mode):
            return True
    return False


def open_files(pid: int) -> list[str]:
    """The files and directories `pid` has open, by path (pipes, sockets, devices and /proc left out)."""
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return []
    out = []
    for fd in sorted(fds, key=int):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("/") and not target.startswith(("/dev/", "/proc/")):
            out.append(target)
    return out
