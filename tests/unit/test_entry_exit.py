"""The program's entry point, `clirace.cli.run`: it ends the process without the interpreter's teardown (30-50 ms of
every start; docs/benchmarks.md), and must still do what a normal exit does that anything relies on."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def entry(prelude: str, *args: str) -> subprocess.CompletedProcess[str]:
    """`clirace ARGS` through run(), in a fresh interpreter, after `prelude` has set something up."""
    code = f"import sys\n{prelude}\nsys.argv = ['clirace', *sys.argv[1:]]\nfrom clirace.cli import run\nrun()\n"
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=60, cwd=ROOT)


@pytest.mark.timeout(60)
def test_atexit_handlers_run_and_the_output_is_all_written():
    proc = entry("import atexit\natexit.register(lambda: print('handler ran', flush=True))", "--help")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("Usage: clirace")
    assert proc.stdout.endswith("handler ran\n")


@pytest.mark.timeout(60)
@pytest.mark.parametrize("args, status", [(("checks",), 0), (("check", "no-such-spec.yaml"), 2), (("--bogus",), 2)])
def test_the_exit_status_is_mains(args, status):
    proc = entry("", *args)
    assert proc.returncode == status, proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.timeout(60)
def test_a_thread_the_normal_exit_would_wait_for_is_waited_for():
    # The thread starts its last step only once main() has returned, and that step outlasts the few milliseconds
    # run() takes to exit; an exit that did not wait would end the process before it prints.
    prelude = """
import threading, time
import clirace.cli
main_returned = threading.Event()
_main = clirace.cli.main
def main():
    try:
        _main()
    finally:
        main_returned.set()
clirace.cli.main = main
def last_step():
    main_returned.wait()
    time.sleep(0.5)
    print("thread finished", flush=True)
threading.Thread(target=last_step).start()
"""
    proc = entry(prelude, "--help")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.endswith("thread finished\n"), proc.stdout[-200:]


# A command whose clean-up fails on the way out of a real signal (main's own SIGTERM handler, Python's for SIGINT): a
# descriptor closed twice raises OSError EBADF, which hides the interrupt from every `except KeyboardInterrupt`.
CLEAN_UP_FAILS = """
import os, signal
import clirace.cli
def app(standalone_mode):
    fd = os.open(os.devnull, os.O_RDONLY)
    os.close(fd)
    try:
        signal.raise_signal(signal.{sig})
    finally:
        os.close(fd)  # closed already
clirace.cli.app = app
"""


@pytest.mark.timeout(60)
@pytest.mark.parametrize("sig, status, words", [("SIGTERM", 143, "clirace: terminated.\n"),
                                                ("SIGINT", 130, "clirace: interrupted.\n")])
def test_an_interrupt_whose_clean_up_fails_still_exits_as_the_interrupt(sig, status, words):
    proc = entry(CLEAN_UP_FAILS.format(sig=sig), "checks")
    assert proc.returncode == status, proc.stderr
    assert proc.stderr == words  # as for the interrupt alone: no "internal error", no traceback
