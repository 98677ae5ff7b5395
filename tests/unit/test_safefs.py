"""safefs: nothing a target plants in its sandbox (links, FIFOs, devices, hard links) makes clirace read, write,
create or remove anything outside it. Each test snapshots a canary directory outside the sandbox and checks
it is unchanged afterwards."""
from __future__ import annotations

import hashlib
import os
import stat
import threading
from pathlib import Path

import pytest

from clirace.run import _ending, safefs
from clirace.run.safefs import Refused, Special

pytestmark = pytest.mark.timeout(10)


@pytest.fixture
def box(tmp_path):
    root = tmp_path / "sandbox"
    (root / "home" / ".config" / "tool").mkdir(parents=True)
    (root / "home" / ".config" / "tool" / "config.json").write_text('{"a": 1}')
    return root


@pytest.fixture
def canary(tmp_path):
    outside = tmp_path / "canary"
    outside.mkdir()
    (outside / "state.json").write_text('{"user": "data"}')
    os.chmod(outside / "state.json", 0o600)
    (outside / "sub").mkdir()
    before = snapshot(outside)
    yield outside
    assert snapshot(outside) == before, "something outside the sandbox changed"


def snapshot(directory: Path) -> dict:
    out = {}
    for path in sorted(directory.rglob("*")):
        info = path.lstat()
        digest = hashlib.sha256(path.read_bytes()).hexdigest() if stat.S_ISREG(info.st_mode) else None
        out[str(path.relative_to(directory))] = (stat.S_IFMT(info.st_mode), stat.S_IMODE(info.st_mode), info.st_ino,
                                                 info.st_size, info.st_nlink, digest)
    return out


def plant(box: Path, rel: str, target) -> None:
    link = box / rel
    link.parent.mkdir(parents=True, exist_ok=True)
    if link.is_symlink() or link.exists():
        link.unlink()
    link.symlink_to(target)


CONFIG = "home/.config/tool/config.json"


# --------------------------------------------------------------------------------------------- reading

def test_read_regular_and_capped(box):
    assert safefs.read_capped(box, CONFIG, 100) == b'{"a": 1}'
    assert safefs.read_capped(box, CONFIG, 3) == b'{"a"'  # limit + 1 bytes: "larger than the limit"
    assert safefs.read_capped(box, "home/.config/tool/missing.json", 100) is None
    assert safefs.read_capped(box, f"{CONFIG}/below", 100) is None  # through a file: not there


@pytest.mark.parametrize("where", ["file", "parent", "grandparent"])
def test_read_never_follows_a_link(box, canary, where):
    if where == "file":
        plant(box, CONFIG, canary / "state.json")
        special = "home/.config/tool/config.json"
    elif where == "parent":
        (box / CONFIG).unlink()
        (box / "home/.config/tool").rmdir()
        plant(box, "home/.config/tool", canary)
        special = "home/.config/tool"
    else:
        plant(box, "home/.config2", canary)
        special = "home/.config2"
        assert safefs.read_capped(box, "home/.config2/state.json", 100) == Special(special, "a symbolic link")
        return
    assert safefs.read_capped(box, CONFIG, 100) == Special(special, "a symbolic link")


def test_read_a_dangling_link_is_special(box):
    plant(box, CONFIG, "/nonexistent/clirace/x")
    assert safefs.read_capped(box, CONFIG, 100) == Special(CONFIG, "a symbolic link")


def test_read_dev_zero_link_returns_at_once(box):
    plant(box, CONFIG, "/dev/zero")
    assert safefs.read_capped(box, CONFIG, 1 << 30) == Special(CONFIG, "a symbolic link")


def test_read_a_fifo_does_not_block(box):
    (box / CONFIG).unlink()
    os.mkfifo(box / CONFIG)
    assert safefs.read_capped(box, CONFIG, 100) == Special(CONFIG, "a named pipe (FIFO)")


