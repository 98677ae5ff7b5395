"""Reading strace lines: which file each call touched, also after the process changed its directory."""
from clirace.observe import parse_line

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
