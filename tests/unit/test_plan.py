"""The plan in the history: a planned experiment whose records are missing is undecided, never passed and never
"not in the spec"; an interrupted run's judgement lists what did not run; a history without its plan is refused."""
import dataclasses
import json
from pathlib import Path

import pytest

from clirace.cli.pipeline import judge
from clirace.errors import HistoryError
from clirace.history import (
    CounterRound,
    History,
    LockConflict,
    LockRelease,
    NotRun,
    Planned,
)
from clirace.history.vocab import EventKind, Failure, Way
from clirace.scenarios.plan import plan
from clirace.spec import load_spec

from ..conftest import FIXTURES
from .histories import event, history, inv
from .test_workload_checks import counter_trial

LEVEL3 = FIXTURES / "level3" / "clirace.yaml"
COUNTER = Planned("workloads", "counter", 2, ("counter", "hazards"))
KEYS = Planned("workloads", "keys", 2, ("keys", "hazards"))
CONFLICT = Planned("lock-conflict", "", 1, ("lock-excludes", "lock-error-structured"))


def counted(round_):
    return CounterRound(name="counter", workload="counter", round=round_,
                        invocations=counter_trial(0, 2, [True, True]).invocations, start=0)


def planned(*trials, plan_=(COUNTER, KEYS, CONFLICT), stopped=""):
    h = history(*trials)
    h.plan, h.stopped = plan_, stopped
    return h


def statuses(h: History) -> dict[str, str]:
    return {c.id: str(c.status) for c in judge(h).criteria}


def test_an_interrupted_run_leaves_what_it_did_not_finish_undecided_and_says_so():
    h = planned(counted(0), counted(1), stopped="interrupted (Ctrl-C) during 'keys: round 1/2'")
    result = judge(h)
    verdicts = result.verdicts
    assert verdicts["counter"].status == "pass"  # both its planned rounds ran
    assert verdicts["keys"].status == "unknown" and "workload keys: planned, never finished" in verdicts["keys"].summary
    assert "interrupted (Ctrl-C) during 'keys: round 1/2'" in verdicts["keys"].summary
    for lock_check in ("lock-excludes", "lock-error-structured"):  # not "the spec has no lock section"
        assert verdicts[lock_check].status == "unknown", verdicts[lock_check]
        assert "lock-conflict: planned, never finished" in verdicts[lock_check].summary
    assert verdicts["lock-wait-timeout"].status == "not_tested"  # not planned: the spec has no way to test it
    assert statuses(h)["no-silent-corruption"] == "unknown"
    assert result.interrupted
    assert any(n.startswith("Not run to the end: workload keys") and "lock-conflict" in n for n in result.notes)


def test_a_round_cut_short_counts_as_missing_and_a_failure_seen_still_stands():
    cut = CounterRound(name="counter", workload="counter", round=1, error="interrupted before the trial finished",
                       failed_by=Failure.INTERRUPTED)
    h = planned(counted(0), cut, stopped="interrupted (Ctrl-C)")
    v = judge(h).verdicts["counter"]
    assert v.status == "unknown"
    assert "workload counter: 1 of 2 planned rounds finished (the run was interrupted (Ctrl-C))" in v.summary
    lost = CounterRound(name="counter", workload="counter", round=0, start=5,
                        invocations=counter_trial(5, 6, [True, True, True]).invocations)
    assert judge(planned(lost, stopped="interrupted (Ctrl-C)")).verdicts["counter"].status == "fail"


def test_a_pass_on_fewer_rounds_than_planned_is_undecided_with_the_count():
    v = judge(planned(counted(0), plan_=(COUNTER,), stopped="terminated (SIGTERM)")).verdicts["counter"]
    assert v.status == "unknown"
    assert "workload counter: 1 of 2 planned rounds finished (the run was terminated (SIGTERM))" in v.summary


