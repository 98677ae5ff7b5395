"""The lock experiments judged once, on literal histories: every key an invocation that exited 0 wrote is read back
(silent loss is corruption, an unreadable key is unknown), a contender that got past the lock in any experiment
fails lock-excludes, a contender that asks on its stdin is a hang, and a lock that outlives its command (a
leftover process refused the next one) fails lock-released-on-exit, not the spec."""
import dataclasses

from clirace.checks import lock_excludes, lock_release, lock_structured, lock_wait, reference
from clirace.history import Alone, ConfigSnapshot, KeysRound, Leftover, LockConflict, LockWait
from clirace.history.vocab import ConfigFormat, EventKind, HoldMode

from .histories import event, history, inv, saveable
from .test_lock_checks import ENVELOPE, all_released, conflict, release, waited

OK = '{"ok": true}'


def config(text):
    return ConfigSnapshot("/sb/c.json", ConfigFormat.JSON, "{key}", text)


def with_effects(trial, text, **effects):
    return dataclasses.replace(trial, effects=effects, effects_config=config(text), sandbox="/sb")


# --- silent loss -------------------------------------------------------------------------------------------------

def test_a_contender_answering_a_busy_lock_with_success_and_no_effect_is_silent_loss_not_cr201():
    noop = with_effects(conflict(inv("contender", 0, stdout=OK)), '{"theme": "dark"}', contender=("k1", "v1"))
    v = lock_excludes.check(history(noop))
    assert v.status == "fail" and [f.code for f in v.findings] == ["CR209"]
    assert v.findings[0].severity == "corruption"
    assert v.findings[0].message() == ("contender exited 0 while the lock was held, but what it wrote was not there "
                                       "once the holder had ended: k1 is missing")
    assert "take an exclusive lock before reading" not in v.findings[0].rule["fix"].lower()
    assert [f.code for f in lock_structured.check(history(noop)).findings] == ["CR209"]


def test_a_contender_that_ran_while_held_and_kept_its_key_is_cr201():
    ran = with_effects(conflict(inv("contender", 0)), '{"k1": "v1"}', contender=("k1", "v1"))
    assert [f.code for f in lock_excludes.check(history(ran)).findings] == ["CR201"]


def test_an_effect_that_cannot_be_read_back_is_unknown_never_lost():
    no_reader = dataclasses.replace(conflict(inv("contender", 0, stdout=OK)), effects={"contender": ("k1", "v1")})
    assert [f.code for f in lock_excludes.check(history(no_reader)).findings] == ["CR201"]  # as before: it ran
    refused_read = dataclasses.replace(
        no_reader, invocations=(*no_reader.invocations, inv("get-contender", 4, stdout=ENVELOPE)))
    assert [f.code for f in lock_excludes.check(history(refused_read)).findings] == ["CR201"]
    gone = dataclasses.replace(no_reader, invocations=(*no_reader.invocations, inv("get-contender", 1)))
    assert [f.code for f in lock_excludes.check(history(gone)).findings] == ["CR209"]  # the tool's answer: not there


def test_a_refused_contender_and_a_holder_that_kept_their_keys_pass_and_say_so():
    fine = with_effects(conflict(inv("contender", 4, stdout=ENVELOPE), retries=[inv("retry-1", 0)]),
                        '{"k0": "v0", "k2": "v2"}', holder=("k0", "v0"), contender=("k1", "v1"), **{"retry-1": ("k2", "v2")})
    fine = dataclasses.replace(fine, invocations=(inv("holder", 0), *fine.invocations))
    v = lock_excludes.check(history(fine))
    assert v.status == "pass" and "every key written by an invocation that exited 0 was there afterwards (2)" in v.summary


