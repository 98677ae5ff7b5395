"""The hazards read from traced rounds, on literal traces: what is a temp file and what is the state."""
from clirace.checks import hazards
from clirace.history import CounterRound, FileOp

from .histories import history, inv

WRITE = ("O_CREAT", "O_TRUNC", "O_WRONLY")


def _round(ops):
    return CounterRound(workload="c", amplified=True, sandbox="/sb", start=0,
                        invocations=(inv("inc-0"), inv("inc-1"), inv("read-after", stdout="2")),
                        traces={"inc-0": ops, "inc-1": ops})


def _temps(ops):
    return [f.args["path"] for f in hazards.check(history(_round(ops))).findings if f.code == "CR703"]


def test_state_kept_under_tmpdir_is_not_called_the_same_temp_file_but_its_fixed_temp_is():
    ops = (FileOp(1, "openat", ("/sb/tmp/t/state",), True, ("O_RDONLY",)),
           FileOp(1, "openat", ("/sb/tmp/t/state.tmp",), True, WRITE, writes=True),
           FileOp(1, "rename", ("/sb/tmp/t/state.tmp", "/sb/tmp/t/state"), True))
    assert _temps(ops) == ["tmp/t/state.tmp"]


def test_state_renamed_away_to_a_backup_before_its_rewrite_is_not_a_temp_file():
    ops = (FileOp(1, "openat", ("/sb/state",), True, ("O_RDONLY",)),
           FileOp(1, "rename", ("/sb/state", "/sb/state.bak"), True),
           FileOp(1, "openat", ("/sb/state",), True, WRITE, writes=True))
    assert _temps(ops) == []


def test_a_fixed_scratch_file_read_back_after_it_was_written_is_still_a_temp_file():
    ops = (FileOp(1, "openat", ("/sb/tmp/run/result.json",), True, WRITE, writes=True),
           FileOp(1, "openat", ("/sb/tmp/run/result.json",), True, ("O_RDONLY",)))
    assert _temps(ops) == ["tmp/run/result.json"]
