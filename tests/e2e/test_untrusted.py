"""Untrusted output with real processes: a deep-JSON lock answer gets a verdict, never clirace's exit 3; strace's
own messages never read as the target's output."""
import json
import os
import stat

import pytest

from clirace.run import observe
from clirace.run.launch import Launcher

from ..conftest import FIXTURES, run_clirace


@pytest.mark.e2e
@pytest.mark.timeout(60)
def test_a_target_printing_30000_nested_objects_as_its_lock_error_gets_a_verdict_not_exit_3():
    proc = run_clirace("check", FIXTURES / "adversarial" / "deep-json-error" / "clirace.yaml", "--seed", "1",
                       "--only", "lock-excludes", "--only", "lock-error-structured", "--format", "json")
    assert proc.returncode in (0, 1), proc.stderr
    assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr
    checks = json.loads(proc.stdout)["checks"]
    assert checks["lock-excludes"]["status"] == "pass", checks["lock-excludes"]
    structured = checks["lock-error-structured"]
    # 150,000 characters, of which the history keeps 64 KiB: no error in them, and the rest is unknown
    assert structured["status"] == "unknown" and "more than the 64 KiB" in structured["summary"], structured


@pytest.mark.e2e
@pytest.mark.timeout(30)
@pytest.mark.skipif(not observe.available()[0], reason="needs strace")
def test_strace_warnings_go_to_their_own_log_not_to_the_targets_stderr(tmp_path):
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "f").write_text("x")
    # A relative -P path that exists makes strace warn ("Requested path ... resolved into ...") on its stderr.
    wrap = [observe.strace_path(), "-f", "-qq", "-P", "d/f", "-e", "trace=openat", "-o", str(tmp_path / "trace"), "--"]
    inv = Launcher(dict(os.environ), str(tmp_path), {}, 10.0).run("t", ["sh", "-c", "echo out; echo err >&2"], wrap=wrap)
    assert (inv.exit_code, inv.stdout, inv.stderr) == (0, "out\n", "err\n"), inv
    assert "Requested path" in inv.wrapper_said, inv.wrapper_said


@pytest.mark.e2e
@pytest.mark.timeout(30)
@pytest.mark.skipif(not observe.available()[0], reason="needs strace")
@pytest.mark.parametrize("planted", ["link", "fifo"])
def test_a_link_or_fifo_planted_where_strace_logs_its_own_messages_is_neither_followed_nor_opened(tmp_path, planted):
    # Where strace's own messages went until round three: "<its -o>-strace.log", a name a target could predict.
    canary = tmp_path / "canary"
    canary.write_text("CANARY restore\n")
    place = tmp_path / "trace-strace.log"
    if planted == "link":
        place.symlink_to(canary)
    else:
        os.mkfifo(place)
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "f").write_text("x")
    wrap = [observe.strace_path(), "-f", "-qq", "-P", "d/f", "-e", "trace=openat", "-o", str(tmp_path / "trace"), "--"]
    inv = Launcher(dict(os.environ), str(tmp_path), {}, 10.0).run("t", ["sh", "-c", "echo out"], wrap=wrap)
    assert (inv.exit_code, inv.stdout, inv.timed_out) == (0, "out\n", False), inv
    assert "CANARY" not in inv.wrapper_said and "Requested path" in inv.wrapper_said, inv.wrapper_said
    assert canary.read_text() == "CANARY restore\n"
    assert place.is_symlink() if planted == "link" else stat.S_ISFIFO(place.lstat().st_mode)