def test_a_scenario_that_raised_outside_its_trials_leaves_its_checks_undecided_with_the_error():
    failed = NotRun(name="lock-conflict", experiment="lock-conflict", failed_by=Failure.CLIRACE,
                    error="clirace failed while running this experiment (KeyError: 'x'); this is a bug in clirace")
    v = judge(planned(counted(0), counted(1), failed, plan_=(COUNTER, CONFLICT))).verdicts["lock-excludes"]
    assert v.status == "unknown" and "KeyError" in v.summary


def test_an_experiment_the_tool_kept_from_running_is_undecided_with_its_reason_and_hint_not_a_bug():
    """The pipeline's NotRun for every experiment when services.postgres.setup gave no answer twice."""
    why = "services.postgres.setup gave no answer twice, each time on a new template database: ..."
    kept = [NotRun(name=e, experiment=e, failed_by=Failure.TOOL, error=why, hint="Run it by hand.")
            for e in ("workloads", "lock-conflict")]
    verdicts = judge(planned(*kept, plan_=(COUNTER, CONFLICT))).verdicts
    for check in ("counter", "lock-excludes"):
        assert verdicts[check].status == "unknown" and why in verdicts[check].summary, verdicts[check]
        assert verdicts[check].hint == "Run it by hand." and "bug" not in verdicts[check].summary, verdicts[check]


def test_a_lock_release_way_never_reached_is_undecided_not_passed():
    ways = tuple(Planned("lock-release", w.value, 1, ("lock-released-on-exit",)) for w in Way)
    normal = LockRelease(way=Way.NORMAL, invocations=(inv("holder"), inv("next")))
    h = planned(normal, plan_=ways, stopped="interrupted (Ctrl-C) during 'lock: release after error'")
    v = judge(h).verdicts["lock-released-on-exit"]
    assert v.status == "unknown" and "lock-release (error): planned, never finished" in v.summary


def test_a_declared_not_run_accounts_for_its_planned_part():
    ways = tuple(Planned("lock-release", w.value, 1, ("lock-released-on-exit",)) for w in Way)
    done = [LockRelease(way=w, invocations=(inv("holder", 0 if w is Way.NORMAL else 1 if w is Way.ERROR else None,
                                                signal=None if w in (Way.NORMAL, Way.ERROR) else 2), inv("next")))
            for w in Way if w is not Way.ERROR]
    skipped = NotRun(name="lock-release/error", experiment="lock-release/error", why="no lock.error_command")
    v = judge(planned(*done, skipped, plan_=ways)).verdicts["lock-released-on-exit"]
    assert v.status == "not_tested" and "no lock.error_command" in v.summary  # as before plans


def test_the_plan_and_the_stop_survive_saving_and_a_history_without_a_plan_is_refused(tmp_path: Path):
    conflict = LockConflict(invocations=(inv("holder"), inv("contender", 4, stdout="busy")),
                            events=(event(EventKind.HELD, 0.0),))
    h = planned(counted(0), conflict, stopped="interrupted (Ctrl-C) during 'keys: round 1/2'")
    h.save(tmp_path / "h.json")
    again = History.load(tmp_path / "h.json")
    assert again.plan == h.plan and again.stopped == h.stopped
    assert {k: v.status for k, v in judge(again).verdicts.items()} == {k: v.status for k, v in judge(h).verdicts.items()}
    data = json.loads((tmp_path / "h.json").read_text())
    del data["plan"], data["stopped"]
    for trial in data["trials"]:
        del trial["failed_by"]
    # Without its plan a missing workload would read "not in the spec" and its criterion pass on the others.
    with pytest.raises(HistoryError, match=r"this history has no plan \(\$\.plan\)") as refused:
        History.from_json(data, "old.json")
    assert refused.value.exit_code == 2 and "clirace check SPEC --history FILE" in refused.value.paragraph()


