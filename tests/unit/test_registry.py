"""The registry names each experiment once; every rule code it lists is reachable: for each code, a literal
history on which the code's own check reports it (driven by the registry, so a new code needs an example)."""
import dataclasses
import json

import pytest

from clirace.checks.registry import EXPERIMENTS, MODULE_OF, SCENARIO_OF, check_function, resolve
from clirace.errors import InternalError
from clirace.history import NotRun
from clirace.history.vocab import Way
from clirace.scenarios import SCENARIOS
from clirace.verdict.rubric import load_section, rules

from . import test_lock_checks as lock
from . import test_lock_effects as effects
from . import test_server_hazards as served
from . import test_session_atomic_checks as sa
from . import test_workload_checks as wl
from .histories import history, inv

BARE = '{"code": "LOCK_HELD", "retry_after_ms": 5}'


def hazard_round(calls):
    """A traced counter round of two invocations, each making `calls` (call, path, flags); renames go to .../dest."""
    def ops():
        out = []
        for call, path, flags in calls:
            paths = (path, "/sb/dest") if call == "rename" else (path,)
            out.append(sa.FileOp(1, call, paths, True, flags, writes=call == "write" or bool(
                {"O_WRONLY", "O_RDWR", "O_CREAT", "O_TRUNC"} & set(flags))))
        return tuple(out)
    return wl.CounterRound(workload="c", amplified=True, sandbox="/sb", start=0,
                           invocations=(inv("inc-0"), inv("inc-1"), inv("read-after", stdout="2")),
                           traces={"inc-0": ops(), "inc-1": ops()})


def release_history(replace_way=None, trial=None):
    trials = lock.all_released()
    if replace_way is not None:
        trials = [trial if t.way is replace_way else t for t in trials]
    return history(*trials)


