"""A fresh directory per trial that stands in for the user's home, config, cache, state, runtime dir and /tmp.

The target only ever sees these paths, so a run never touches the real home or /tmp; the trial's processes
carry a marker in their environment, and join the trial's cgroup where the machine has one, so that anything
they leave running can be found and ended. clirace's own files for the trial (traces, kill logs) live in a
private folder outside the run folder (see run/cleanup.py), and every folder here is held by an fd (safefs).
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

from clirace.run import cleanup as _leftovers
from clirace.run import safefs
from clirace.run.cleanup import make_workdir as make_workdir  # re-exported: part of this module's interface
from clirace.run.cleanup import sweep_leftovers as sweep_leftovers
from clirace.run.procfs import pids, stat_fields
from clirace.run.reap import MARKER, _kill_until_gone, end_marked
from clirace.spec import placeholders

_LAYOUT = placeholders.LAYOUT


class Sandbox:
    """A new sandbox `KIND-XXXX` in the run folder `workdir` (made by make_workdir), made through the fd clirace
    holds on the run folder, with a private folder for clirace's own files and a cgroup of its own where the
    run has one."""

    def __init__(self, workdir: Path, kind: str, spec_dir: Path):
        run = _leftovers.run_of(workdir)
        if run is None:
            raise ValueError(f"{workdir} is not a run folder made by make_workdir()")
        try:
            self.root = safefs.make_dir(workdir, f"{kind}-")
        except FileNotFoundError:  # the target removed the run folder: somewhere to stand, for a void trial
            self.root = safefs.make_dir(run.private, f"{kind}-")
        self.workdir = Path(workdir)
        self.spec_dir = spec_dir
        self.marker = f"{os.getpid()}:{self.root}"
        # clirace's own traces and logs: outside the run folder the target can list, under a random name.
        self.private = safefs.make_dir(run.private, "")
        self.cgroup = run.cgroup.child(self.root.name) if run.cgroup else None
        for name, rel in _LAYOUT.items():
            safefs.mkdirs(self.root, rel, 0o700 if name == "runtime_dir" else 0o755)
        safefs.mkdirs(self.root, "io")

    def path(self, name: str) -> Path:
        return self.root / _LAYOUT[name]

    def values(self) -> dict[str, object]:
        values: dict[str, object] = {name: self.root / rel for name, rel in _LAYOUT.items()}
        values.update(sandbox=self.root, spec_dir=self.spec_dir, python=sys.executable)
        return values

    def expand(self, template: str, **extra: object) -> str:
        return placeholders.expand(template, {**self.values(), **extra})

    def environ(self, spec_env: dict[str, str]) -> dict[str, str]:
        env = dict(os.environ)
        for name in ("TMP", "TEMP", "XDG_CONFIG_DIRS"):
            env.pop(name, None)
        env.update(
            HOME=str(self.path("home")), TMPDIR=str(self.path("tmp")),
            XDG_CONFIG_HOME=str(self.path("config_home")), XDG_CACHE_HOME=str(self.path("cache_home")),
            XDG_STATE_HOME=str(self.path("state_home")), XDG_DATA_HOME=str(self.path("data_home")),
            XDG_RUNTIME_DIR=str(self.path("runtime_dir")),
            PYTHONDONTWRITEBYTECODE="1",
        )
        env.update({k: self.expand(v) for k, v in spec_env.items()})
        env[MARKER] = self.marker
        return env

    def tampered(self) -> str | None:
        """Why the sandbox's path no longer leads to the folder clirace made (the target moved it, or the run
        folder, away and put something else in its place), or None. What clirace itself reads and writes goes
        through the folders it holds, so the trial is only void: nothing it writes lands anywhere else."""
        for what, path in (("the run folder", self.workdir), ("its sandbox", self.root)):
            why = safefs.replaced(path)
            if why:
                return (f"the target replaced {what}: {why}; clirace stopped the trial (what it writes goes to the "
                        "folder it made, wherever that is now; nothing follows the new path)")
        return None

    def end_strays(self) -> list[int]:
        """SIGKILL every process of this trial still running: its whole cgroup where it has one, and every
        process still carrying this sandbox's marker (e.g. a child that called setsid)."""
        if self.cgroup is not None:
            self.cgroup.kill()
        return end_marked(self.marker)

    def remove(self) -> list[str]:
        """End what is left of the trial, then remove its sandbox (wherever the target moved it), its private
        folder and its cgroup. Returns what could not be removed, each "PATH: why"."""
        self.end_strays()
        failures = safefs.remove(self.root) + safefs.remove(self.private)
        if self.cgroup is not None:
            failures += filter(None, [self.cgroup.remove()])
        return failures

    def let_go(self) -> None:
        """Kept (--keep): stop holding its folders; the private one, clirace's own, is removed all the same."""
        self.end_strays()
        safefs.remove(self.private)
        safefs.release(self.root)
        if self.cgroup is not None:
            self.cgroup.remove()


def end_run(workdir: Path | str, keep: bool = False) -> list[str]:
    """SIGKILL whatever any trial of this run (sandboxes under `workdir`) left running, remove the run's folders
    (the run folder itself unless `keep`) and its cgroup, and mark the run over (its watchdog stands down; a kept
    `workdir` is no longer a leftover for `sweep_leftovers`). Returns what could not be removed.

    The safety net under every trial's own cleanup: it still works when that cleanup was cut short
    (an exception, Ctrl-C or SIGTERM in the middle of ending the trial's processes).
    """
    end_marked(f"{os.getpid()}:{os.path.join(str(workdir), '')}", prefix=True)
    return _leftovers.end(workdir, keep)


PR_SET_CHILD_SUBREAPER = 36  # linux/prctl.h
_adopting = False


def adopt_orphans() -> bool:
    """Make this process the child subreaper of everything it starts, so that a descendant whose parent exits
    is re-parented here rather than to init; True if that worked (Linux 3.4+).

    Why: the marker in the environment finds a daemon that called setsid(), but not one that also cleared its
    environment (`env -i`). Adopted, it is still found, as a child of this process (`end_adopted`).
    Only for a process that clirace owns, the CLI: inside a test runner it would adopt, and end, the orphans of
    everything else that process runs.
    """
    global _adopting
    try:
        import ctypes
        _adopting = ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        _adopting = False
    return _adopting


def end_adopted(within: float = 2.0) -> list[int]:
    """SIGKILL and reap every process this subreaper adopted, and reap those that already ended.

    Call it only where clirace has no child of its own left running or unreaped (a trial's end, the run's
    end): a child of this process is then an adopted orphan, whatever its environment says.
    """
    if not _adopting:
        return []
    me, watchdogs = str(os.getpid()), _leftovers.watchdog_pids()  # the watchdogs are children too, and must live on
    return _kill_until_gone(lambda: [pid for pid in pids() if stat_fields(pid)[1:2] == [me]
                                     and str(pid) not in watchdogs], within, reap=True)
