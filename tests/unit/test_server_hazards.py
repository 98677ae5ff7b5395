"""Server hazards and §58 advice, judged on literal histories: what Redis MONITOR and PostgreSQL's statement log
showed of a round (Trial.server_ops), and the structured refusals of §58."""
import json

import pytest

from clirace.checks import lock_structured, s58, server_hazards
from clirace.checks.lockerror import find_error
from clirace.history import ClaimRound, CounterRound, ServerOp, SessionRun
from clirace.run.services._resp import MONITOR_LINE, monitor_words
from clirace.run.services.postgres import _LINE, _records

from .histories import history, inv
from .test_lock_checks import conflict


def redis(client, *words):
    return ServerOp("redis", client, words=words)


def sql(client, text, xact="3/1"):
    return ServerOp("postgres", client, sql=text, xact=xact)


def served_round(*ops, kind=CounterRound):
    return kind(workload="w", invocations=(inv("inc-0"), inv("inc-1")), server_ops=ops)


GET_SET = (redis("c1", "GET", "hits"), redis("c2", "GET", "hits"), redis("c1", "SET", "hits", "1"),
           redis("c2", "SET", "hits", "1"))
SEPARATE = (sql("41", "SELECT id FROM jobs WHERE status = 'pending' LIMIT 1", "3/1"),
            sql("41", "UPDATE jobs SET status = 'claimed' WHERE id = $1", "3/2"))
READ_DELETE = (redis("c1", "LINDEX", "queue", "0"), redis("c1", "LREM", "queue", "1", "a"))
CONFLICT = json.dumps({"error": {"code": "CONCURRENT_MODIFICATION", "retry_after_ms": 100}})


def codes(*ops):
    return [f.code for f in server_hazards.check(history(served_round(*ops))).findings]


def test_get_then_set_is_advised_with_the_monitor_lines():
    verdict = server_hazards.check(history(served_round(*GET_SET)))
    assert verdict.status == "pass"  # advice: the rounds decide the criterion
    assert [f.code for f in verdict.findings] == ["CR710", "CR713"]
    assert "c1 GET hits" in verdict.findings[0].message() and "c1 SET hits 1" in verdict.findings[0].message()


@pytest.mark.parametrize("ops", [
    (redis("c1", "INCR", "hits"), redis("c1", "GET", "hits")),  # atomic
    (redis("c1", "WATCH", "hits"), redis("c1", "GET", "hits"), redis("c1", "MULTI"), redis("c1", "SET", "hits", "2"),
     redis("c1", "EXEC")),  # optimistic
    (redis("lua", "GET", "hits"), redis("lua", "SET", "hits", "2")),  # a script runs alone
    (redis("c1", "GET", "hits"), redis("c1", "SET", "lock", "me", "NX", "PX", "5000"), redis("c2", "SET", "hits", "2")),
])
def test_atomic_optimistic_and_scripted_changes_are_not_hazards(ops):
    assert codes(*ops) == ["CR713"]


def test_select_then_update_in_separate_transactions():
    assert codes(*SEPARATE)[:1] == ["CR711"]


@pytest.mark.parametrize("read,write", [
    ("SELECT id FROM jobs WHERE status = 'pending' LIMIT 1 FOR UPDATE SKIP LOCKED", "UPDATE jobs SET status = 'c'"),
    ("SELECT value, version FROM counters WHERE name = 'hits'",
     "UPDATE counters SET value = $1, version = version + 1 WHERE name = 'hits' AND version = $2"),
])
def test_locked_or_versioned_reads_in_one_transaction_are_not_hazards(read, write):
    assert codes(sql("41", read), sql("41", write)) == ["CR713"]


def test_unlocked_read_in_one_transaction_is_a_hazard_and_serializable_is_not():
    plain = (sql("41", "BEGIN"), sql("41", "SELECT n FROM c"), sql("41", "UPDATE c SET n = $1"))
    assert codes(*plain)[:1] == ["CR711"]
    assert codes(sql("41", "BEGIN ISOLATION LEVEL SERIALIZABLE"), *plain[1:]) == ["CR713"]