def test_read_a_directory_or_socket(box, tmp_path):
    (box / "home/dir").mkdir()
    assert safefs.read_capped(box, "home/dir", 100) == Special("home/dir", "a directory")
    import socket
    path = box / "home/sock"
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(path))
        assert safefs.read_capped(box, "home/sock", 100) == Special("home/sock", "a socket")


def test_paths_must_stay_relative(box):
    for rel in ("/etc/passwd", "../x", "home/../../x"):
        with pytest.raises(ValueError):
            safefs.read_capped(box, rel, 10)
    assert safefs.within(box, box / "home" / "x") == "home/x"
    with pytest.raises(ValueError):
        safefs.within(box, box.parent / "other")


# --------------------------------------------------------------------------------------------- writing

def test_write_new_refuses_anything_there(box, canary):
    safefs.write_new(box, "io/input-1", b"data", parents=True)
    assert (box / "io/input-1").read_bytes() == b"data"
    plant(box, "io/input-2", canary / "new-file")  # dangling: O_CREAT through it would create an outside file
    with pytest.raises(FileExistsError):
        safefs.write_new(box, "io/input-2", b"data")
    plant(box, "io/input-3", canary / "state.json")
    with pytest.raises(FileExistsError):
        safefs.write_new(box, "io/input-3", b"data")


def test_write_through_a_linked_directory_is_refused(box, canary):
    plant(box, "io", canary)
    with pytest.raises(Refused) as caught:
        safefs.write_new(box, "io/input-1", b"data")
    assert caught.value.special == Special("io", "a symbolic link")
    with pytest.raises(Refused):
        safefs.mkdirs(box, "io/trace")
    with pytest.raises(Refused):
        safefs.replace_atomically(box, "io/hold.release", b"")


def test_replace_atomically_replaces_a_link_never_its_target(box, canary):
    plant(box, CONFIG, canary / "state.json")
    safefs.replace_atomically(box, CONFIG, b'{"restored": true}', mode=0o640)
    info = (box / CONFIG).lstat()
    assert stat.S_ISREG(info.st_mode) and stat.S_IMODE(info.st_mode) == 0o640
    assert (box / CONFIG).read_bytes() == b'{"restored": true}'
    assert sorted(p.name for p in (box / CONFIG).parent.iterdir()) == ["config.json"]  # no temp file left


def test_restore_temp_name_cannot_be_planted(box, canary):
    # The old restore path was a fixed name ({fifo}.clirace-restore): a link planted there was written through.
    plant(box, CONFIG + ".clirace-restore", canary / "state.json")
    safefs.replace_atomically(box, CONFIG, b"new")
    assert (box / CONFIG).read_bytes() == b"new"


def test_hard_link_is_not_written_into(box, canary):
    os.link(canary / "state.json", box / "home/state.json")
    with pytest.raises(Refused) as caught:
        safefs.open_at(box, "home/state.json", os.O_RDWR)
    assert "hard link" in caught.value.special.kind
    os.unlink(box / "home/state.json")  # the canary's link count back to 1


def test_open_at_lock_file(box, canary):
    fd = safefs.open_at(box, "home/.local/state/tool/lock", os.O_CREAT | os.O_RDWR, parents=True)
    os.close(fd)
    plant(box, "home/.local/state/tool/lock", canary / "state.json")
    with pytest.raises(Refused):
        safefs.open_at(box, "home/.local/state/tool/lock", os.O_CREAT | os.O_RDWR)
    plant(box, "home/.local/state/tool/lock", "/dev/zero")
    with pytest.raises(Refused):
        safefs.open_at(box, "home/.local/state/tool/lock", os.O_CREAT | os.O_RDWR)


def test_mkdirs(box, canary):
    safefs.mkdirs(box, "trace/a/b")
    assert (box / "trace/a/b").is_dir()
    safefs.mkdirs(box, "trace/a/b")  # exists: fine
    (box / "trace/file").write_text("x")
    with pytest.raises(NotADirectoryError):
        safefs.mkdirs(box, "trace/file/c")
    plant(box, "trace/link", canary / "sub")
    with pytest.raises(Refused):
        safefs.mkdirs(box, "trace/link/c")


