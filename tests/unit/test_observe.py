"""Reading strace lines: which file each call touched, also after the process changed its directory."""
from clirace.run.observe import parse_line

START = "/sandbox"  # where the invocation started (the launcher's cwd)


def test_relative_paths_are_resolved_against_the_directory_strace_shows_not_the_start():
    moved = parse_line('renameat2(AT_FDCWD</sandbox/home>, "counter.new", AT_FDCWD</sandbox/home>, "counter", '
                       'RENAME_NOREPLACE) = 0', START)
    assert moved.paths == ("/sandbox/home/counter.new", "/sandbox/home/counter") and moved.ok
    opened = parse_line('openat(AT_FDCWD</sandbox/home>, "c.json", O_WRONLY|O_CREAT|O_TRUNC, 0666) = '
                        '3</sandbox/home/c.json>', START)
    assert opened.paths == ("/sandbox/home/c.json",) and opened.writes and "O_TRUNC" in opened.flags


def test_without_a_directory_a_relative_path_is_taken_from_the_start():
    assert parse_line('rename("a.tmp", "a") = 0', START).paths == ("/sandbox/a.tmp", "/sandbox/a")
    failed = parse_line('openat(AT_FDCWD</sandbox>, "nope", O_RDONLY) = -1 ENOENT (No such file or directory)', START)
    assert failed.paths == ("/sandbox/nope",) and not failed.ok
    written = parse_line('write(3</sandbox/home/c.json>, "{\\"k\\": 1}", 8) = 8', START)
    assert written.paths == ("/sandbox/home/c.json",) and written.writes


def test_an_exclusively_created_temp_file_is_not_reported_as_a_lock_file():
    from clirace.checks._observed import mechanisms
    lock = parse_line('openat(AT_FDCWD</r>, "/r/.git/index.lock", O_RDWR|O_CREAT|O_EXCL|O_CLOEXEC, 0666) = '
                      '3</r/.git/index.lock>', START)
    temp = parse_line('openat(AT_FDCWD</r>, "/r/.git/objects/e5/tmp_obj_LOBZSA", O_RDWR|O_CREAT|O_EXCL, 0444) = '
                      '4</r/.git/objects/e5/tmp_obj_LOBZSA>', START)
    assert mechanisms((lock, temp)) == ["lock file created with O_CREAT|O_EXCL: /r/.git/index.lock"]
    template = parse_line('openat(AT_FDCWD</r>, "/r/template.lock", O_WRONLY|O_CREAT|O_EXCL, 0644) = 3</r/template.lock>',
                          START)
    assert mechanisms((template,)) == ["lock file created with O_CREAT|O_EXCL: /r/template.lock"]


def _round(*lines_by_label):
    from clirace.history import KeysRound
    traces = {label: tuple(parse_line(line, START, pid=100 + n) for line in lines)
              for n, (label, lines) in enumerate(lines_by_label)}
    return KeysRound(sandbox=START, amplified=True, traces=traces)


def test_the_rendezvous_stops_at_the_close_only_of_the_fd_the_tool_read_through():
    """kubectl's shape closes its reading fd, then rewrites: stop at that close. jq never closes its reading fd;
    its stdout, a temp file another invocation renamed onto the state, closes under the state's name: that
    close must not pass for the end of its reading (the stop would come after the others had written)."""
    from clirace.run.rendezvous import CLOSE_CALLS
    from clirace.run.stopper import READ_CALLS
    from clirace.scenarios.aim import aim
    kubectl = _round(("set-0", ['openat(AT_FDCWD</sandbox>, "/sandbox/home/c.json", O_RDONLY) = 3</sandbox/home/c.json>',
                                'close(3</sandbox/home/c.json>) = 0',
                                'openat(AT_FDCWD</sandbox>, "/sandbox/home/c.json", O_WRONLY|O_TRUNC) = 3</sandbox/home/c.json>',
                                'write(3</sandbox/home/c.json>, "{}", 2) = 2']))
    assert (aim(kubectl).ends, aim(kubectl).calls, aim(kubectl).count) == ("close", CLOSE_CALLS, 1)
    jq = _round(("set-0", ['openat(AT_FDCWD</sandbox>, "/sandbox/home/s.json", O_RDONLY) = 3</sandbox/home/s.json>',
                           'close(1</sandbox/home/s.json>) = 0']),
                ("set-1", ['openat(AT_FDCWD</sandbox>, "/sandbox/home/s.json", O_RDONLY) = 3</sandbox/home/s.json>',
                           'rename("/sandbox/home/s.json.tmp", "/sandbox/home/s.json") = 0']))
    assert aim(jq).calls == READ_CALLS


def test_a_file_shared_outside_the_sandbox_is_seen_and_pycache_is_not():
    """Where the tool locks and writes decides whether experiments may run side by side, each in its sandbox."""
    from clirace.run.observe import shared_paths
    ops = tuple(parse_line(line, START) for line in (
        'openat(AT_FDCWD</x>, "/repo/__pycache__/m.cpython-311.pyc.140", O_WRONLY|O_CREAT|O_EXCL, 0644) = 3</repo/__pycache__/m.cpython-311.pyc.140>',
        'rename("/repo/__pycache__/m.cpython-311.pyc.140", "/repo/__pycache__/m.cpython-311.pyc") = 0',
        'openat(AT_FDCWD</sandbox>, "/sandbox/home/.local/state/t/lock", O_WRONLY|O_CREAT|O_EXCL, 0644) = 4</sandbox/home/.local/state/t/lock>',
        'flock(5</dev/shm/sem>, LOCK_EX) = 0',
        'write(1<pipe:[1942498]>, "ok\\n", 3) = 3',
    ))
    assert shared_paths(ops, START) == []
    shared = parse_line('openat(AT_FDCWD</x>, "/tmp/tool.lock", O_WRONLY|O_CREAT|O_EXCL, 0644) = 3</tmp/tool.lock>', START)
    written = parse_line('openat(AT_FDCWD</x>, "/var/tmp/t.out", O_WRONLY|O_CREAT|O_TRUNC, 0644) = 4</var/tmp/t.out>', START)
    assert shared_paths((*ops, shared, written), START) == ["/tmp/tool.lock", "/var/tmp/t.out"]