def test_the_holders_lost_write_fails_lock_excludes_whichever_experiment_shows_it():
    trial = with_effects(waited(4, 1050), '{"k0": "v0"}', holder=("k9", "v9"), alone=("k0", "v0"))
    trial = dataclasses.replace(trial, invocations=(*trial.invocations, inv("holder", 0)))
    v = lock_excludes.check(history(conflict(inv("contender", 4, stdout=ENVELOPE)), trial))
    assert v.status == "fail" and [f.code for f in v.findings] == ["CR209"]
    assert v.findings[0].args["label"] == "holder"
    released = with_effects(release("normal", 0, 0), '{"k0": "v0"}', holder=("k0", "v0"), next=("k1", "v1"))
    v = lock_excludes.check(history(conflict(inv("contender", 4, stdout=ENVELOPE)), released))
    assert [f.args["label"] for f in v.findings] == ["next"]


# --- one exclusion property, judged on every experiment ----------------------------------------------------------

def test_a_contender_past_the_lock_in_the_lock_wait_experiment_fails_lock_excludes():
    stolen = dataclasses.replace(waited(0, 620, stdout="saved"), events=(event(EventKind.HELD, 0.0),))
    h = history(conflict(inv("contender", 4, stdout=ENVELOPE)), stolen)
    v = lock_excludes.check(h)
    assert v.status == "fail" and [f.code for f in v.findings] == ["CR201"]
    assert "ran and exited 0 with --lock-timeout 1000" in v.summary
    assert [f.code for f in lock_wait.check(h).findings] == ["CR201"]
    lost = with_effects(stolen, '{"k9": "v9"}', contender=("k1", "v1"))
    v = lock_excludes.check(history(conflict(inv("contender", 4, stdout=ENVELOPE)), lost))
    assert [f.code for f in v.findings] == ["CR209"] and "(with --lock-timeout 1000)" in v.summary
    assert [f.code for f in lock_wait.check(history(lost)).findings] == ["CR209"]


def test_a_lock_wait_contender_reaching_the_parked_state_fails_both():
    reached = dataclasses.replace(waited(None, 900), events=(event(EventKind.HELD, 0.0),
                                                             event(EventKind.REACHED_STATE, 0.5, "contender")))
    reached = dataclasses.replace(reached, invocations=(inv("alone", 0), inv("contender", None, signal=15, ended=0.9)))
    h = history(conflict(inv("contender", 4, stdout=ENVELOPE)), reached)
    assert "opened the state file the holder was reading" in lock_excludes.check(h).summary
    assert [f.code for f in lock_wait.check(h).findings] == ["CR201"]


# --- tools that ask ------------------------------------------------------------------------------------------------

def test_a_contender_asking_on_its_stdin_is_judged_like_one_that_hangs():
    trial = conflict(inv("contender", 1, stdout="lock held, overwrite? [y/N] ", stderr="aborted", ended=0.4))
    trial = dataclasses.replace(trial, events=(*trial.events, event(EventKind.ASKED, 0.3, "contender",
                                                                    "lock held, overwrite? [y/N]")))
    h = history(trial)
    v = lock_excludes.check(h)
    assert v.status == "pass" and "stopped to ask on its stdin" in v.summary
    v = lock_structured.check(h)
    assert [f.code for f in v.findings] == ["CR210"] and "lock held, overwrite? [y/N]" in v.summary


# --- the park and a tool that locks its own state file --------------------------------------------------------------

def test_a_contender_seen_in_its_lock_call_on_the_parked_file_waited():
    trial = conflict(inv("contender", None, signal=15, ended=3.6))
    trial = dataclasses.replace(trial, window=1.1, follow=2.0, events=(
        *trial.events, event(EventKind.BLOCKED_ON_LOCK, 3.5, "contender", "it held ... open and waited in fcntl")))
    trial = dataclasses.replace(trial, watched=__import__("clirace.history").history.Watched(
        seconds=2.0, cpu_seconds=0.0, states=("S",), sleeping_in=("fcntl_setlk",)))
    h = history(trial)
    v = lock_excludes.check(h)
    assert v.status == "pass" and "waited in fcntl" in v.summary, v.summary
    assert [f.code for f in lock_structured.check(h).findings] == ["CR207"]