# ------------------------------------------------------------------------------------------ FIFO, unlink

def test_park_cycle(box, canary):
    """Make the FIFO where the state file was, feed a reader more than a pipe holds, put the file back."""
    content = safefs.read_capped(box, CONFIG, 1 << 20)
    fifo_id = safefs.mkfifo_at(box, CONFIG, replace=True)
    assert stat.S_ISFIFO((box / CONFIG).lstat().st_mode)
    with pytest.raises(OSError):  # no reader yet: ENXIO, never a block
        safefs.open_fifo_writer(box, CONFIG, fifo_id)
    got = []
    reader = threading.Thread(target=lambda: got.append((box / CONFIG).read_bytes()))
    reader.start()
    big = b"x" * 200_000
    while True:
        try:
            fd = safefs.open_fifo_writer(box, CONFIG, fifo_id)
            break
        except OSError:
            pass
    safefs.write_all(fd, big, timeout=5)
    os.close(fd)
    reader.join(5)
    assert got == [big]  # whole, not the first 64 KiB
    safefs.replace_atomically(box, CONFIG, content)
    assert (box / CONFIG).read_bytes() == content


def test_fifo_writer_refuses_a_replaced_fifo(box, canary):
    fifo_id = safefs.mkfifo_at(box, CONFIG, replace=True)
    plant(box, CONFIG, canary / "state.json")
    with pytest.raises(Refused):
        safefs.open_fifo_writer(box, CONFIG, fifo_id)
    (box / CONFIG).unlink()
    (box / CONFIG).write_text("a regular file now")
    with pytest.raises(Refused):
        safefs.open_fifo_writer(box, CONFIG, fifo_id)


def test_mkfifo_through_a_linked_directory_is_refused(box, canary):
    (box / CONFIG).unlink()
    (box / "home/.config/tool").rmdir()
    plant(box, "home/.config/tool", canary)
    with pytest.raises(Refused):
        safefs.mkfifo_at(box, "home/.config/tool/state.json", replace=True)


def test_unlink_removes_the_link_only(box, canary):
    plant(box, "home/link", canary / "state.json")
    safefs.unlink_at(box, "home/link")
    assert not (box / "home/link").is_symlink()
    safefs.unlink_at(box, "home/link")  # missing: fine
    with pytest.raises(FileNotFoundError):
        safefs.unlink_at(box, "home/link", missing_ok=False)
    plant(box, "home/dirlink", canary)
    with pytest.raises(Refused):
        safefs.unlink_at(box, "home/dirlink/state.json")


def test_kind(box, canary):
    plant(box, "home/link", canary)
    assert safefs.kind(box, "home/link") == "a symbolic link"
    assert safefs.kind(box, "home/link/state.json") == "behind home/link is a symbolic link"
    assert safefs.kind(box, CONFIG) == "a regular file"
    assert safefs.kind(box, "nope") == "missing"


# ------------------------------------------------------------------------------- directories clirace holds

def test_a_held_sandbox_swapped_for_a_link_redirects_nothing(tmp_path, canary):
    run = safefs.make_dir(tmp_path, "clirace-1-")
    box = safefs.make_dir(run, "counter-")
    assert safefs.replaced(box) is None
    os.rename(box, f"{box}.moved")
    os.symlink(canary, box)  # the target's swap: its sandbox renamed away, a link in its place
    assert safefs.replaced(box) == f"{box} is now a symbolic link to {canary}"
    safefs.write_new(box, "io/input-1", b"data", parents=True)  # through the fd: into the folder clirace made
    assert Path(f"{box}.moved/io/input-1").read_bytes() == b"data"
    assert safefs.remove(box) == []  # wherever it went
    assert not Path(f"{box}.moved").exists()
    assert safefs.remove(run) == []  # the link in it is removed, never followed
    assert not run.exists() and not os.path.lexists(run)


