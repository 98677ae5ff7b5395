"""A cgroup of its own for each trial's processes, where this machine lets clirace make one (cgroup v2).

Why: a daemon that double-forks, calls setsid() and clears its environment (`env -i`) leaves its trial's process
group and session and sheds the CLIRACE_TRIAL marker; its cgroup it cannot leave without write access to another
cgroup's `cgroup.procs` (root has that). Every process a trial starts joins the trial's cgroup before the target
runs (run/launch.py: the start barrier's shell, or the child before exec); the trial's end kills them all
(`_ending.kill_cgroup`: `cgroup.kill` on Linux 5.14+; before that, each process listed is SIGKILLed until none is
left). The trials' cgroups sit in the run's, so one write ends a whole run: the run's watchdog
does it when clirace is SIGKILLed, the next run's sweep when the watchdog was killed too.

`make()` says why not where clirace cannot make one (no cgroup v2 mounted, this cgroup not delegated to this
user, a container with /sys/fs/cgroup read-only); the marker, the child subreaper and the watchdog are then all
there is (README, Safety).
"""
from __future__ import annotations

import os
import subprocess

from clirace.run import _ending

NAME = "cgroup"  # what history.Environment.isolation says when trials ran in cgroups


def v2_mount() -> str | None:
    """Where the cgroup v2 hierarchy is mounted (/sys/fs/cgroup, or /sys/fs/cgroup/unified beside v1), or None."""
    try:
        with open("/proc/self/mountinfo") as handle:
            for line in handle:
                fields = line.split()
                if " - cgroup2 " in line and len(fields) > 4:
                    return _unescape(fields[4])
    except OSError:
        pass
    return None


def own() -> str | None:
    """This process's cgroup in the v2 hierarchy ("0::PATH" in /proc/self/cgroup), or None."""
    try:
        with open("/proc/self/cgroup") as handle:
            for line in handle:
                if line.startswith("0::"):
                    return line[3:].rstrip("\n")
    except OSError:
        pass
    return None


def _unescape(field: str) -> str:
    return field.replace("\\040", " ").replace("\\011", "\t").replace("\\012", "\n").replace("\\134", "\\")


class Cgroup:
    def __init__(self, path: str):
        self.path = path

    @property
    def procs(self) -> str:
        """The file a process writes "0" to, to join this cgroup."""
        return os.path.join(self.path, "cgroup.procs")

    def child(self, name: str) -> Cgroup | None:
        try:
            os.mkdir(os.path.join(self.path, name))
        except OSError:
            return None
        return Cgroup(os.path.join(self.path, name))


def make(name: str, shell: str) -> tuple[Cgroup | None, str]:
    """A new cgroup `name` below this process's own, into which a process can move itself: (it, "") or (None, why
    not). Tried for real: a shell moves itself in and reads back /proc/self/cgroup."""
    if os.environ.get("CLIRACE_NO_CGROUP"):
        return None, "turned off with CLIRACE_NO_CGROUP"  # (the tests of what runs without one use it)
    mount, mine = v2_mount(), own()
    if mount is None or mine is None:
        return None, "no cgroup v2 hierarchy is mounted"
    parent = os.path.normpath(mount + "/" + mine)
    try:
        os.mkdir(os.path.join(parent, name))
    except OSError as exc:
        return None, f"cannot make a cgroup in {parent} ({exc.strerror or exc}; not delegated to this user?)"
    cgroup = Cgroup(os.path.join(parent, name))
    try:
        probe = subprocess.run([shell, "-c", 'echo 0 >"$0" && cat /proc/self/cgroup', cgroup.procs],
                               capture_output=True, text=True, timeout=10)
        joined = f"0::{os.path.normpath(os.path.join(mine, name))}" in probe.stdout.splitlines()
        why = " ".join(probe.stderr.split())[-200:] or "it did not show in /proc/self/cgroup"
    except (OSError, subprocess.TimeoutExpired) as exc:
        joined, why = False, str(exc)
    if not joined:
        _ending.remove_cgroup(cgroup.path)
        return None, f"a process cannot move itself into a cgroup in {parent} ({why})"
    return cgroup, ""


def leftovers(prefix: str) -> list[Cgroup]:
    """The cgroups beside the ones this process would make (below its own) whose name starts with `prefix`."""
    mount, mine = v2_mount(), own()
    if mount is None or mine is None:
        return []
    parent = os.path.normpath(mount + "/" + mine)
    try:
        return [Cgroup(os.path.join(parent, name)) for name in os.listdir(parent) if name.startswith(prefix)]
    except OSError:
        return []
