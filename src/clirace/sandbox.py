"""A fresh directory per trial that stands in for the user's home, config, cache, state, runtime dir and /tmp.

The target only ever sees these paths, so a run never touches the real home or /tmp; the trial's processes
carry a marker in their environment so that anything they leave running can be found and ended.
"""
from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

from . import _leftovers, placeholders
from ._leftovers import make_workdir, sweep_leftovers  # noqa: F401 - part of this module's interface
from .procfs import pids, stat_fields
from .reap import MARKER, _kill_until_gone, end_marked  # noqa: F401 - part of this module's interface


_LAYOUT = placeholders.LAYOUT


class Sandbox:
    def __init__(self, root: Path, spec_dir: Path):
        self.root = root
        self.spec_dir = spec_dir
        self.marker = f"{os.getpid()}:{root}"
        if Path(root).parent.name.startswith(_leftovers.RUN_PREFIX):
            _leftovers.watch_run(Path(root).parent)  # a run's first sandbox: its leftovers must not outlive a killed clirace
        # clirace's own traces and logs: beside the sandbox, not in it, under a name the target cannot know
        # in advance, so a link it planted in its sandbox never redirects what strace writes.
        self.private = Path(tempfile.mkdtemp(prefix=f".{Path(root).name}-clirace-", dir=Path(root).parent))
        for rel in _LAYOUT.values():
            (root / rel).mkdir(parents=True, exist_ok=True)
        (root / "io").mkdir(exist_ok=True)
        os.chmod(root / _LAYOUT["runtime_dir"], 0o700)

    def path(self, name: str) -> Path:
        return self.root / _LAYOUT[name]

    def values(self) -> dict[str, object]:
        values = {name: self.root / rel for name, rel in _LAYOUT.items()}
        values.update(sandbox=self.root, spec_dir=self.spec_dir, python=sys.executable)
        return values

    def expand(self, template: str, **extra) -> str:
        return placeholders.expand(template, {**self.values(), **extra})

    def environ(self, spec_env: dict[str, str]) -> dict[str, str]:
        env = dict(os.environ)
        for name in ("TMP", "TEMP", "XDG_DATA_HOME", "XDG_CONFIG_DIRS"):
            env.pop(name, None)
        env.update(
            HOME=str(self.path("home")), TMPDIR=str(self.path("tmp")),
            XDG_CONFIG_HOME=str(self.path("config_home")), XDG_CACHE_HOME=str(self.path("cache_home")),
            XDG_STATE_HOME=str(self.path("state_home")), XDG_RUNTIME_DIR=str(self.path("runtime_dir")),
            PYTHONDONTWRITEBYTECODE="1",
        )
        env.update({k: self.expand(v) for k, v in spec_env.items()})
        env[MARKER] = self.marker
        return env

    def end_strays(self) -> list[int]:
        """SIGKILL every process still carrying this sandbox's marker (e.g. a child that called setsid)."""
        return end_marked(self.marker)

    def remove(self) -> None:
        self.end_strays()
        shutil.rmtree(self.root, ignore_errors=True)
        shutil.rmtree(self.private, ignore_errors=True)


def end_run(workdir: Path | str) -> list[int]:
    """SIGKILL whatever any trial of this run (sandboxes under `workdir`) left running, and mark the run over
    (its watchdog stands down; a kept `workdir` is no longer a leftover for `sweep_leftovers`).

    The safety net under every trial's own cleanup: it still works when that cleanup was cut short
    (an exception, Ctrl-C or SIGTERM in the middle of ending the trial's processes).
    """
    killed = end_marked(f"{os.getpid()}:{os.path.join(str(workdir), '')}", prefix=True)
    _leftovers.unwatch(os.path.normpath(str(workdir)))
    return killed


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
