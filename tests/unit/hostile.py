"""A literal history whose target printed the hostile fixture's text everywhere it can show up in a report."""
import importlib.util

from clirace.pipeline import judge

from ..conftest import FIXTURES
from .histories import history, inv, trial

_spec = importlib.util.spec_from_file_location("hostile_markdown", FIXTURES / "hostile" / "markdown.py")
_module = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_module)
HOSTILE = _module.HOSTILE


def hostile_history():
    contender = inv("contender", exit_code=1, stdout="incremented " + HOSTILE,
                    stderr=f"error: {HOSTILE}\n<details>\n</details>\n")
    observed = {"inc-0": {"written": [], "in_place": [f"{{sandbox}}/{HOSTILE}"], "renamed_onto": [], "locks": []}}
    return history(
        trial("lock-conflict", invocations=[inv("baseline"), contender], while_held="exited", baseline_ok=True,
              holder_alive=True, prompt=5.0, hold="park"),
        trial("counter", round_=1, invocations=[inv("inc-0", stdout=HOSTILE)], start=0, final=0, amplified=True,
              observed=observed))


def hostile_result():
    result = judge(hostile_history())
    result.notes.append("strace said: " + HOSTILE)
    return result