EXAMPLES = {
    "CR101": lambda: history(wl.counter_trial(5, 6, [True, True, True])),
    "CR102": lambda: history(wl.counter_trial(0, 3, [True, False, False])),
    "CR111": lambda: history(wl.keys_trial('{"k0": "v0"}', [True, True])),
    "CR112": lambda: history(wl.keys_trial('{"k0": "v9"}', [True])),
    "CR113": lambda: history(wl.keys_trial('{"k0": "v', [True])),
    "CR114": lambda: history(dataclasses.replace(wl.keys_trial('{"k0": "v0"}', [True]), before=wl.snapshot('{"a": 1}'))),
    "CR121": lambda: history(wl.claim_trial(["a", "a", "b"], remaining=["c"])),
    "CR122": lambda: history(wl.claim_trial(["a", None, None], remaining=["b"])),
    "CR131": lambda: history(wl.output_trial(["m1 result", "m1 result"])),
    "CR132": lambda: history(wl.output_trial([None, "m1"])),
    "CR201": lambda: history(lock.conflict(inv("contender", 0))),
    "CR202": lambda: history(lock.conflict(inv("contender", 1, stderr="Error: lock file exists"))),
    "CR203": lambda: history(lock.conflict(inv("contender", 0, stdout=lock.ENVELOPE))),
    "CR204": lambda: history(lock.conflict(inv("contender", 1, stdout=json.dumps({"error": {"code": "LOCK_HELD"}})))),
    "CR205": lambda: history(lock.conflict(inv("contender", 1, stdout='{"code": "LOCK_HELD", "retry_after_ms": "5"}'))),
    "CR206": lambda: history(lock.conflict(inv("contender", 1, stdout='{"code": "BUSY", "retry_after_ms": 5}'))),
    "CR207": lambda: history(lock.conflict(inv("contender", 0), while_held="waiting")),
    "CR208": lambda: history(lock.conflict(inv("contender", 4, stdout=lock.ENVELOPE),
                                           retries=[inv("retry-1", 4, stdout=lock.ENVELOPE)])),
    "CR213": lambda: history(dataclasses.replace(lock.conflict(inv("contender", 4, stdout=lock.ENVELOPE, ended=6.2)),
                                                 window=5.05, alone=0.05, follow=2.5)),
    "CR209": lambda: history(effects.with_effects(lock.conflict(inv("contender", 0, stdout=effects.OK)), "{}",
                                                  contender=("k1", "v1"))),
    "CR210": lambda: history(dataclasses.replace(lock.conflict(inv("contender", 1)), events=(
        lock.event(lock.EventKind.HELD, 0.0), lock.event(lock.EventKind.ASKED, 0.1, "contender", "overwrite? [y/N]")))),
    "CR306": lambda: history(effects.serial_keys(), *lock.all_released()),
    "CR307": lambda: release_history(Way.NORMAL, dataclasses.replace(
        lock.release("normal", 0, 0), leftovers=(dataclasses.replace(effects.LEFT, refused=""),))),
    "CR301": lambda: release_history(Way.NORMAL, lock.release("normal", 0, 1)),
    "CR302": lambda: release_history(Way.ERROR, lock.release("error", 3, 1)),
    "CR303": lambda: release_history(Way.SIGINT, lock.release("sigint", None, 1, signal=2)),
    "CR304": lambda: release_history(Way.SIGTERM, lock.release("sigterm", None, 1, signal=15)),
    "CR305": lambda: release_history(Way.SIGTERM, lock.release("sigterm", None, 0, signal=9, timed_out=True)),
    "CR401": lambda: history(lock.waited(None, 4000, timed_out=True)),
    "CR402": lambda: history(lock.waited(1, 1050, stdout="timed out")),
    "CR403": lambda: history(lock.waited(4, 30)),
    "CR404": lambda: history(lock.waited(4, 2500)),
    "CR405": lambda: history(lock.conflict(inv("contender", 0), while_held="waiting"),
                             NotRun(experiment="lock-wait", why="never waits", declared="never-waits")),
    "CR504": lambda: history(NotRun(experiment="session", why="no session id", declared="no-session-id")),
    "CR501": lambda: history(sa.session_trial(True, sa.twice({0: ("/sb/tmp/t/a/r", "/sb/tmp/t/b/r"),
                                                                     1: ("/sb/tmp/t/c/r", "/sb/tmp/t/d/r")})),
                             sa.session_trial(False, {"run-0": []})),
    "CR502": lambda: history(sa.session_trial(True, {"run-0": []}),
                             sa.session_trial(False, {"run-0": ["/sb/tmp/r"], "run-1": ["/sb/tmp/r"]})),
    "CR503": lambda: history(dataclasses.replace(sa.session_trial(True, {"run-0": []}), invocations=(inv("run-0", 1),)),
                             sa.session_trial(False, {"run-0": []})),
    "CR505": lambda: history(sa.session_trial(True, sa.twice({0: ("/sb/tmp/t/d/r", "/sb/tmp/t/d/r")})),
                             sa.session_trial(False, {"run-0": ["/sb/tmp/t/d/r"]})),
    "CR506": lambda: history(sa.session_trial(True, {"run-0": ["/tmp/tool.lock"], "run-1": ["/tmp/tool.lock"]}),
                             sa.session_trial(False, {"run-0": []})),
    "CR601": lambda: history(sa.sampled(bad=3)),
    "CR602": lambda: history(sa.sampled(), sa.killed("")),
    "CR603": lambda: history(sa.sampled(), dataclasses.replace(
        wl.keys_trial('{"k0": "v0"}', [True]), sandbox="/sb",
        config=dataclasses.replace(wl.keys_trial("", [True]).config, path="/sb/c.json"),
        traces={"set-0": (sa.FileOp(1, "openat", ("/sb/c.json",), True, ("O_TRUNC", "O_WRONLY"), writes=True),)})),
    "CR701": lambda: history(hazard_round([("openat", "/sb/state", ("O_RDONLY",)), ("openat", "/sb/lock", ("O_CREAT", "O_EXCL", "O_WRONLY")),
                                           ("openat", "/sb/state", ("O_TRUNC", "O_WRONLY")), ("unlink", "/sb/lock", ())])),
    "CR702": lambda: history(hazard_round([("openat", "/sb/state", ("O_RDWR",)), ("write", "/sb/state", ())])),
    "CR703": lambda: history(hazard_round([("openat", "/sb/tmp/r.tmp", ("O_CREAT", "O_WRONLY")),
                                           ("rename", "/sb/tmp/r.tmp", ())])),
    "CR704": lambda: history(hazard_round([("openat", "/sb/lock", ("O_CREAT", "O_EXCL", "O_WRONLY")),
                                           ("openat", "/sb/state", ("O_RDONLY",)), ("openat", "/sb/state", ("O_TRUNC", "O_WRONLY"))])),
    "CR705": lambda: history(hazard_round([("flock", "/sb/lock", ()), ("openat", "/sb/state", ("O_TRUNC", "O_WRONLY"))])),
    "CR901": lambda: history(lock.conflict(inv("contender", 1, stdout=BARE))),
    "CR902": lambda: history(lock.conflict(inv("contender", 1, stdout=BARE))),
    "CR903": lambda: history(lock.conflict(inv("contender", 1, stdout=BARE))),
    "CR904": lambda: history(lock.conflict(inv("contender", 1, stdout=BARE))),
    "CR905": lambda: release_history(Way.SIGKILL, lock.release("sigkill", None, 1, signal=9)),
    "CR906": lambda: release_history(),
    **served.EXAMPLES,
}