def test_a_held_run_folder_swapped_for_a_link_redirects_nothing(tmp_path, canary):
    run = safefs.make_dir(tmp_path, "clirace-1-")
    os.rename(run, f"{run}.moved")
    os.symlink(canary, run)
    box = safefs.make_dir(run, "counter-")  # made through the fd on the run folder: in the moved one
    assert box.parent == run and Path(f"{run}.moved/{box.name}").is_dir()
    assert safefs.replaced(run) == f"{run} is now a symbolic link to {canary}"
    assert safefs.replaced(box).startswith(f"{box} is gone")  # its path now leads into the canary
    safefs.mkdirs(box, "home/.config")
    assert safefs.remove(box) == [] and safefs.remove(run) == []
    assert sorted(os.listdir(tmp_path)) == ["canary", run.name] and os.path.islink(run)  # the target's link stays


def test_an_unheld_root_that_is_a_link_is_refused(box, canary, tmp_path):
    os.symlink(canary, tmp_path / "swapped")
    assert safefs.read_capped(tmp_path / "swapped", "state.json", 100) == Special(str(tmp_path / "swapped"),
                                                                                  "a symbolic link")


def test_remove_names_what_it_cannot_remove_and_never_enters_a_link(tmp_path, canary):
    run = safefs.make_dir(tmp_path, "clirace-1-")
    (run / "home").mkdir()
    (run / "home" / "outside").symlink_to(canary)
    (run / "home" / "deep").mkdir()
    (run / "home" / "deep" / "file").write_text("x")
    os.chmod(run / "home" / "deep", 0o500)  # entries cannot be removed (as long as we are not root)
    try:
        failures = safefs.remove(run)
        if os.geteuid() == 0:
            assert failures == [] and not run.exists()
        else:
            assert failures == [f"{run}/home/deep/file: Permission denied"]
            assert (run / "home" / "deep" / "file").exists() and not (run / "home" / "outside").exists()
    finally:
        if run.exists():
            os.chmod(run / "home" / "deep", 0o700)
            safefs.remove(run)


def test_remove_does_not_descend_past_its_depth_limit(tmp_path, monkeypatch):
    monkeypatch.setattr(_ending, "MAX_DEPTH", 3)
    run = safefs.make_dir(tmp_path, "clirace-1-")
    (run / "a" / "b" / "c" / "d").mkdir(parents=True)
    assert safefs.remove(run) == [f"{run}/a/b/c/d: directories nested more than 3 deep"]
    monkeypatch.setattr(_ending, "MAX_DEPTH", 200)
    assert safefs.remove(run) == [] and not run.exists()


def _late_writer(monkeypatch, run, times: int) -> list[str]:
    """os.rmdir that, the first `times` times it is asked to remove `run`, first makes a file in it: a process
    killed in the middle of a syscall that creates one finishes that syscall after the tree was listed."""
    real, made = os.rmdir, []

    def rmdir(name, *, dir_fd=None):
        if name == run.name and len(made) < times:
            made.append(str(run / f"late-{len(made)}"))
            (run / f"late-{len(made)}").write_text("x")
        return real(name, dir_fd=dir_fd)
    monkeypatch.setattr(os, "rmdir", rmdir)
    return made


def test_remove_clears_again_what_was_written_into_the_tree_as_it_was_removed(tmp_path, monkeypatch):
    run = safefs.make_dir(tmp_path, "clirace-1-")
    (run / "state.json").write_text("{}")
    made = _late_writer(monkeypatch, run, times=2)
    assert safefs.remove(run) == [] and not run.exists()
    assert len(made) == 2  # it did meet "Directory not empty", twice


def test_remove_gives_up_on_a_tree_written_into_without_end_and_says_so(tmp_path, monkeypatch):
    run = safefs.make_dir(tmp_path, "clirace-1-")
    _late_writer(monkeypatch, run, times=1000)
    assert safefs.remove(run) == [f"{run}: Directory not empty"]
    monkeypatch.undo()
    assert safefs.remove(run) == [] and not run.exists()
