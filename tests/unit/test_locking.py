"""run/locking.py on literal traces: which calls take a lock, which files are lock files and which are state, and
that every reader of traces (observation lines, hazards, the rendezvous's aim, the stopper, the side-by-side
rule) answers as it does."""
import dataclasses

import pytest

from clirace.checks import _observed, hazards
from clirace.history import ConfigSnapshot, CounterRound, KeysRound
from clirace.history.vocab import ConfigFormat
from clirace.run import locking, observe, stopper
from clirace.run.observe import parse_line
from clirace.scenarios.aim import aim

from .histories import history, inv

SB = "/sb"


def ops(*lines, pid=100):
    return tuple(parse_line(line, SB, pid) for line in lines)


def round_of(*traces, kind=CounterRound):
    """A traced round: one trace per invocation (inc-0, inc-1, ...), every invocation exiting 0."""
    labels = [f"inc-{n}" for n in range(len(traces))]
    return kind(workload="w", amplified=True, sandbox=SB, invocations=tuple(inv(label) for label in labels),
                traces={label: trace for label, trace in zip(labels, traces, strict=False)})


def excl(path, ret="3"):
    shown = f"= {ret}<{path}>" if not ret.startswith("-") else f"= {ret}"
    return f'openat(AT_FDCWD</sb>, "{path}", O_WRONLY|O_CREAT|O_EXCL|O_CLOEXEC, 0600) {shown}'


# A tool that locks its config's own fd, then reads and rewrites it in place (lockf, then truncate and write).
LOCKS_ITS_CONFIG = (
    'openat(AT_FDCWD</sb>, "/sb/home/c.json", O_RDWR|O_CREAT|O_CLOEXEC, 0644) = 3</sb/home/c.json>',
    'fcntl(3</sb/home/c.json>, F_SETLKW, {l_type=F_WRLCK, l_whence=SEEK_SET, l_start=0, l_len=0}) = 0',
    'ftruncate(3</sb/home/c.json>, 0) = 0',
    'write(3</sb/home/c.json>, "{}", 2) = 2',
    'close(3</sb/home/c.json>) = 0',
)
# level3's shape: a lock file locked with flock, a holder record written into it, the state replaced by rename.
LOCK_FILE_WITH_RECORD = (
    'openat(AT_FDCWD</sb>, "/sb/state/lock", O_RDWR|O_CREAT|O_CLOEXEC, 0644) = 3</sb/state/lock>',
    'flock(3</sb/state/lock>, LOCK_EX|LOCK_NB) = 0',
    'ftruncate(3</sb/state/lock>, 0) = 0',
    'pwrite64(3</sb/state/lock>, "{\\"pid\\": 1}", 10, 0) = 10',
    'openat(AT_FDCWD</sb>, "/sb/state/counter", O_RDONLY|O_CLOEXEC) = 4</sb/state/counter>',
    'close(4</sb/state/counter>) = 0',
    excl("/sb/state/.counter.{temp}", "5"),
    'write(5</sb/state/.counter.{temp}>, "2\\n", 2) = 2',
    'rename("/sb/state/.counter.{temp}", "/sb/state/counter") = 0',
    'ftruncate(3</sb/state/lock>, 0) = 0',
    'close(3</sb/state/lock>) = 0',
)


def with_record(temp="k3j9x_2a"):
    """LOCK_FILE_WITH_RECORD with its own mkstemp name (every invocation has one)."""
    return ops(*(line.replace("{temp}", temp) for line in LOCK_FILE_WITH_RECORD))


# kubectl's shape: the config read and closed, THEN an O_EXCL lock file, then the config rewritten in place.
READ_THEN_LOCK = (
    'openat(AT_FDCWD</sb>, "/sb/home/.kube/config", O_RDONLY|O_CLOEXEC) = 3</sb/home/.kube/config>',
    'close(3</sb/home/.kube/config>) = 0',
    excl("/sb/home/.kube/config.lock"),
    'openat(AT_FDCWD</sb>, "/sb/home/.kube/config", O_WRONLY|O_CREAT|O_TRUNC|O_CLOEXEC, 0600) = 4</sb/home/.kube/config>',
    'write(4</sb/home/.kube/config>, "{}", 2) = 2',
    'unlink("/sb/home/.kube/config.lock") = 0',
)
REFUSED = (READ_THEN_LOCK[0], READ_THEN_LOCK[1], excl("/sb/home/.kube/config.lock", "-1 EEXIST (File exists)"))


