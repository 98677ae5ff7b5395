"""A SIGTERM acted on just after clirace closes a descriptor closes nothing twice.

Python acts on a signal between two bytecodes, and most often right after a call into C returns: after an
os.close() that the signal arrived during. Code that closes a number and only then forgets it (`os.close(fd)`, then
`fd = child` or `self._fd = None`) left it remembered; the clean-up on the way out of the interrupt closed it again:
EBADF (a fresh-clone CI run's "atomic config: sampling the config-SIGTERM" failure), or, had another thread opened a
descriptor meanwhile and been given that number, that thread's pipe or file closed under it.

Each case of the first test runs a real `clirace check` whose os.close is wrapped: once the run reaches the step, the
close made by the named function (in the main thread, which a signal reaches) is followed by a real SIGTERM, sent by
signal.raise_signal and handled by clirace's own handler, at the very point a signal lands; any close that finds
its descriptor already closed (EBADF) is reported on stderr. The two after it: a sampler thread an interrupt left
reading through a closed descriptor, and subprocess's own window of the same kind.
"""
from __future__ import annotations

import subprocess
import sys

import pytest

from ..conftest import FIXTURES, ROOT

BOOT = r"""
import errno, os, signal, sys, threading
from clirace.cli import run
from clirace.scenarios._box import Context

words, where, under = sys.argv[1:4]
sys.argv = ["clirace", *sys.argv[4:]]
armed, fired = [False], [False]
real_close, real_say = os.close, Context.say

def say(self, text):
    armed[0] = armed[0] or words in text
    real_say(self, text)

def within(frame, name):
    while frame is not None:
        if frame.f_code.co_name == name:
            return True
        frame = frame.f_back
    return False

def close(fd):
    caller = sys._getframe(1)
    try:
        real_close(fd)
    except OSError as exc:
        if exc.errno == errno.EBADF:
            os.write(2, f"CLOSED TWICE: fd {fd}, again by {caller.f_code.co_qualname}\n".encode())
        raise
    if (armed[0] and not fired[0] and caller.f_code.co_qualname == where
            and threading.current_thread() is threading.main_thread() and (not under or within(caller, under))):
        fired[0] = True
        os.write(2, f"SIGTERM just after {where} closed fd {fd}\n".encode())
        signal.raise_signal(signal.SIGTERM)

Context.say = say
os.close = close
run()
"""

LEVEL3 = FIXTURES / "level3" / "clirace.yaml"
TAKE_FLOCK = FIXTURES / "tasks-sqlite" / "clirace.yaml"
# (spec, the check run, the progress step that arms the injection, the function whose close it follows, a function
# that must be below it on the stack, or "")
CASES = {
    # a trial's sandbox being made, each folder walked to from the sandbox's fd (the CI failure)
    "sandbox walk": (LEVEL3, "atomic-config-writes", "atomic config: sampling", "_parent", "mkdirs"),
    # the parked holder's pipe, closed once written (the holder let go), then again as the holder ends
    "parked holder's pipe, let go": (LEVEL3, "lock-excludes", "lock: contender while the lock is held",
                                     "ParkHold._let_go", ""),
    # the same pipe, closed as a signalled holder is put back, then again by the holder's own close
    "parked holder's pipe, signalled": (LEVEL3, "lock-released-on-exit", "lock: release after sigterm",
                                        "ParkHold._restore", ""),
    # the terminal of a holder sent Ctrl-C, closed as its invocation finishes, then again as the holder ends it
    "holder's terminal": (LEVEL3, "lock-released-on-exit", "lock: release after sigint", "Running.finish", ""),
    # clirace's own flock, dropped, then dropped again by the holder's own close
    "flock taken by clirace": (TAKE_FLOCK, "lock-excludes", "lock: contender while the lock is held",
                               "TakeHold._restore", ""),
}


