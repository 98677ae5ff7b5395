"""Waiting on an fd, or for a process to exit, without polling, at any fd number.

poll(), never select(): select refuses an fd above 1023, and a check 256 wide holds more (two pipes an invocation,
its trace files, two proxy sockets a connection against a server: launch.allow_width raises the limit for it).
"""
from __future__ import annotations

import os
import select
import socket


def ready(fd: int | socket.socket, timeout: float | None, events: int = select.POLLIN) -> bool:
    """Whether `fd` is ready for `events` (readable by default; a hang-up or an error counts too) within `timeout`
    seconds (None: however long it takes)."""
    poller = select.poll()
    poller.register(fd, events)
    return bool(poller.poll(None if timeout is None else max(timeout, 0.0) * 1000))


def exit_within(pid: int, timeout: float) -> bool | None:
    """Wait on a pidfd until process `pid` exits or `timeout` seconds pass: whether it exited. None where no pidfd
    could be had (before Linux 5.3, or the process already reaped): the caller finds out another way."""
    try:
        fd = os.pidfd_open(pid)
    except (AttributeError, OSError):
        return None
    try:
        return ready(fd, timeout)
    finally:
        os.close(fd)
