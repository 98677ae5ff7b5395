"""The plan against interrupts and failures (issue 17): a run cut short never reports a pass its unrun steps
would have decided, and its saved history re-judges the same way.

Real interrupts: a real SIGINT, sent to this process once a target of the chosen step is running, during a
level-3 check run in-process (--rounds 1, --parallel 2: every kind of step, cheaply). Every kind of step: the
run stopped at its last kind of step also gives the partial history an interrupt at the start of each earlier
step would leave (the records there were then), each judged.
"""
from __future__ import annotations

import glob
import os
import signal
import tempfile
import threading
import time
from contextlib import contextmanager
from dataclasses import replace

import pytest

from clirace.checks import registry
from clirace.cli.pipeline import judge, run
from clirace.history import History, RunOptions
from clirace.scenarios import SCENARIOS
from clirace.spec import load_spec
from clirace.verdict.rubric import load_section

from ..conftest import FIXTURES
from ..procs import clirace_processes, wait_for

LEVEL3 = FIXTURES / "level3" / "clirace.yaml"
QUICK = dict(seed=7, rounds=1, parallel=2)
LOCK = ("lock-excludes", "lock-error-structured", "lock-released-on-exit", "lock-wait-timeout")
LATER = {"session": ("session-isolation", "atomic-config-writes"), "atomic": ("atomic-config-writes",)}
# The kinds of progress step of a level-3 check, in run order, and the criteria each decides.
KINDS = [
    ("reference run", ("no-silent-corruption",)),
    ("lock: contender and error command alone", LOCK),
    ("round", ("no-silent-corruption",)),
    ("lock: contender while the lock is held", ("lock-excludes", "lock-error-structured")),
    ("lock: release after", ("lock-released-on-exit",)),
    ("lock: contender asked to wait", ("lock-wait-timeout",)),
    ("session:", ("session-isolation",)),
    ("atomic config:", ("atomic-config-writes",)),
]
ORDER = ["reference", "workloads", "lock", "session", "atomic"]


def kind_of(step: str) -> int:
    return next(n for n, (words, _) in enumerate(KINDS) if words in step)


def stage_of(step: str) -> int:
    """Where the step's stage stands in the run (the lock experiments are one stage, side by side)."""
    words = KINDS[kind_of(step)][0]
    return ORDER.index("reference" if "reference" in words or "alone" in words else "workloads" if words == "round"
                       else "lock" if words.startswith("lock") else words.split()[0].rstrip(":"))


def undecidable(step: str) -> set[str]:
    """The criteria an interrupt during `step` leaves without all their evidence: its own, and those of every
    later stage (steps of the same side-by-side stage may have finished meanwhile)."""
    out = set(KINDS[kind_of(step)][1])
    for other, decides in KINDS:
        if stage_of(other) > stage_of(step):
            out |= set(decides)
    return out


def mine() -> list:
    """Live processes of this test's in-process runs (other clirace runs on the machine are not ours)."""
    return [p for p in clirace_processes() if p.marker.startswith(f"{os.getpid()}:")]


def statuses(history: History) -> dict[str, str]:
    return {c.id: str(c.status) for c in judge(history).criteria}


def assert_judged_as_interrupted(history: History, step: str) -> None:
    got = statuses(history)
    only = set(history.options.only)
    checks = {c["id"]: set(c["checks"]) for level in load_section("s15")["levels"] for c in level.get("criteria", [])}
    for criterion in undecidable(step):
        if only and not checks[criterion] & only:
            continue  # not run at all (--only): not tested, and said so

        assert got[criterion] == "unknown", (step, criterion, got, judge(history).verdicts)
    again = History.from_json(history.to_json())  # the saved history re-judges the same way
    assert statuses(again) == got
    assert [v.summary for v in judge(again).verdicts.values()] == [v.summary for v in judge(history).verdicts.values()]