def booted(boot: str, boot_args: list[str], spec, check: str, scope, tmp_path) -> tuple[int, str]:
    """A real one-round `clirace check SPEC --only CHECK`, started through `boot` (given `boot_args` first): its
    exit status and its stderr."""
    proc = subprocess.run([sys.executable, "-c", boot, *boot_args, "check", str(spec), "--rounds", "1", "--parallel",
                           "2", "--seed", "7", f"--only={check}", "--format", "json",
                           "--history", str(tmp_path / "history.json")],
                          capture_output=True, env=scope.env(), cwd=ROOT, timeout=100)
    return proc.returncode, proc.stderr.decode(errors="replace")


@pytest.mark.e2e
@pytest.mark.timeout(120)
@pytest.mark.parametrize("case", list(CASES))
def test_a_sigterm_just_after_a_close_closes_nothing_twice(case, no_leftovers, tmp_path):
    spec, check, words, where, under = CASES[case]
    returncode, stderr = booted(BOOT, [words, where, under], spec, check, no_leftovers, tmp_path)
    assert f"SIGTERM just after {where} closed" in stderr, f"the step was never reached: {stderr[-2000:]}"
    assert "CLOSED TWICE" not in stderr, stderr[-2000:]
    assert returncode == 143, (returncode, stderr[-2000:])
    assert "Traceback" not in stderr, stderr[-2000:]


# The config's sampler started, and a SIGTERM acted on right after (as it may be inside Thread.start, which waits for
# the thread to run): a sampler left running reads on through the sandbox's fd, which the trial's end closes (and
# its number goes to whatever is opened next), then spins for the rest of the run.
SAMPLER_STARTED = r"""
import atexit, os, signal, sys, threading
from clirace.cli import run
from clirace.scenarios import atomic

real_start = atomic._Sampler.start
def start(self):
    real_start(self)
    os.write(2, b"SIGTERM just after the sampler started\n")
    signal.raise_signal(signal.SIGTERM)
atomic._Sampler.start = start

def still_sampling():
    if any(isinstance(t, atomic._Sampler) and t.is_alive() for t in threading.enumerate()):
        os.write(2, b"STILL SAMPLING at the exit\n")
atexit.register(still_sampling)
sys.argv = ["clirace", *sys.argv[1:]]
run()
"""


@pytest.mark.e2e
@pytest.mark.timeout(120)
def test_a_sigterm_just_after_the_sampler_started_stops_the_sampler(no_leftovers, tmp_path):
    returncode, stderr = booted(SAMPLER_STARTED, [], LEVEL3, "atomic-config-writes", no_leftovers, tmp_path)
    assert "SIGTERM just after the sampler started" in stderr, stderr[-2000:]
    assert "STILL SAMPLING" not in stderr, stderr[-2000:]
    assert returncode == 143, (returncode, stderr[-2000:])
    assert "Traceback" not in stderr, stderr[-2000:]


# subprocess.Popen's own window: it closes the child's ends of the pipes it made (and its /dev/null) through an
# ExitStack (_close_pipe_fds) and notes that it did only afterwards; a SIGTERM acted on in between had its clean-up
# close them again ("CLOSED TWICE: fd 11, again by Popen.__init__" with the injection above). A start gives it
# nothing of its own making to close: every close it makes for one is counted.
POPEN_CLOSES = r"""
import atexit, os, sys
from clirace.cli import run

real_close, counted = os.close, [0]
def close(fd):
    frame, names = sys._getframe(1), set()
    while frame is not None:
        names.add(frame.f_code.co_name)
        frame = frame.f_back
    counted[0] += "_popen" in names and "_close_pipe_fds" in names
    real_close(fd)
os.close = close
atexit.register(lambda: os.write(2, f"subprocess closed {counted[0]} descriptors of the starts\n".encode()))
sys.argv = ["clirace", *sys.argv[1:]]
run()
"""


@pytest.mark.e2e
@pytest.mark.timeout(120)
def test_subprocess_is_given_no_descriptor_of_its_own_making_to_close(no_leftovers, tmp_path):
    returncode, stderr = booted(POPEN_CLOSES, [], LEVEL3, "claim", no_leftovers, tmp_path)
    assert returncode in (0, 1), (returncode, stderr[-2000:])  # (1: --only leaves the score below 3)
    assert "subprocess closed 0 descriptors of the starts" in stderr, stderr[-2000:]
