"""file_events skips the bulk of a trace (an interpreter's read-only opens and closes of its own modules) by one
regular expression instead of parsing it: every line it skips must be one that parsing would have dropped."""
from pathlib import Path

import pytest

from clirace.run import observe

ROOT = "/tmp/clirace-1-ab/box-1"
CWD = ROOT + "/home"
LINES = [
    # dropped: read-only opens and closes elsewhere
    '1.5 openat(AT_FDCWD<' + CWD + '>, "/usr/lib/python3.11/os.py", O_RDONLY|O_CLOEXEC) = 3</usr/lib/python3.11/os.py>',
    '1.6 close(3</usr/lib/python3.11/os.py>) = 0',
    '1.6 close(4<pipe:[123]>)               = 0',
    # kept: under the sandbox, whatever the call
    '2.0 openat(AT_FDCWD<' + CWD + '>, "state.json", O_RDONLY) = 3<' + CWD + '/state.json>',
    '2.1 close(3<' + CWD + '/state.json>) = 0',
    # kept: a write anywhere, named by its flags (even only in a path: parsing reads every O_ word of the args)
    '3.0 openat(AT_FDCWD<' + CWD + '>, "/var/lib/tool/db", O_WRONLY|O_CREAT, 0644) = 3</var/lib/tool/db>',
    '3.1 openat(AT_FDCWD<' + CWD + '>, "/opt/O_CREAT_x", O_RDONLY) = 3</opt/O_CREAT_x>',
    '3.2 open("/var/lib/tool/log", O_RDWR) = 5</var/lib/tool/log>',
    # kept: a failed open of a relative name, resolved under the cwd (in the sandbox)
    '4.0 openat(AT_FDCWD<' + CWD + '>, "missing", O_RDONLY) = -1 ENOENT (No such file or directory)',
    # not skipped by the expression, left to parsing: an escaped name, an empty fd path
    '5.0 openat(AT_FDCWD<' + CWD + '>, "/tmp/clirace-1-ab/box-1/t\\303\\266", O_RDONLY) = 3</tmp/clirace-1-ab/box-1/t\\303\\266>',
    '5.1 openat(AT_FDCWD<' + CWD + '>, "' + ROOT + '/x", O_RDONLY) = 3<>',
    # locks and process calls
    '6.0 flock(3</usr/lib/x.lock>, LOCK_EX) = 0',
    '6.1 execve("/usr/bin/python3", ["python3", "tool.py"], 0x7ffd /* 30 vars */) = 0',
]


def _kept(line: str) -> bool:
    op = observe.parse_line(line, CWD, 1)
    return op is not None and _kept_op(op)


@pytest.mark.parametrize("line", LINES)
def test_a_line_is_skipped_only_where_parsing_would_drop_it(line):
    if observe._elsewhere(line, ROOT + "/"):
        assert not _kept(line)


def test_the_common_lines_are_skipped_and_file_events_keeps_the_same(tmp_path: Path):
    assert [observe._elsewhere(line, ROOT + "/") for line in LINES[:3]] == [True, True, True]
    (tmp_path / "t.1").write_text("\n".join(LINES) + "\n")
    got = observe.file_events(tmp_path / "t", CWD, ROOT)
    expected = [observe.parse_line(line, CWD, 1) for line in LINES]
    assert list(got) == sorted((op for op in expected if op is not None and _kept_op(op)), key=lambda op: op.at)


def _kept_op(op) -> bool:
    return op.writes or op.lock or op.call in observe.PROCESS_CALLS or any(p.startswith(ROOT + "/") for p in op.paths)