def test_claim_read_then_delete():
    assert codes(*READ_DELETE)[:1] == ["CR712"]
    assert codes(sql("7", "SELECT id FROM jobs LIMIT 1", "1/1"), sql("7", "DELETE FROM jobs WHERE id = 1", "1/2"))[:1] \
        == ["CR712"]


def test_a_lock_keys_get_then_del_is_a_release_not_a_claim():
    release = (redis("c1", "SET", "lock:hits", "1:ab", "NX", "PX", "30000"), redis("c1", "INCR", "hits"),
               redis("c1", "GET", "lock:hits"), redis("c1", "DEL", "lock:hits"))
    assert codes(*release) == ["CR713"]
    legacy = (redis("c1", "SETNX", "lock:q", "1"), redis("c1", "GET", "lock:q"), redis("c1", "DEL", "lock:q"))
    assert codes(*legacy) == ["CR713"]
    assert codes(*READ_DELETE, redis("c1", "SET", "lock:q", "1", "NX"))[:1] == ["CR712"]  # the queue still is state


@pytest.mark.parametrize("lock, unlock", [
    ("SELECT pg_advisory_lock(42)", "SELECT pg_advisory_unlock(42)"),
    ("SELECT pg_try_advisory_lock($1)", "SELECT pg_advisory_unlock_all()"),
])
def test_a_read_then_update_under_an_advisory_lock_is_not_a_hazard(lock, unlock):
    assert codes(sql("41", lock, "3/1"), *SEPARATE, sql("41", unlock, "3/4")) == ["CR713"]
    assert codes(sql("41", lock, "3/1"), sql("41", unlock, "3/2"), *SEPARATE)[:1] == ["CR711"]  # let go first


def test_a_server_locked_tool_is_never_told_it_took_no_lock():
    from clirace.checks import hazards
    from clirace.run.observe import parse_line

    def trace():  # its state is a file; its lock is in the server, which strace does not see
        return tuple(parse_line(line, "/sb", 7) for line in (
            'openat(AT_FDCWD</sb>, "/sb/state/c.json", O_RDONLY) = 3</sb/state/c.json>',
            'openat(AT_FDCWD</sb>, "/sb/state/c.json", O_WRONLY|O_TRUNC) = 4</sb/state/c.json>'))
    traces = {"inc-0": trace(), "inc-1": trace()}

    def hazard_codes(*server_ops):
        trial = CounterRound(workload="w", amplified=True, sandbox="/sb", invocations=(inv("inc-0"), inv("inc-1")),
                             traces=traces, server_ops=server_ops)
        return [f.code for f in hazards.check(history(trial)).findings]
    assert "CR702" in hazard_codes()
    assert "CR702" not in hazard_codes(redis("c1", "SET", "lock", "me", "NX", "PX", "5000"))
    assert "CR702" not in hazard_codes(sql("41", "SELECT pg_advisory_lock(7)"))
    assert "CR702" not in hazard_codes(sql("41", "SELECT n FROM c WHERE id = 1 FOR UPDATE"))


def test_rounds_without_server_state_are_not_applicable():
    assert server_hazards.check(history(CounterRound(workload="w"))).status == "not_applicable"


def test_the_lost_increment_evidence_shows_the_servers_interleaving():
    from clirace.checks import counter
    trial = CounterRound(workload="w", start=0, server_ops=GET_SET,
                         invocations=(inv("inc-0"), inv("inc-1"), inv("read-after", stdout="1")))
    found = counter.check(history(trial)).findings[0]
    assert found.code == "CR101"
    assert found.evidence.observed.startswith("Redis MONITOR: c1 GET hits | c2 GET hits | c1 SET hits 1")


def test_fifty_reads_before_the_writes_never_push_the_first_write_out_of_the_evidence():
    from clirace.checks import _served
    reads = tuple(redis(f"c{n}", "GET", "hits") for n in range(50))
    writes = tuple(redis(f"c{n}", "SET", "hits", "1") for n in range(50))
    shown = _served.describe(CounterRound(workload="w", server_ops=reads + writes))
    assert shown.startswith("Redis MONITOR: c0 GET hits | c1 GET hits | c2 GET hits | ... (47 more GET) | "
                            "c0 SET hits 1 | c1 SET hits 1 | c2 SET hits 1 | ... (47 more SET)"), shown