def test_the_plan_of_the_level3_spec_lists_every_experiment_and_only_asks_for_what_only_asks():
    spec = load_spec(LEVEL3)
    every = {"reference", "workloads", "lock-conflict", "lock-release", "lock-wait", "session", "atomic-config"}
    full = plan(spec, (), 3, every)
    assert [(p.experiment, p.part, p.trials) for p in full if p.experiment == "workloads"] == [
        ("workloads", w.name, 3) for w in spec.workloads]
    assert {p.experiment for p in full} == every
    assert [p.part for p in full if p.experiment == "lock-release"] == [w.value for w in Way]
    hazards_only = plan(spec, ("hazards",), 3, {"reference", "workloads"})
    assert [p.part for p in hazards_only if p.experiment == "workloads"] == [w.name for w in spec.workloads]
    assert not [p for p in hazards_only if p.part.startswith("lock.")]  # the lock commands are not needed


def test_a_trial_error_says_whose_failure_it_was_also_in_an_older_history():
    assert CounterRound(error="setup command 'x' failed").failure is Failure.SPEC
    assert CounterRound(error="clirace failed inside this experiment (OSError)").failure is Failure.CLIRACE
    assert CounterRound(error="interrupted before the trial finished").failure is Failure.INTERRUPTED
    assert CounterRound(error="the lock holder never held the lock").failure is Failure.TOOL
    assert CounterRound(error="anything", failed_by=Failure.SPEC).failure is Failure.SPEC
    assert CounterRound().failure is None


def test_only_accepts_every_registered_check_and_its_replay_runs_what_that_check_judges():
    """The replay printed with a finding is `--only CHECK`: for every registered check, the plan of that run
    holds an experiment whose records the check judges (hazards: the workloads' traced rounds)."""
    from clirace.checks.registry import EXPERIMENTS, resolve, scenarios_for
    spec = load_spec(LEVEL3)
    assert spec.lock is not None
    # Issue 25 item 9: on a tool that never waits, lock-wait-timeout is judged on the lock-conflict experiment.
    never_waits = dataclasses.replace(spec, lock=dataclasses.replace(spec.lock, never_waits=True, wait_option=None))
    for shape in (spec, never_waits):
        for check in EXPERIMENTS:
            assert resolve(check) == check
            replay = plan(shape, (check,), 3, scenarios_for((check,), shape.lock.never_waits))
            assert any(check in p.checks and p.experiment != "reference" for p in replay), (check, replay)


def test_three_kinds_of_trial_error_in_a_reference_run_spec_misfit_tool_failure_and_clirace_bug():
    """Only the spec's misfit is a spec error (exit 2); clirace's own failure is exit 3 naming the trial; the
    tool's failure alone leaves its workload undecided and the run goes on."""
    import pytest

    from clirace.cli.pipeline import _refuse_a_spec_the_tool_does_not_fit
    from clirace.errors import EXIT_INTERNAL, EXIT_USAGE, InternalError, SpecError

    spec = load_spec(LEVEL3)

    def reference(error, failure):
        return history(CounterRound(name="counter#0", workload="counter#0", serial=True, error=error, failed_by=failure),
                       dataclasses.replace(counted(0), workload="counter#0"))

    with pytest.raises(SpecError) as misfit:
        _refuse_a_spec_the_tool_does_not_fit(spec, reference("setup command 'x' failed (exit 1)", Failure.SPEC))
    assert misfit.value.exit_code == EXIT_USAGE
    with pytest.raises(InternalError) as bug:
        _refuse_a_spec_the_tool_does_not_fit(spec, reference("clirace failed inside this experiment (OSError: x)",
                                                             Failure.CLIRACE))
    assert bug.value.exit_code == EXIT_INTERNAL and "counter: counter#0 (round 1)" in bug.value.message
    _refuse_a_spec_the_tool_does_not_fit(spec, reference("the lock holder never held the lock", Failure.TOOL))
    v = judge(reference("the lock holder never held the lock", Failure.TOOL)).verdicts["counter"]
    assert v.status == "unknown" and "never held" in v.summary
