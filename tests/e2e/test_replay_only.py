"""Every replay reproduces: the command printed with a finding, run as printed, gives the same finding in the
same trial. hazards is judged from the workloads' traced rounds, so `--only hazards` must run them."""
import functools
import json
import re
import shlex
import shutil
from pathlib import Path

import pytest

from clirace.checks import REGISTRY
from clirace.checks.registry import EXPERIMENTS
from clirace.history import History
from clirace.run import observe

from ..conftest import FIXTURES, check_json, run_clirace
from .conftest import shared_group
from .test_adversarial import OPTIONS as ADVERSARIAL_OPTIONS
from .test_levels import OPTIONS as LEVEL_OPTIONS

COUNTER_ONLY = """version: 1
tool:
  command: ["{{python}}", "{tool}"]
workloads:
  - kind: counter
    run: ["counter", "incr"]
    read: ["counter", "get"]
"""


@pytest.mark.e2e
@pytest.mark.timeout(90)
@pytest.mark.skipif(not observe.available()[0], reason="hazards are read from strace's traces")
def test_the_printed_replay_of_a_hazard_reproduces_it(tmp_path):
    spec = tmp_path / "level0-counter.clirace.yaml"
    spec.write_text(COUNTER_ONLY.format(tool=FIXTURES / "level0" / "tool.py"))  # level0: no lock at all
    first = check_json(spec, "--rounds", "2", "--parallel", "3", "--seed", "3")
    (hazard,) = [f for f in first["findings"] if f["code"] == "CR702"]
    replay = shlex.split(hazard["evidence"]["replay"])
    assert replay[:2] == ["clirace", "check"] and replay[-2:] == ["--only", "hazards"], replay
    proc = run_clirace(*replay[1:], "--format", "json")  # as printed, after the program name
    assert proc.returncode in (0, 1), proc.stderr
    again = [f for f in json.loads(proc.stdout)["findings"] if f["code"] == "CR702"]
    assert [f["evidence"]["trial"] for f in again] == [hazard["evidence"]["trial"]], again


# -------------------------------------------------------------------------- every registered check, replayed
# (fixture, the options of its first run, the checks whose printed replay is run). The first run is a whole check
# where another test makes that very run anyway (test_levels, test_adversarial: shared_check makes it once for
# both), else a few checks together, so that each replay runs fewer checks than the run that printed it: its seed
# must still lead it to the same trial, with the same commands and arguments. The replay of an advice-only finding
# (s58-advice) runs the check whose experiment made its trial.
NO_REDIS = pytest.mark.skipif(shutil.which("redis-server") is None, reason="redis-server is not installed")
FIRST_RUNS = {
    "level0": (LEVEL_OPTIONS, ("counter", "keys", "claim", "output", "hazards", "lock-excludes",
                               "lock-error-structured", "atomic-config-writes")),
    "level1": (LEVEL_OPTIONS, ("lock-released-on-exit",)),
    "adversarial/lock-wait-forever": (ADVERSARIAL_OPTIONS["lock-wait-forever"], ("lock-wait-timeout", "s58-advice")),
    "adversarial/session-id-ignored": (ADVERSARIAL_OPTIONS["session-id-ignored"], ("session-isolation",)),
    "servers/redis-getset": (("--seed", "5", "--only", "server-hazards", "--only", "counter"), ("server-hazards",)),
    # A tool that never waits: its lock-wait-timeout is judged on the lock-conflict experiment (issue 25 item 9).
    "adversarial/never-waits-plain": (("--seed", "5", "--only", "lock-error-structured", "--only", "lock-wait-timeout"),
                                      ("lock-wait-timeout", "lock-error-structured")),
}
NEVER_WAITS = "adversarial/never-waits-plain"
# Under pytest-xdist (`--dist loadgroup`) the replays of one fixture stay in one worker, with the other tests that read
# its first run, so that it is made once; the fixtures themselves spread over the workers (all together they are
# some 400 s of one core).
REPLAYS = [pytest.param(fixture, check, id=check + ("-never-waits" if fixture == NEVER_WAITS else ""),
                        marks=[shared_group(fixture)]
                        + ([NO_REDIS] if fixture.startswith("servers/redis") else []))
           for fixture, (_options, checks) in FIRST_RUNS.items() for check in checks]