def test_concurrent_modification_is_a_structured_refusal_and_exit_6_is_advised():
    printed = find_error(CONFLICT, "")
    assert printed.says_lock_held and printed.structured and printed.code == "CONCURRENT_MODIFICATION"
    verdict = lock_structured.check(history(conflict(inv("contender", 1, stdout=CONFLICT))))
    assert verdict.status == "pass" and "CONCURRENT_MODIFICATION" in verdict.summary
    assert [f.code for f in verdict.findings] == ["CR950"]
    assert lock_structured.check(history(conflict(inv("contender", 6, stdout=CONFLICT)))).findings == []


def test_s58_advice_never_scores():
    quick = conflict(inv("contender", 6, stdout=CONFLICT, ended=0.05))
    at_five = conflict(inv("contender", 6, stdout=CONFLICT, ended=5.0))
    assert [f.code for f in s58.check(history(quick)).findings] == ["CR951"]
    assert s58.check(history(at_five)).findings == []
    refused = SessionRun(with_ids=True, invocations=(inv("run-0"), inv("run-1", 4, stdout='{"code": "LOCK_HELD"}')))
    verdict = s58.check(history(refused))
    assert verdict.status == "not_applicable" and [f.code for f in verdict.findings] == ["CR952"]


def test_monitor_lines_and_statement_log_are_read_as_the_servers_wrote_them():
    line = r'1700000000.123456 [0 127.0.0.1:53122] "SET" "k\"1" "a\x00b\n"'
    stamp, db, client, quoted = MONITOR_LINE.match(line).groups()
    assert (stamp, client) == ("1700000000.123456", "127.0.0.1:53122")
    assert monitor_words(quoted) == ("SET", 'k"1', "a\x00b\n")
    log = "1700.5 41 t3 3/7 LOG:  execute <unnamed>: UPDATE t\n\tSET n = $1\n1700.6 41 t3 3/7 DETAIL:  parameters: $1 = '2'\n"
    first, second = _records(log)
    assert _LINE.match(first).groups()[2:5] == ("t3", "3/7", "LOG") and first.endswith("UPDATE t\nSET n = $1")
    assert _LINE.match(second).group(6) == "parameters: $1 = '2'"


EXAMPLES = {
    "CR710": lambda: history(served_round(*GET_SET)),
    "CR711": lambda: history(served_round(*SEPARATE)),
    "CR712": lambda: history(served_round(*READ_DELETE, kind=ClaimRound)),
    "CR713": lambda: history(served_round(*GET_SET)),
    "CR950": lambda: history(conflict(inv("contender", 1, stdout=CONFLICT))),
    "CR951": lambda: history(conflict(inv("contender", 6, stdout=CONFLICT))),
    "CR952": lambda: history(SessionRun(with_ids=True, invocations=(inv("run-0", 4),))),
}


def test_the_server_rendezvous_aims_at_state_read_then_changed_and_never_at_a_lock_key():
    from clirace.run.services.meet import server_aim
    assert server_aim(served_round(*GET_SET)).targets == {"hits"}
    locked_incr = (redis("c0", "GET", "hits"), redis("c1", "SET", "lock", "t", "NX", "PX", "30000"),
                   redis("c1", "INCRBY", "hits", "1"), redis("c1", "GET", "lock"), redis("lua", "del", "lock"))
    assert server_aim(served_round(*locked_incr)) is None  # nothing a connection read and then changed
    assert server_aim(served_round(*SEPARATE)).targets == {"jobs"}


