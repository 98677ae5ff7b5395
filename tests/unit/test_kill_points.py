"""Where atomic-config's kills go, from a literal traced run: numbered as strace will count them, and in the
process that writes, never in a version manager's shim helpers (scenarios/atomic._numbered, no process run)."""
from pathlib import Path

from clirace.run.observe import parse_line
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
    # On the temp file, counted over the invocation (the helpers' and the shim's writes go to pipes): no hand-over
    assert [(p.when, p.after, p.exec_path) for p in writes] == [(1, True, ""), (2, True, "")]
    rename = next(p for p in points if p.call == "rename")
    assert (rename.when, rename.exec_path) == (1, "")  # nobody else renames: the plain kill counts it right


def test_behind_a_shim_writes_to_the_config_itself_are_counted_from_the_interpreters_exec():
    in_place = [f'write(3<{CONFIG}>, "{{}}", 2) = 2', f'write(3<{CONFIG}>, "\\n", 1) = 1']
    shim = trace(
        (50, 'execve("/sb/tool", ["/sb/tool", "config", "set", "k", "v"], 0x7ffd /* 30 vars */) = 0'),
        (50, "clone(child_stack=NULL, flags=CLONE_CHILD_CLEARTID|CLONE_CHILD_SETTID|SIGCHLD) = 51"),
        (51, f'write(3<{CONFIG}>, "x", 1) = 1'),  # a helper touching the config before the interpreter runs
        (50, 'execve("/usr/bin/python3.11", ["/usr/bin/python3.11", "/sb/tool", "config", "set", "k", "v"], '
             '0x55 /* 31 vars */) = 0'),
        *((50, line) for line in in_place),
    )
    writes = [p for p in _numbered(shim, CONFIG, SB) if p.call == "write"][1:]  # the helper's own write aside
    assert [(p.when, p.after) for p in writes] == [(1, False), (2, False)]
    assert {p.exec_path for p in writes} == {"/usr/bin/python3.11"}
    assert writes[0].exec_argv == ("/usr/bin/python3.11", "{sandbox}/tool", "config", "set", "k", "v")


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


GO_THREAD = "clone3({flags=CLONE_VM|CLONE_FS|CLONE_FILES|CLONE_SIGHAND|CLONE_THREAD|CLONE_SYSVSEM, exit_signal=0}, 88) = {}"


def test_calls_on_a_temp_file_are_numbered_over_every_thread_not_per_thread():
    # Go: the goroutine writing the temp file moves between OS threads; Node: libuv's pool threads write an
    # eventfd between the file's calls. strace's when=N per thread would name a different call in each.
    threaded = trace(
        (50, GO_THREAD.replace("{}", "51")),
        (50, GO_THREAD.replace("{}", "52")),
        (51, 'write(9<anon_inode:[eventfd]>, "\\1\\0\\0\\0\\0\\0\\0\\0", 8) = 8'),
        (51, f'write(7<{TEMP}>, "{{", 1) = 1'),
        (52, 'write(9<anon_inode:[eventfd]>, "\\1\\0\\0\\0\\0\\0\\0\\0", 8) = 8'),
        (52, f'write(7<{TEMP}>, "}}", 1) = 1'),
        (51, f'fsync(7<{TEMP}>) = 0'),
        (52, f'renameat(AT_FDCWD</sb>, "{TEMP}", AT_FDCWD</sb>, "{CONFIG}") = 0'),
    )
    points = _numbered(threaded, CONFIG, SB)
    assert [(p.call, p.when, p.after) for p in points] == [
        ("write", 1, True), ("write", 2, True), ("fsync", 1, True), ("renameat", 1, False)]
    assert points[1].name == "write #2 to a temp file beside config.json, killed just after it"


def test_an_open_of_the_config_with_o_trunc_is_a_kill_point_and_an_open_to_read_it_is_not():
    in_place = trace(
        (50, GO_THREAD.replace("{}", "51")),
        (51, f'openat(AT_FDCWD</sb>, "{CONFIG}", O_RDONLY|O_CLOEXEC) = 3<{CONFIG}>'),
        (50, f'openat(AT_FDCWD</sb>, "{CONFIG}", O_WRONLY|O_CREAT|O_TRUNC|O_CLOEXEC, 0644) = 4<{CONFIG}>'),
        (51, f'write(4<{CONFIG}>, "{{}}", 2) = 2'),
    )
    points = _numbered(in_place, CONFIG, SB)
    assert [(p.call, p.when, p.after, p.path) for p in points] == [
        ("openat", 1, True, str(CONFIG)), ("write", 1, False, str(CONFIG))]


def test_a_daemons_calls_are_counted_in_the_daemon_only_for_the_strace_attached_to_it():
    # The setup started the daemon (pid 70); the traced command (pid 50) reached it over a socket, and the daemon
    # wrote and renamed. The client's own writes (to its socket) are not counted, nor is a hand-over asked for.
    daemon = trace(
        (50, 'write(3<socket:[5]>, "{}", 2) = 2'),
        (70, f'write(7<{TEMP}>, "{{}}", 2) = 2'),
        (70, f'rename("{TEMP}", "{CONFIG}") = 0'),
        (50, f'rename("/sb/home/.config/t/x", "{CONFIG}") = 0'),  # the client renaming too: counted apart
    )
    points = _numbered(daemon, CONFIG, SB, {70: "python3 /sb/daemon.py"})
    assert [(p.call, p.when, p.after, p.daemon) for p in points] == [
        ("write", 1, True, "python3 {sandbox}/daemon.py"), ("rename", 1, False, "python3 {sandbox}/daemon.py"),
        ("rename", 1, False, "")]
    assert points[1].name == "rename #1 onto config.json in the daemon" and not points[1].exec_path