@pytest.mark.parametrize("line, asks, takes", [
    ("flock(3</s/l>, LOCK_EX|LOCK_NB) = 0", True, True),
    ("flock(3</s/l>, LOCK_EX|LOCK_NB) = -1 EAGAIN (Resource temporarily unavailable)", True, False),
    ("flock(3</s/l>, LOCK_UN) = 0", False, False),
    ("fcntl(3</s/l>, F_SETLKW, {l_type=F_WRLCK, l_whence=SEEK_SET, l_start=0, l_len=0}) = 0", True, True),
    ("fcntl(3</s/l>, F_OFD_SETLK, {l_type=F_RDLCK, l_whence=SEEK_SET, l_start=0, l_len=0}) = 0", True, True),
    ("fcntl(3</s/l>, F_SETLK, {l_type=F_UNLCK, l_whence=SEEK_SET, l_start=0, l_len=0}) = 0", False, False),
    ("fcntl(3</s/l>, F_GETLK, {l_type=F_UNLCK, l_whence=SEEK_SET, l_start=0, l_len=0}) = 0", False, False),
    ("fcntl(3</s/l>, F_GETFL) = 0x8002 (flags O_RDWR|O_LARGEFILE)", False, False),
    (excl("/s/l"), True, True),
    (excl("/s/l", "-1 EEXIST (File exists)"), True, False),  # a failed exclusive create took nothing
    ('openat(AT_FDCWD</s>, "/s/l", O_RDWR|O_CREAT, 0644) = 3</s/l>', False, False),
    ('link("/s/l.1234", "/s/l.lock") = 0', True, True),  # shadow-utils, liblockfile: the link is the lock
    ('linkat(AT_FDCWD</s>, "l.1234", AT_FDCWD</s>, "l.lock", AT_SYMLINK_FOLLOW) = 0', True, True),
    ('linkat(AT_FDCWD</s>, "l.1234", AT_FDCWD</s>, "l.lock", 0) = -1 EEXIST (File exists)', True, False),
])
def test_which_calls_ask_for_and_take_a_lock(line, asks, takes):
    op = parse_line(line, SB)
    assert (locking.asks(op), locking.takes(op)) == (asks, takes)
    assert op.lock is (asks and op.call in ("flock", "fcntl", "link", "linkat"))  # the field a trace records says the same


def test_a_temp_file_made_with_o_excl_is_no_lock():
    mkstemp = ops(excl("/sb/home/.c.json.k3j9x_2a"), 'rename("/sb/home/.c.json.k3j9x_2a", "/sb/home/c.json") = 0')
    reading = locking.read([mkstemp])
    assert reading.lock_files == frozenset() and reading.temps == {"/sb/home/.c.json.k3j9x_2a"}
    assert not any(reading.attempt(op) for op in mkstemp)
    left = ops(excl("/sb/tmp/tmpab12cd"))  # a temp file left behind is not a lock left behind either
    assert locking.read([left]).lock_files == frozenset()


def test_temp_files_with_no_digit_in_their_random_tail_are_no_locks_when_their_siblings_show_the_pattern():
    """About 8% of Python's tempfile names have no digit in their 8 random letters: alone, such a name reads like
    a word (.lockfile), but one stem with a different tail per invocation is mkstemp's, not one lock's."""
    def made_and_removed(path):
        return ops(excl(path), f'unlink("{path}") = 0')
    reading = locking.read([made_and_removed("/sb/home/.c.json.kqjxabcd"), made_and_removed("/sb/home/.c.json.wyzzpq_e")])
    assert reading.lock_files == frozenset()
    assert reading.temps == {"/sb/home/.c.json.kqjxabcd", "/sb/home/.c.json.wyzzpq_e"}
    lock = made_and_removed("/sb/home/c.json.lockfile")  # one name, whoever makes it: a lock file
    assert locking.read([lock, lock]).lock_files == {"/sb/home/c.json.lockfile"}
    assert locking.read([lock]).lock_files == {"/sb/home/c.json.lockfile"}