@contextmanager
def ctrl_c(step_words: str, sandbox_kind: str):
    """A real SIGINT to this process once a step containing `step_words` has begun and a target process of a
    sandbox named `sandbox_kind`-* is alive (mid-trial), the way a terminal's Ctrl-C arrives. Yields the progress
    callback; the handler raises KeyboardInterrupt only while the run is on."""
    armed, done = threading.Event(), threading.Event()

    def mid_flight() -> None:
        while not done.is_set():
            if any(os.path.basename(p.marker.split(":", 1)[1]).startswith(sandbox_kind) for p in mine()):
                os.kill(os.getpid(), signal.SIGINT)
                return
            time.sleep(0.002)

    def on_sigint(signum, frame):
        if armed.is_set() and not done.is_set():
            raise KeyboardInterrupt

    def progress(text: str) -> None:
        if step_words in text and not armed.is_set():
            armed.set()
            watcher.start()

    watcher = threading.Thread(target=mid_flight, daemon=True)
    previous = signal.signal(signal.SIGINT, on_sigint)
    try:
        yield progress
    finally:
        done.set()
        if watcher.is_alive():
            watcher.join(5)
        signal.signal(signal.SIGINT, previous)


def interrupted_run(step_words: str, sandbox_kind: str, only: tuple[str, ...] = ()) -> tuple[History, str, list[tuple[str, int]]]:
    """A level-3 run stopped by a real Ctrl-C mid `step_words`: its history, the step it was stopped in, and each
    progress step with the number of records there were when it began."""
    seen: dict[str, History] = {}
    counts: list[tuple[str, int]] = []
    with ctrl_c(step_words, sandbox_kind) as interrupt:
        def progress(text: str) -> None:
            counts.append((text, len(seen["h"].trials)))
            interrupt(text)

        with pytest.raises(KeyboardInterrupt):
            run(load_spec(LEVEL3), RunOptions(**QUICK, only=only), progress=progress,
                on_history=lambda h: seen.setdefault("h", h))
    history = seen["h"]
    assert history.stopped.startswith("interrupted (Ctrl-C) during "), history.stopped
    assert wait_for(lambda: not mine(), 5, "the interrupted run's processes to be gone")
    # Nothing of the run is left on disk, nor made again later by an experiment that ran beside the interrupted
    # one (they stop before the run's cleanup: Context.halt).
    assert not glob.glob(os.path.join(tempfile.gettempdir(), f"clirace-{os.getpid()}-*")), "a run folder is left"
    return history, history.stopped.split(" during ", 1)[1].strip("'\""), counts


@pytest.mark.e2e
@pytest.mark.timeout(120)
@pytest.mark.parametrize("step_words, sandbox_kind, only", [
    ("keys#1: round", "keys-", ()),  # after its first workload, mid-round of the second
    ("lock: contender while the lock is held", "lock-conflict-", LOCK),  # mid side-by-side lock stage (no workloads)
])
def test_a_real_ctrl_c_mid_step_leaves_what_it_would_have_decided_undecided(step_words, sandbox_kind, only):
    history, step, _ = interrupted_run(step_words, sandbox_kind, only)
    assert_judged_as_interrupted(history, step)
    result = judge(history)
    assert result.interrupted and result.unfinished, result.notes
    assert result.score.score < 3


@pytest.mark.e2e
@pytest.mark.timeout(120)
def test_an_interrupt_at_every_kind_of_step_never_passes_what_that_step_would_decide():
    """The issue's probe: Ctrl-C at a kill point of atomic-config (the last kind of step) used to report score 3.
    The same run then stands for an interrupt at the start of every step before: the history it would leave
    (the records there were when that step began) is judged for each."""
    history, step, counts = interrupted_run("atomic config: writer killed", "writer-killed-")
    assert_judged_as_interrupted(history, step)
    assert judge(history).score.score < 3
    assert {kind_of(text) for text, _ in counts} == set(range(len(KINDS)))  # every kind of step was walked
    for text, n in counts:
        cut = replace(history, trials=history.trials[:n], stopped=f"interrupted (Ctrl-C) during {text!r}")
        assert_judged_as_interrupted(cut, text)


@pytest.mark.e2e
@pytest.mark.timeout(60)
def test_a_lock_scenario_that_raises_leaves_the_lock_criteria_undecided_and_the_rest_judged(monkeypatch):
    def broken(ctx):
        raise RuntimeError("a bug in the lock scenario")

    monkeypatch.setitem(SCENARIOS, "lock-conflict", broken)
    result = run(load_spec(LEVEL3), RunOptions(**QUICK, only=("lock-excludes", "lock-error-structured", "counter")))
    for check in ("lock-excludes", "lock-error-structured"):
        verdict = result.verdicts[check]
        assert verdict.status == "unknown" and "a bug in the lock scenario" in verdict.summary, verdict
        assert "the spec has no lock section" not in verdict.summary
    assert result.verdicts["counter"].status == "pass"
    assert registry.EXPERIMENTS["lock-excludes"].scenario == "lock-conflict"