# --- a lock that outlives its command -------------------------------------------------------------------------------

LEFT = Leftover(pid=4242, parent=1, age=0.4, left_by="set-0", command="python3 tool.py config set k0 v0",
                locks=("FLOCK WRITE /sb/state/lock",), outlived=0.35, refused="set-1", waited=0.02,
                ended_by_clirace=True)


def serial_keys(*, rerun_ok=True, leftover=LEFT):
    invs = (inv("set-0"), inv("refused-set-1", 4, stdout=ENVELOPE), inv("set-1", 0 if rerun_ok else 4,
                                                                         stdout="" if rerun_ok else ENVELOPE))
    return KeysRound(name="keys", workload="keys", serial=True, sandbox="/sb", invocations=invs,
                     keys={"set-0": ("k0", "v0"), "set-1": ("k1", "v1")}, leftovers=(leftover,),
                     config=ConfigSnapshot("/sb/c.json", ConfigFormat.JSON, "{key}", '{"k0": "v0", "k1": "v1"}'))


def test_a_serial_command_refused_by_its_predecessors_leftover_is_a_finding_not_a_spec_error():
    h = history(serial_keys(), *all_released())
    assert reference.problems(h) == []
    v = lock_release.check(h)
    assert v.status == "fail" and [f.code for f in v.findings if not f.advisory] == ["CR306"]
    said = v.findings[0].message()
    assert "after set-0 exited, a process it left running (pid 4242, parent 1" in said
    assert "FLOCK WRITE {sandbox}/state/lock" in said and "set-1 was refused (exit 4" in said
    assert "clirace ended it" in said


def test_a_refusal_that_shows_no_lock_is_not_a_lock_that_outlived_its_command():
    """Issue 25 item 8: CR306 rests on a lock, never on sequence alone: the refusal carries a lock error, or /proc
    showed the leftover holding a lock."""
    no_lock = dataclasses.replace(LEFT, locks=())
    plain = serial_keys(leftover=no_lock)
    plain = dataclasses.replace(plain, invocations=tuple(
        inv("refused-set-1", 1, stderr="error: disk quota exceeded") if i.label == "refused-set-1" else i
        for i in plain.invocations))
    v = lock_release.check(history(plain, *all_released()))
    assert "CR306" not in [f.code for f in v.findings], v
    said = dataclasses.replace(plain, invocations=tuple(
        inv("refused-set-1", 1, stderr="error: database is locked") if i.label == "refused-set-1" else i
        for i in plain.invocations))
    assert [f.code for f in lock_release.check(history(said, *all_released())).findings if not f.advisory] == ["CR306"]
    assert [f.code for f in lock_release.check(history(serial_keys(leftover=no_lock), *all_released())).findings
            if not f.advisory] == ["CR306"]  # its structured LOCK_HELD says so
    held = dataclasses.replace(plain, leftovers=(LEFT,))
    assert [f.code for f in lock_release.check(history(held, *all_released())).findings
            if not f.advisory] == ["CR306"]  # /proc showed it holding a flock


def test_a_refusal_while_a_leftover_would_not_go_is_undecided_and_one_that_outlasts_it_is_the_specs():
    running = dataclasses.replace(LEFT, locks=(), ended_by_clirace=False, still_running=True, waited=1.0)
    h = history(dataclasses.replace(serial_keys(rerun_ok=False), leftovers=(running,),
                                    invocations=serial_keys().invocations[:1] + (inv("set-1", 4, stdout=ENVELOPE),)),
                *all_released())
    (problem,) = reference.problems(h)
    assert not problem.spec and "whether the tool's own lock, outliving its command, refused it" in problem.message
    assert lock_release.check(h).status == "pass"
    h = history(serial_keys(rerun_ok=False), *all_released())  # refused again once the leftover had gone
    (problem,) = reference.problems(h)
    assert problem.spec and "set-1" in problem.message
    assert lock_release.check(h).status == "pass"