def test_the_proxy_frames_commands_as_the_clients_send_them():
    from clirace.run.services.proxy import _pg_frames, _redis_frames
    wire = b"*2\r\n$3\r\nGET\r\n$4\r\nhits\r\n*3\r\n$3\r\nSET\r\n$4\r\nhits\r\n$1\r\n1\r\n"
    frame, words, rest = _redis_frames(wire)
    assert words == ("GET", "hits") and frame + rest == wire and _redis_frames(rest)[1] == ("SET", "hits", "1")
    assert _redis_frames(wire[:10]) is None and _redis_frames(b"PING\r\n")[1] == ("PING",)
    frames = _pg_frames()
    startup = (8 + 4).to_bytes(4, "big") + (196608).to_bytes(4, "big") + b"u\0\0\0"
    query = b"SELECT n FROM counters\0"
    parse = b"P" + (4 + 1 + len(query) + 2).to_bytes(4, "big") + b"\0" + query + b"\0\0"
    assert frames(startup + parse)[1] == ()
    assert frames(parse)[1] == ("SELECT n FROM counters",) and frames(parse[:7]) is None


def test_advice_never_turns_a_criterion_under_only_into_not_tested():
    from clirace.cli.pipeline import judge
    h = history(conflict(inv("contender", 4, stdout=json.dumps({"ok": False, "data": None, "error": {
        "code": "LOCK_HELD", "retry_after_ms": 5, "retryable": True, "message": "pid 7, 2 s ago"}}))),
        only=("lock-error-structured",))
    statuses = {c.id: c.status for c in judge(h).criteria}
    assert statuses["lock-error-structured"] == "pass" and judge(h).verdicts["s58-advice"].status == "not_applicable"


def test_server_locks_are_decided_in_one_place():
    """Issue 25 item 10: one server-lock reader (run/services/ops.py), read by the hazards and the server rendezvous."""
    from pathlib import Path

    from clirace.run.services import ops
    from clirace.run.services.meet import server_aim

    assert ops.locking_read("SELECT * FROM jobs WHERE id = 1 FOR UPDATE SKIP LOCKED")
    assert ops.locking_read("select n from counters for no key update")
    assert not ops.locking_read("UPDATE jobs SET state = 'done'")
    seen = [redis("a", "SET", "lock", "1", "NX", "PX", "5000"), redis("a", "GET", "lock"), redis("a", "SET", "lock", "2"),
            redis("b", "GET", "hits"), redis("b", "SET", "hits", "3")]
    assert ops.lock_keys(seen) == {"lock"}
    aim = server_aim(CounterRound(server_ops=tuple(seen)))
    assert aim is not None and aim.targets == {"hits"}  # the lock key is no state to aim at
    src = Path(ops.__file__).resolve().parents[1]
    deciding = sorted(str(p.relative_to(src)) for p in src.rglob("*.py") if r"for\s+(" in p.read_text())
    assert deciding == ["services/ops.py"], deciding


@pytest.mark.parametrize("clause,locks", [
    ("FOR UPDATE", True), ("for no key update", True), ("FOR SHARE NOWAIT", True), ("FOR NO KEY UPDATE SKIP LOCKED", True),
    # FOR KEY SHARE does not block an UPDATE of the row's other columns (PostgreSQL's row-lock conflict table):
    # two transactions holding it both write what they read, so it protects no read-modify-write.
    ("FOR KEY SHARE", False), ("", False),
])
def test_one_pattern_decides_a_locking_read_for_the_hazards_and_a_lock_call_for_the_lock_evidence(clause, locks):
    """Issue 26 item 3: the read a hazard check counts as locked is the lock call the lock evidence counts, and the
    reverse (they were two regexes that disagreed on FOR KEY SHARE)."""
    from clirace.checks._served import locks_taken
    from clirace.run.services import ops

    read = f"SELECT n FROM counters WHERE name = 'hits' {clause}"
    assert ops.locking_read(read) is locks and ops.lock_call("postgres", (), read) is locks
    one = (sql("41", "BEGIN"), sql("41", read), sql("41", "UPDATE counters SET n = $1 WHERE name = 'hits'"))
    assert (codes(*one)[:1] == ["CR711"]) is not locks
    assert bool(locks_taken(served_round(*one))) is locks
    assert ops.lock_call("postgres", (), "SELECT pg_try_advisory_xact_lock_shared(7)")
    assert not ops.locking_read("SELECT pg_advisory_lock(7)")