def test_every_experiment_is_named_once_and_matches_the_rubric_and_the_scenarios():
    rubric_checks = {c for level in load_section()["levels"] for crit in level.get("criteria", []) for c in crit["checks"]}
    assert set(EXPERIMENTS) == rubric_checks == set(SCENARIO_OF)
    assert {e.scenario for e in EXPERIMENTS.values()} | {"reference"} == set(SCENARIOS)
    for code, rule in rules().items():
        assert rule["check"] in EXPERIMENTS, code
    assert resolve("lock-release") == "lock-released-on-exit" and resolve("nonsense") is None


def test_every_code_of_every_experiment_has_an_example():
    codes = {code for e in EXPERIMENTS.values() for code in e.codes}
    assert codes == set(EXAMPLES) == set(rules())


def test_the_table_names_each_check_module_under_its_own_id():
    """Every module of checks/ with a `check` function and an ID is in MODULE_OF under that ID (the registry
    imports it only to judge, so a module missing from the table would never judge)."""
    import ast
    from pathlib import Path

    import clirace.checks

    found = {}
    for path in Path(clirace.checks.__path__[0]).glob("*.py"):
        body = ast.parse(path.read_text()).body
        ids = [node.value.value for node in body if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant)
               and [getattr(t, "id", None) for t in node.targets] == ["ID"]]
        if ids and any(isinstance(node, ast.FunctionDef) and node.name == "check" for node in body):
            found[ids[0]] = path.stem
    assert found == MODULE_OF
    assert all(check_function(check_id).__module__ == f"clirace.checks.{MODULE_OF[check_id]}" for check_id in MODULE_OF)


def test_a_table_entry_naming_another_checks_module_is_refused(monkeypatch):
    monkeypatch.setitem(MODULE_OF, "counter", "keys")
    with pytest.raises(InternalError, match="'counter' names clirace.checks.keys, whose ID is 'keys'"):
        EXPERIMENTS["counter"].judge(EXAMPLES["CR101"]())


@pytest.mark.parametrize("check_id,code", [(e.check, c) for e in EXPERIMENTS.values() for c in e.codes])
def test_every_code_is_reachable_from_its_own_check(check_id, code):
    verdict = EXPERIMENTS[check_id].judge(EXAMPLES[code]())
    assert code in [f.code for f in verdict.findings], verdict


def test_scenarios_record_and_checks_judge():
    """The layering of issue 8: scenarios never import the judging modules, checks never read the spec."""
    import re
    from pathlib import Path

    from clirace.scenarios import workloads
    from clirace.spec import configfile
    src = Path(__file__).resolve().parents[2] / "src" / "clirace"
    for module in (src / "scenarios").glob("*.py"):
        imports = re.findall(r"^from \.\.(\w+) import|^from \.\. import (.+)$", module.read_text(), re.M)
        names = {n.strip() for pair in imports for part in pair for n in part.split(",") if n.strip()}
        assert not names & {"lockerror", "configfile", "rubric", "findings", "checks"}, (module.name, names)
    for module in (src / "checks").glob("*.py"):
        assert "history.spec" not in module.read_text() and "from ..spec" not in module.read_text(), module.name
    assert not re.search(r"facts\[", "".join(p.read_text() for p in src.rglob("*.py")))
    assert workloads.CONFIG_CAP == configfile.MAX_BYTES


def test_an_advice_only_findings_replay_runs_the_experiment_that_made_its_trial():
    from clirace.checks.registry import ADVICE_ONLY, EXPERIMENTS, MAKES_TRIAL, replayed_by
    from clirace.history import RECORDS
    assert set(MAKES_TRIAL) == set(RECORDS) - {"alone", "not-run"}
    assert all(check in EXPERIMENTS and check not in ADVICE_ONLY for check in MAKES_TRIAL.values())
    assert replayed_by("s58-advice", "lock-conflict: contender while the lock is held (round 1)") == "lock-excludes"
    assert replayed_by("s58-advice", "alone: counter#0 (round 1)") is None  # the run's own --only, if any
    assert replayed_by("hazards", "keys: keys#1 (round 2 amplified)") == "hazards"