# A trial whose outcome does not rest on timing first: a rendezvous round, then the lock and kill experiments.
_DETERMINED = ("at a rendezvous", "lock-", "writer-killed", "session:")


def _determined(trial: str) -> int:
    """How surely a trial repeats its outcome: the index of the first word of _DETERMINED it has (lower: surer)."""
    return next((n for n, word in enumerate(_DETERMINED) if word in trial), len(_DETERMINED))


_RUN_FOLDER = re.compile(r"/[^\s'\"]*clirace-\d+-[0-9a-f]+(?:/[^/\s'\"]+)?")


def test_every_registered_check_has_a_replay_test():
    assert sorted(check for fixture, (_options, checks) in FIRST_RUNS.items() for check in checks
                  if fixture != NEVER_WAITS) == sorted(REGISTRY)
    assert "never_waits: true" in (FIXTURES / NEVER_WAITS / "clirace.yaml").read_text()


@pytest.fixture
def first_runs(shared_check):
    """Each fixture's first run, made once for all its checks (and the other tests that read it): (the JSON result,
    the saved history)."""
    def first(fixture: str) -> tuple[dict, History]:
        options, _checks = FIRST_RUNS[fixture]
        run = shared_check(FIXTURES / fixture / "clirace.yaml", *options, timeout=240)
        return run.result, _load(run.history)
    return first


@functools.cache
def _load(history: Path) -> History:
    return History.load(history)


def _trial(history: History, name: str):
    """The trial an evidence names ("keys: keys#1 (round 3 at a rendezvous)"), and its commands, run folders
    aside (each run has its own)."""
    for trial in history.trials:
        if name.startswith(f"{trial.KIND}: {trial.name} (round {trial.round + 1}"):
            return [(i.label, _RUN_FOLDER.sub("{run}", " ".join(i.argv))) for i in trial.invocations]
    return None


@pytest.mark.timeout(300)
@pytest.mark.parametrize("fixture, check", REPLAYS)
def test_the_printed_replay_of_each_check_runs_the_same_trial_and_finds_it_again(first_runs, fixture, check, tmp_path,
                                                                               request):
    # its fixture's group (REPLAYS) is in its id under --dist loadgroup (tests/conftest.py), so one worker runs it
    assert request.node.nodeid.endswith(f"@check-{fixture}") == bool(request.config.getoption("loadgroup", False))
    result, history = first_runs(fixture)
    mine = [f for f in result["findings"] if f["code"] in EXPERIMENTS[check].codes]
    assert mine, f"the first run of {fixture} found nothing of {check}"
    codes = [f["code"] for f in mine]
    finding = min(mine, key=lambda f: (_determined(f["evidence"]["trial"]), -codes.count(f["code"])))
    replay = shlex.split(finding["evidence"]["replay"])
    saved = tmp_path / "again.json"
    proc = run_clirace(*replay[1:], "--format", "json", "--history", saved, timeout=240)
    assert proc.returncode in (0, 1), proc.stderr
    trial = finding["evidence"]["trial"]
    before, after = _trial(history, trial), _trial(History.load(saved), trial)
    assert before and after == before, f"{trial}: the replay ran {after}, the first run {before}"
    again = {(f["code"], f["evidence"]["trial"]) for f in json.loads(proc.stdout)["findings"]}
    if _determined(trial) < len(_DETERMINED):
        assert (finding["code"], trial) in again, (finding["code"], trial, sorted(again))
    else:  # a plain or amplified round of an output workload: its clash is likely in each round, certain in none
        workload = trial.split(" (round")[0]
        assert any(code == finding["code"] and where.startswith(workload) for code, where in again), \
            (finding["code"], workload, sorted(again))