def test_a_failed_exclusive_create_of_a_marker_is_no_lock():
    marker = ops(excl("/sb/cache/.initialised", "-1 EEXIST (File exists)"))
    reading = locking.read([marker, marker])
    assert reading.lock_files == frozenset() and not reading.attempt(marker[0])


def test_contended_exclusive_creates_make_a_lock_file_even_one_renamed_into_place():
    # git's config.lock: created with O_EXCL by every invocation, written, renamed onto the config.
    git = ops(excl("/sb/home/.gitconfig.lock"), 'rename("/sb/home/.gitconfig.lock", "/sb/home/.gitconfig") = 0')
    refused = ops(excl("/sb/home/.gitconfig.lock", "-1 EEXIST (File exists)"))
    reading = locking.read([git, refused])
    assert reading.lock_files == {"/sb/home/.gitconfig.lock"}
    assert reading.attempt(refused[0]) and not reading.held(refused[0])  # refused: tried, took nothing


def test_a_state_file_locked_through_its_own_fd_is_still_state():
    reading = locking.read([ops(*LOCKS_ITS_CONFIG)] * 2)
    assert reading.locked_state == {"/sb/home/c.json"} and reading.lock_files == frozenset()
    trial = round_of(ops(*LOCKS_ITS_CONFIG), ops(*LOCKS_ITS_CONFIG))
    assert locking.state_files(trial.traces, SB, observe.OWN_DIRS, observe.TEMP_DIRS) == {"home/c.json"}


def test_a_state_file_renamed_away_as_a_backup_then_replaced_by_a_rename_is_still_state():
    """rclone's shape: rclone.conf renamed to rclone.conf.old, a temp file written and renamed onto rclone.conf,
    rclone.conf.old removed."""
    def rclone(tail):
        conf, temp = "/sb/home/.config/rclone/rclone.conf", f"/sb/home/.config/rclone/rclone.conf.{tail}"
        return ops(excl(temp), f'write(3<{temp}>, "[r]", 3) = 3', f'rename("{conf}", "{conf}.old") = 0',
                   f'rename("{temp}", "{conf}") = 0', f'unlink("{conf}.old") = 0')
    trial = round_of(rclone("4109872361"), rclone("1928374650"))
    assert locking.state_files(trial.traces, SB, observe.OWN_DIRS, observe.TEMP_DIRS, min_writers=2) == {
        "home/.config/rclone/rclone.conf"}


def test_a_lock_file_with_a_holder_record_in_it_is_a_lock_file():
    reading = locking.read([with_record(), with_record("a8b2k4z0")])
    assert reading.lock_files == {"/sb/state/lock"} and reading.locked_state == frozenset()
    trial = round_of(with_record(), with_record("a8b2k4z0"))
    assert locking.state_files(trial.traces, SB, observe.OWN_DIRS, observe.TEMP_DIRS) == {"state/counter"}


# shadow-utils' shape: a pid file, linked to passwd.lock (the lock), then the state replaced by rename.
LINK_LOCKED = (
    'openat(AT_FDCWD</sb>, "/sb/etc/passwd.{pid}", O_WRONLY|O_CREAT|O_TRUNC, 0600) = 3</sb/etc/passwd.{pid}>',
    'write(3</sb/etc/passwd.{pid}>, "{pid}", 4) = 4',
    'close(3</sb/etc/passwd.{pid}>) = 0',
    'linkat(AT_FDCWD</sb>, "/sb/etc/passwd.{pid}", AT_FDCWD</sb>, "/sb/etc/passwd.lock", 0) = 0',
    'unlink("/sb/etc/passwd.{pid}") = 0',
    'openat(AT_FDCWD</sb>, "/sb/etc/passwd", O_RDONLY|O_CLOEXEC) = 3</sb/etc/passwd>',
    'close(3</sb/etc/passwd>) = 0',
    'openat(AT_FDCWD</sb>, "/sb/etc/passwd+", O_WRONLY|O_CREAT|O_TRUNC, 0644) = 4</sb/etc/passwd+>',
    'write(4</sb/etc/passwd+>, "root", 4) = 4',
    'rename("/sb/etc/passwd+", "/sb/etc/passwd") = 0',
    'unlink("/sb/etc/passwd.lock") = 0',
)


