"""A literal history whose target printed the hostile fixture's text everywhere it can show up in a report."""
import importlib.util

from clirace.cli.pipeline import judge
from clirace.history import CounterRound, FileOp, LockConflict
from clirace.history.vocab import HoldMode

from ..conftest import FIXTURES
from .histories import history, inv

_spec = importlib.util.spec_from_file_location("hostile_markdown", FIXTURES / "hostile" / "markdown.py")
_module = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_module)
HOSTILE = _module.HOSTILE


def hostile_history():
    contender = inv("contender", exit_code=1, stdout="incremented " + HOSTILE,
                    stderr=f"error: {HOSTILE}\n<details>\n</details>\n")
    rewrote = FileOp(1, "openat", (f"/sb/{HOSTILE}",), True, ("O_TRUNC", "O_WRONLY"), writes=True)
    return history(
        LockConflict(invocations=(contender,), prompt=5.0, hold=HoldMode.PARK),
        CounterRound(round=1, invocations=(inv("inc-0", stdout=HOSTILE), inv("read-after", stdout="0")), start=0,
                     amplified=True, traces={"inc-0": (rewrote,)}, sandbox="/sb"))


def hostile_result():
    result = judge(hostile_history())
    result.notes.append("strace said: " + HOSTILE)
    return result