def test_a_leftover_holding_a_lock_before_a_step_is_advice_only():
    settled = dataclasses.replace(all_released()[0], leftovers=(dataclasses.replace(LEFT, refused=""),))
    v = lock_release.check(history(settled, *all_released()[1:]))
    assert v.status == "pass" and "CR307" in [f.code for f in v.findings]


def test_a_contenders_key_not_found_when_it_runs_alone_is_a_spec_error():
    alone = Alone(name="contender", command="contender", sandbox="/sb", invocations=(inv("alone", 0),),
                  effects={"alone": ("k0", "v0")}, effects_config=config('{"other": "v0"}'))
    (problem,) = reference.problems(history(alone))
    assert problem.spec and "does not read what lock.contender's {key} and {value} write" in problem.message


def test_old_histories_without_the_new_fields_still_load():
    from clirace.history import History
    raw = saveable(history(conflict(inv("contender", 4, stdout=ENVELOPE)))).to_json()
    for trial in raw["trials"]:
        for name in ("effects", "effects_config", "leftovers"):
            trial.pop(name)
    loaded = History.from_json(raw)
    assert isinstance(loaded.trials[0], LockConflict) and loaded.trials[0].effects == {}
    assert loaded.trials[0].hold is HoldMode.PARK and isinstance(LockWait(), LockWait)


# --- the spec words: {key} and {value} in the lock commands, and what validate says --------------------------------

SPEC = """
version: 1
tool: {{command: ["{{python}}", "-c", "pass"]}}
{workloads}
lock:
  contender: {contender}
  hold: {{park: {{command: ["set", "h"], fifo: "{{config_home}}/c.json"}}}}
  error_command: {error}
"""
KEYS = 'workloads: [{kind: keys, run: ["set", "{key}", "{value}"], config: {path: "{config_home}/c.json", format: json}}]'


def lock_line(tmp_path, contender='["set", "{key}", "{value}"]', workloads=KEYS, error='["fail"]'):
    from clirace.cli.validate import coverage
    from clirace.spec import load_spec
    path = tmp_path / "spec.yaml"
    path.write_text(SPEC.format(contender=contender, workloads=workloads, error=error))
    return next(c.how for c in coverage(load_spec(path), (False, "off"), servers=False) if c.criterion == "lock-excludes")


def test_validate_says_how_the_lock_commands_effects_are_read_back_or_why_not(tmp_path):
    assert "are read back from {config_home}/c.json (json)" in lock_line(tmp_path)
    assert "no keys workload says how to read it back" in lock_line(
        tmp_path, workloads='workloads: [{kind: counter, run: ["incr"], read: ["get"]}]')
    assert "give lock.contender {key} and {value}" in lock_line(tmp_path, contender='["set", "c", "1"]')


def test_key_and_value_are_lock_command_placeholders_only(tmp_path):
    import pytest

    from clirace.errors import SpecError
    with pytest.raises(SpecError, match=r"unknown placeholder '\{key\}' in lock.error_command"):
        lock_line(tmp_path, error='["fail", "{key}"]')


def test_no_history_carries_a_cr201_beside_a_passed_lock_excludes():
    """One exclusion property, judged once: wherever any check reports CR201, lock-excludes does not pass."""
    from clirace.checks.registry import judge_all

    from .test_registry import EXAMPLES
    stolen = dataclasses.replace(waited(0, 620, stdout="saved"), events=(event(EventKind.HELD, 0.0),))
    histories = [make() for make in EXAMPLES.values()] + [history(conflict(inv("contender", 4, stdout=ENVELOPE)), stolen)]
    for h in histories:
        verdicts = judge_all(h)
        if any(f.code == "CR201" for v in verdicts.values() for f in v.findings):
            assert verdicts["lock-excludes"].status != "pass", verdicts["lock-excludes"]