def link_locked(pid="1234", refused=False, read_first=False):
    lines = [line.replace("{pid}", pid) for line in LINK_LOCKED]
    if refused:
        lines = lines[:3] + [lines[3].replace(") = 0", ") = -1 EEXIST (File exists)"), lines[4]]
    if read_first:
        lines = lines[5:7] + lines
    return ops(*lines)


def test_a_lock_file_made_by_link_is_a_lock_file_and_its_pid_file_a_temp():
    reading = locking.read([link_locked("1234"), link_locked("1235"), link_locked("1236", refused=True)])
    assert reading.lock_files == {"/sb/etc/passwd.lock"}
    assert {"/sb/etc/passwd.1234", "/sb/etc/passwd.1236"} <= reading.temps
    refused = link_locked("1236", refused=True)[3]
    assert reading.attempt(refused) and not reading.held(refused)
    trial = round_of(link_locked("1234"), link_locked("1235"))
    assert locking.state_files(trial.traces, SB, observe.OWN_DIRS, observe.TEMP_DIRS) == {"etc/passwd"}


def test_hazards_see_a_link_lock_taken_before_the_read_and_one_taken_after():
    # locked, then read: only shadow's fixed passwd+ (written by every run, under the lock) is said
    assert codes(round_of(link_locked("1234"), link_locked("1235"))) == ["CR703"]
    late = codes(round_of(link_locked("1234", read_first=True), link_locked("1235", read_first=True)))
    assert late == ["CR703", "CR701"]  # read, then linked: not "without any lock call"
    left = [line.replace("{pid}", "1234") for line in LINK_LOCKED[:-1]]  # never unlinked on a normal exit
    assert "CR704" in codes(round_of(ops(*left), ops(*(line.replace("1234", "1235") for line in left))))


def test_the_observation_lines_and_the_stopper_see_a_link_lock():
    lines = _observed.observed_lines(history(round_of(link_locked("1234"), link_locked("1235"))))
    assert "locks with lock file made by linkat(2): {sandbox}/etc/passwd.lock" in lines
    assert not any("passwd.1234" in line for line in lines), lines  # its pid file is no state rewritten in place
    line = LINK_LOCKED[3].replace("{pid}", "1234")
    assert stopper.is_lock_call(line, "link") and not stopper.is_lock_call(line, "exclusive-create")
    outside = ops('link("/tmp/tool.1234", "/tmp/tool.lock") = 0')
    assert observe.shared_paths(outside, SB) == ["/tmp/tool.lock"]


# --- every reader of traces answers as run/locking.py does ------------------------------------------------------

def codes(trial):
    return [f.code for f in hazards.check(history(trial)).findings]


def test_hazards_see_a_locked_state_file_rewritten_in_place_and_no_read_before_its_lock():
    assert codes(round_of(ops(*LOCKS_ITS_CONFIG), ops(*LOCKS_ITS_CONFIG))) == ["CR705"]


def test_hazards_of_a_lock_file_with_a_record_and_of_temp_files():
    # level3's shape: nothing to say (its lock file's truncation is no state rewritten in place; the mkstemp
    # temp file is neither a lock taken nor a lock file left behind).
    assert codes(round_of(with_record(), with_record("a8b2k4z0"))) == []


def test_a_read_before_the_lock_of_the_config_the_spec_names_is_a_hazard_even_with_one_writer():
    # A tool that refuses rather than waits can leave one writer of its config in a round: state by its writers
    # needs two, but the keys workload names the file.
    one_writer = round_of(ops(*READ_THEN_LOCK), ops(*REFUSED), ops(*REFUSED), kind=KeysRound)
    assert codes(one_writer) == []
    named = dataclasses.replace(one_writer, config=ConfigSnapshot("/sb/home/.kube/config", ConfigFormat.JSON, "{key}", "{}"))
    assert codes(named) == ["CR701"]


def test_hazards_of_a_read_before_a_lock_and_of_a_marker():
    assert codes(round_of(ops(*READ_THEN_LOCK), ops(*READ_THEN_LOCK), ops(*REFUSED))) == ["CR701", "CR705"]
    unlocked = ('openat(AT_FDCWD</sb>, "/sb/c", O_RDONLY) = 3</sb/c>', excl("/sb/marker", "-1 EEXIST (File exists)"),
                'openat(AT_FDCWD</sb>, "/sb/c", O_WRONLY|O_TRUNC) = 4</sb/c>')
    assert codes(round_of(ops(*unlocked), ops(*unlocked)))[0] == "CR702"  # the failed marker create is no lock


