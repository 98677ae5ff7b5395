"""Where atomic-config's kills go, from a literal traced run: numbered as strace will count them, and in the
process that writes, never in a version manager's shim helpers (scenarios/atomic._numbered, no process run)."""
from pathlib import Path

from clirace.observe import parse_line
from clirace.scenarios.atomic import _numbered

SB = "/sb"
CONFIG = Path("/sb/home/.config/t/config.json")
TEMP = "/sb/home/.config/t/.config.json.k3j9x_2a"


def trace(*lines):
    """(pid, line) pairs, in time order (the times strace -ttt would give)."""
    return tuple(parse_line(f"{1000 + n:.6f} {line}", SB, pid) for n, (pid, line) in enumerate(lines))


WRITER = [
    f'openat(AT_FDCWD</sb>, "{TEMP}", O_RDWR|O_CREAT|O_EXCL|O_CLOEXEC, 0600) = 3<{TEMP}>',
    f'write(3<{TEMP}>, "{{}}", 2) = 2',
    f'write(3<{TEMP}>, "\\n", 1) = 1',
    f'rename("{TEMP}", "{CONFIG}") = 0',
]


def test_a_direct_writer_is_numbered_per_thread_and_needs_no_hand_over():
    points = _numbered(trace(*((50, line) for line in WRITER[1:])), CONFIG, SB)
    assert [(p.call, p.when, p.exec_path) for p in points] == [("write", 1, ""), ("write", 2, ""), ("rename", 1, "")]


def test_behind_a_shim_the_writes_are_counted_from_the_interpreters_exec_in_its_process():
    shim = trace(
        (50, 'execve("/sb/tool", ["/sb/tool", "config", "set", "k", "v"], 0x7ffd /* 30 vars */) = 0'),
        (50, 'execve("/sb/bin/python3", ["python3", "/sb/tool", "config", "set", "k", "v"], 0x7ffd /* 30 vars */) = 0'),
        (50, "clone(child_stack=NULL, flags=CLONE_CHILD_CLEARTID|CLONE_CHILD_SETTID|SIGCHLD) = 51"),
        (51, 'write(1<pipe:[77]>, "system\\n", 7) = 7'),  # a helper answering through a pipe
        (51, 'write(1<pipe:[77]>, "3.11\\n", 5) = 5'),
        (50, 'write(2<pipe:[78]>, "shim: using 3.11\\n", 17) = 17'),  # the shim itself, before its exec
        (50, 'execve("/usr/bin/python3.11", ["/usr/bin/python3.11", "/sb/tool", "config", "set", "k", "v"], '
             '0x55 /* 31 vars */) = 0'),
        (50, "clone3({flags=CLONE_VM|CLONE_FS|CLONE_FILES|CLONE_SIGHAND|CLONE_THREAD|CLONE_SYSVSEM, exit_signal=0}"
             ", 88) = 52"),
        *((50, line) for line in WRITER[1:]),
    )
    points = _numbered(shim, CONFIG, SB)
    writes = [p for p in points if p.call == "write"]
    assert [p.when for p in writes] == [1, 2]  # counted from the exec: the shim's own write is not counted
    assert {p.exec_path for p in writes} == {"/usr/bin/python3.11"}
    assert writes[0].exec_argv == ("/usr/bin/python3.11", "{sandbox}/tool", "config", "set", "k", "v")
    rename = next(p for p in points if p.call == "rename")
    assert (rename.when, rename.exec_path) == (1, "")  # nobody else renames: the plain kill counts it right


def test_a_thread_of_the_writer_is_not_another_process():
    threaded = trace(
        (50, 'execve("/usr/bin/node", ["node", "/sb/tool.js"], 0x55 /* 31 vars */) = 0'),
        (50, "clone3({flags=CLONE_VM|CLONE_FS|CLONE_FILES|CLONE_SIGHAND|CLONE_THREAD|CLONE_SYSVSEM, exit_signal=0}"
             ", 88) = 52"),
        (50, 'write(1<pipe:[77]>, "ok\\n", 3) = 3'),
        (52, f'write(3<{CONFIG}>, "{{}}", 2) = 2'),
    )
    (point,) = _numbered(threaded, CONFIG, SB)
    assert (point.when, point.path, point.exec_path) == (1, str(CONFIG), "")  # on its path (-P), in its thread
