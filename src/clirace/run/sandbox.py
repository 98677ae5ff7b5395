"""A fresh directory per trial that stands in for the user's home, config, cache, state, runtime dir and /tmp.

The target only ever sees these paths, so a run never touches the real home or /tmp; the trial's processes
carry a marker in their environment, and join the trial's cgroup where the machine has one, so that anything
they leave running can be found and ended. clirace's own files for the trial (traces, kill logs) live in a
private folder outside the run folder (see run/cleanup.py), and every folder here is held by an fd (safefs).
`Sandbox.end` ends a trial's processes and removes its folders and cgroup, in the order of run/_ending.py.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

from clirace.run import _ending, cleanup, safefs
from clirace.run._ending import MARKER
from clirace.spec import placeholders

_LAYOUT = placeholders.LAYOUT


class Sandbox:
    """A new sandbox `KIND-XXXX` in the run folder `workdir` (made by make_workdir), made through the fd clirace
    holds on the run folder, with a private folder for clirace's own files and a cgroup of its own where the
    run has one."""

    def __init__(self, workdir: Path, kind: str, spec_dir: Path):
        run = cleanup.run_of(workdir)
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

    def end(self, keep: bool = False) -> list[str]:
        """The trial is over: every process of it still running is ended (its whole cgroup where it has one, and
        every process still carrying its marker, e.g. a child that called setsid) until none is left; then its
        sandbox (wherever the target moved it; with `keep`, --keep, only let go), its private folder and its
        cgroup are removed. Returns what could not be removed, each "PATH: why"."""
        folders = [lambda: safefs.remove(self.private)]
        if not keep:
            folders.insert(0, lambda: safefs.remove(self.root))
        failures = _ending.end(self.marker, cgroup=self.cgroup.path if self.cgroup else "", folders=folders)[1]
        if keep:
            safefs.release(self.root)
        return failures
