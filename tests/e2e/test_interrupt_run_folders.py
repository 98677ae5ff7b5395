"""A Ctrl-C or SIGTERM while the run's folders are being made or removed still leaves nothing in TMPDIR, in
`clirace check` and in `clirace init --probe`'s observation runs.

A helper's sweep of real SIGTERMs at every step found two places where one left the run folder, its private
folder and its record on disk (until the next run's start-up sweep): inside make_workdir, before the run's
clean-up was set up, and inside end_run, which it cut in two. Both steps now hold the interrupt until they have
ended, then act on it.

Each case runs a real `clirace check` whose named step in run/cleanup.py is followed by a real signal (raised by
signal.raise_signal, handled by clirace's own handler) before the step returns.
"""
from __future__ import annotations

import signal
import subprocess
import sys

import pytest

from clirace.run import observe

from ..conftest import FIXTURES, ROOT

BOOT = r"""
import signal, sys
from clirace.cli import run
from clirace.run import cleanup

where, number = sys.argv[1], int(sys.argv[2])
sys.argv = ["clirace", *sys.argv[3:]]
real = getattr(cleanup, where)

def then_signalled(*args, **kwargs):
    result = real(*args, **kwargs)
    sys.stderr.write(f"signal {number} inside {where}\n")
    sys.stderr.flush()
    signal.raise_signal(number)
    return result

setattr(cleanup, where, then_signalled)
run()
"""

EXIT = {signal.SIGTERM: 143, signal.SIGINT: 130}
# make_workdir once its folders and record are made (before the run is registered for the exit's clean-up), and
# the first of end_run's removals
STEPS = ["_record", "_remove_private"]


@pytest.mark.e2e
@pytest.mark.timeout(60)
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
@pytest.mark.parametrize("where", STEPS)
def test_a_signal_while_the_run_folders_are_made_or_removed_leaves_none(where, sig, no_leftovers):
    _signalled_leaves_none(where, sig, no_leftovers, "check", str(FIXTURES / "level3" / "clirace.yaml"), "--rounds", "1",
                           "--parallel", "2", "--seed", "7", "--only=counter", "--format", "json")


@pytest.mark.e2e
@pytest.mark.timeout(60)
@pytest.mark.skipif(not observe.available()[0], reason="init --probe runs the command under strace")
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
@pytest.mark.parametrize("where", STEPS)
def test_a_signal_while_an_init_probe_run_folders_are_made_or_removed_leaves_none(where, sig, tmp_path, no_leftovers):
    tool = f"{sys.executable} {FIXTURES / 'level3' / 'tool.py'}"
    _signalled_leaves_none(where, sig, no_leftovers, "init", str(tmp_path / "probed.clirace.yaml"), "--tool", tool,
                           "--probe", f"{tool} counter incr", "--read", f"{tool} counter get")


def _signalled_leaves_none(where, sig, no_leftovers, *args):
    """clirace ARGS, signalled `sig` inside cleanup's `where`: it exits by that signal's status, with no traceback,
    and leaves nothing in its TMPDIR."""
    proc = subprocess.run([sys.executable, "-c", BOOT, where, str(int(sig)), *args],
                          capture_output=True, text=True, env=no_leftovers.env(), cwd=ROOT, timeout=55)
    assert f"signal {int(sig)} inside {where}" in proc.stderr, proc.stderr[-2000:]
    assert proc.returncode == EXIT[sig], (proc.returncode, proc.stderr[-2000:])
    assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr, proc.stderr[-2000:]
    left = sorted(str(path.relative_to(no_leftovers.tmpdir)) for path in no_leftovers.tmpdir.rglob("*"))
    assert left == [], f"left in TMPDIR: {left[:20]}"