# --- the change of a contender that writes no key of its own (`config unset theme`) -------------------------------

def _alone(before, after, exit_code=0):
    return Alone(name="contender", round=0, sandbox="/sb", command="contender", invocations=(inv("alone", exit_code),),
                 state_before=config(before), effects_config=config(after))


def _unset_while_held(before, after, holder_argv=None):
    trial = dataclasses.replace(conflict(inv("contender", 0, stdout=OK)), state_before=config(before),
                                effects_config=config(after), sandbox="/sb")
    if holder_argv is not None:
        holder = dataclasses.replace(inv("holder", 0), argv=tuple(holder_argv))
        trial = dataclasses.replace(trial, invocations=(holder, *trial.invocations))
    return trial


def test_a_contender_whose_change_made_alone_is_undone_while_the_lock_was_held_is_silent_loss():
    alone = [_alone('{"theme": "dark"}', '{}'), _alone('{"theme": "dark"}', '{}')]
    undone = _unset_while_held('{"theme": "dark"}', '{"theme": "dark", "k0": "v0"}')
    v = lock_excludes.check(history(*alone, undone))
    assert v.status == "fail" and [f.code for f in v.findings] == ["CR209"]
    assert v.findings[0].severity == "corruption" and v.findings[0].args["label"] == "contender"
    kept = _unset_while_held('{"theme": "dark"}', '{"k0": "v0"}')
    assert [f.code for f in lock_excludes.check(history(*alone, kept)).findings] == ["CR201"]


def test_a_change_that_cannot_be_told_is_never_a_loss():
    undone = _unset_while_held('{"theme": "dark"}', '{"theme": "dark"}')
    # runs alone that disagree (a time stamp, a random id): that key is not judged
    volatile = [_alone('{"at": 1}', '{"at": 2}'), _alone('{"at": 1}', '{"at": 3}')]
    assert [f.code for f in lock_excludes.check(history(*volatile, undone)).findings] == ["CR201"]
    # the state held the change already before the contender ran: nothing to see
    alone = [_alone('{"theme": "dark"}', '{}'), _alone('{"theme": "dark"}', '{}')]
    already = _unset_while_held('{}', '{"theme": "dark"}')
    assert [f.code for f in lock_excludes.check(history(*alone, already)).findings] == ["CR201"]
    # a holder whose own command writes that key may have written it after the contender, as it would serially
    rewritten = _unset_while_held('{"theme": "dark"}', '{"theme": "dark"}', ["tool", "config", "set", "theme", "dark"])
    assert [f.code for f in lock_excludes.check(history(*alone, rewritten)).findings] == ["CR201"]
    # an unreadable config, or a list that others append to: unknown
    torn = _unset_while_held('{"theme": "dark"}', '{"theme": ')
    assert [f.code for f in lock_excludes.check(history(*alone, torn)).findings] == ["CR201"]
    rows = [_alone('{"items": [1]}', '{"items": [1, 2]}')] * 2
    assert [f.code for f in lock_excludes.check(history(*rows, _unset_while_held('{"items": [1]}', '{"items": [1]}')))
            .findings] == ["CR201"]


def test_silent_loss_in_a_conflict_trial_is_corruption_even_when_the_two_runs_disagree():
    # The first run's contender exited 0 and lost its key; the second (the clock decided the first) was refused:
    # flaky, so the conflict decides nothing, but the loss was seen and is corruption.
    lost = with_effects(conflict(inv("contender", 0, stdout=OK)), '{"theme": "dark"}', contender=("k1", "v1"))
    refused = dataclasses.replace(conflict(inv("contender", 4, stdout=ENVELOPE)), round=1)
    v = lock_excludes.check(history(lost, refused))
    assert [f.code for f in v.findings] == ["CR209"] and v.findings[0].severity == "corruption"