def test_the_observation_lines_name_only_what_locking_calls_a_lock():
    trial = round_of(with_record(), ops(*READ_THEN_LOCK), ops(*REFUSED),
                     ops(excl("/sb/cache/marker", "-1 EEXIST (File exists)")))
    lines = _observed.observed_lines(history(trial))
    locks = sorted(line for line in lines if line.startswith("locks with"))
    assert locks == ["locks with flock on {sandbox}/state/lock",
                     "locks with lock file created with O_CREAT|O_EXCL: {sandbox}/home/.kube/config.lock"]


def test_the_rendezvous_aims_at_state_locked_in_place_and_traces_the_lock_files():
    met = aim(round_of(ops(*LOCKS_ITS_CONFIG), ops(*LOCKS_ITS_CONFIG), kind=KeysRound))
    assert met is not None and met.paths == ("home/c.json",) and met.ends == "read"  # read under its own lock
    kubectl = aim(round_of(ops(*READ_THEN_LOCK), ops(*READ_THEN_LOCK), ops(*REFUSED), kind=KeysRound))
    assert kubectl.paths == ("home/.kube/config",) and kubectl.locks == ("home/.kube/config.lock",)
    assert (kubectl.ends, kubectl.count) == ("close", 1)


def test_the_stopper_and_the_side_by_side_rule_read_locks_the_same_way():
    assert stopper.LOCK_CALLS is locking.CALLS
    for line in (*LOCKS_ITS_CONFIG, *LOCK_FILE_WITH_RECORD, *READ_THEN_LOCK, *REFUSED):
        line = line.replace("{temp}", "k3j9x_2a")
        op = parse_line(line, SB)
        for kind in locking.CALLS:
            assert stopper.is_lock_call(line, kind) is locking.takes(op, kind), (line, kind)
    outside = ops(excl("/tmp/tool.lock"), excl("/tmp/tmpk3j9x_2a"), 'rename("/tmp/tmpk3j9x_2a", "/tmp/out") = 0',
                  excl("/var/tool/marker", "-1 EEXIST (File exists)"))
    # a temp file written outside the sandbox is shared too, but only the lock file was locked, not the marker
    assert observe.shared_paths(outside, SB) == ["/tmp/out", "/tmp/tmpk3j9x_2a", "/tmp/tool.lock"]


NB_TRY = 'flock(3</sb/lock>, LOCK_EX|LOCK_NB) = -1 EAGAIN (Resource temporarily unavailable)'
EXCL_TRY = 'openat(AT_FDCWD</sb>, "/sb/lock", O_WRONLY|O_CREAT|O_EXCL, 0644) = -1 EEXIST (File exists)'


def test_a_lock_wait_is_seen_in_a_trace_by_its_retries_or_its_blocking_call_never_by_one_look():
    """Issue 25 item 1: the lock-wait contender's trace of lock calls shows whether it waited for the lock."""
    assert locking.waited_in_trace(ops(NB_TRY)) == ""  # one look, then a sleep: no wait
    assert locking.waited_in_trace(ops(NB_TRY, EXCL_TRY)) == ""  # two looks are no loop
    assert "3 tries at /sb/lock refused (flock)" in locking.waited_in_trace(ops(NB_TRY, NB_TRY, NB_TRY))
    assert "3 tries at /sb/lock refused (openat)" in locking.waited_in_trace(ops(EXCL_TRY, EXCL_TRY, EXCL_TRY))
    linked = 'link("/sb/lock.123", "/sb/config.lock") = -1 EEXIST (File exists)'
    assert "tries at /sb/config.lock refused (link)" in locking.waited_in_trace(ops(linked, linked, linked))
    cut = 'fcntl(3</sb/lock>, F_SETLKW, {l_type=F_WRLCK, l_whence=SEEK_SET, l_start=0, l_len=0}) = -1 EINTR ' \
          '(Interrupted system call)'
    assert "blocked in fcntl" in locking.waited_in_trace(ops(cut))
    assert locking.waited_in_trace(ops('flock(3</sb/lock>, LOCK_UN) = 0', 'close(3</sb/lock>) = 0')) == ""
