"""Session isolation and atomic config checks on literal histories."""
import dataclasses
import json

from clirace.checks import atomic_config, session
from clirace.history import (
    ConfigSampled,
    FileOp,
    KillPoint,
    KillPointsFound,
    NotRun,
    OutputRun,
    Sample,
    SessionRun,
    WriterKilled,
)
from clirace.history.vocab import EventKind

from .histories import event, history, inv


def wrote(path):
    return FileOp(pid=1, call="openat", paths=(path,), ok=True, flags=("O_CREAT", "O_WRONLY"), writes=True)


def session_trial(with_ids, writes, observed=True, produced=None, invocations=None):
    """run-N and again-N carry the session id sessN (with ids); paths are under the sandbox /sb."""
    runs = {label: OutputRun(f"m{label.split('-')[1]}", f"/o{label}", f"sess{label.split('-')[1]}" if with_ids else "",
                             (produced or {}).get(label, f"m{label.split('-')[1]}"))
            for label in writes}
    traces = {label: tuple(wrote(p) for p in paths) for label, paths in writes.items()} if observed else {}
    return SessionRun(name="with" if with_ids else "without",
                      invocations=invocations or tuple(inv(label) for label in writes),
                      with_ids=with_ids, runs=runs, temp_dirs=("/sb/tmp",), traced=observed, traces=traces,
                      sandbox="/sb")


def twice(paths):
    """The same session ids run twice: {N: (first path, again path)} -> run-N and again-N writes."""
    return {**{f"run-{n}": [first] for n, (first, _) in paths.items()},
            **{f"again-{n}": [again] for n, (_, again) in paths.items()}}


def test_session_paths_with_own_ids_pass():
    h = history(session_trial(True, {"run-0": ["/sb/tmp/t/sess0/r"], "run-1": ["/sb/tmp/t/sess1/r"]}),
                session_trial(False, {"run-0": ["/sb/tmp/t/a/r"], "run-1": ["/sb/tmp/t/b/r"]}))
    v = session.check(h)
    assert v.status == "pass" and "by the id spelt in the path" in v.summary


def test_a_hashed_namespace_found_again_by_the_same_id_passes():
    h = history(session_trial(True, twice({0: ("/sb/tmp/t/s-aa/r", "/sb/tmp/t/s-aa/r.tmp"),
                                           1: ("/sb/tmp/t/s-bb/r", "/sb/tmp/t/s-bb/r")})),
                session_trial(False, {"run-0": ["/sb/tmp/t/run-c/r"], "run-1": ["/sb/tmp/t/run-d/r"]}))
    v = session.check(h)
    assert v.status == "pass", v
    assert "2 session(s) by a folder or name prefix of their own that the same id wrote in again" in v.summary


def test_a_file_name_that_starts_with_a_hash_of_the_id_is_a_namespace_and_mkstemp_alone_is_not():
    prefixed = twice({0: ("/sb/tmp/tool-aa-r1.tmp", "/sb/tmp/tool-aa-r2.tmp"),
                      1: ("/sb/tmp/tool-bb-r3.tmp", "/sb/tmp/tool-bb-r4.tmp")})
    assert session.check(history(session_trial(True, prefixed), session_trial(False, {"run-0": []}))).status == "pass"
    random = twice({0: ("/sb/tmp/tmpa1", "/sb/tmp/tmpb2"), 1: ("/sb/tmp/tmpc3", "/sb/tmp/tmpd4")})
    v = session.check(history(session_trial(True, random), session_trial(False, {"run-0": []})))
    assert [f.code for f in v.findings] == ["CR501", "CR501"]


def test_session_id_ignored_lands_elsewhere_the_second_time():
    h = history(session_trial(True, twice({0: ("/sb/tmp/t/r1/x", "/sb/tmp/t/r2/x"),
                                           1: ("/sb/tmp/t/r3/x", "/sb/tmp/t/r4/x")})),
                session_trial(False, {"run-0": [], "run-1": []}))
    v = session.check(h)
    assert [f.code for f in v.findings] == ["CR501", "CR501"]
    first = v.findings[0]
    assert first.args["path"] == "{sandbox}/tmp/t/r1/x" and first.args["again_path"] == "{sandbox}/tmp/t/r2/x"
    assert "/sb/" not in first.message()


def test_a_shared_path_is_shared_whatever_the_id():
    h = history(session_trial(True, twice({0: ("/sb/tmp/t/x", "/sb/tmp/t/x"), 1: ("/sb/tmp/t/x", "/sb/tmp/t/x")})),
                session_trial(False, {"run-0": [], "run-1": []}))
    v = session.check(h)
    assert [f.code for f in v.findings] == ["CR502"]
    assert v.findings[0].args["path"] == "{sandbox}/tmp/t/x"


def test_a_session_path_written_by_runs_without_an_id_is_shared():
    h = history(session_trial(True, twice({0: ("/sb/tmp/t/default/x", "/sb/tmp/t/default/x"),
                                           1: ("/sb/tmp/t/s1/x", "/sb/tmp/t/s1/x")})),
                session_trial(False, {"run-0": ["/sb/tmp/t/default/x"]}))
    assert {f.code for f in session.check(h).findings} == {"CR505"}


def test_without_a_second_run_of_the_id_a_path_without_it_is_undecided():
    # A history from before ids ran twice: the literal id is the only evidence it holds.
    h = history(session_trial(True, {"run-0": ["/sb/tmp/t/x/r"], "run-1": ["/sb/tmp/t/sess1/r"]}),
                session_trial(False, {"run-0": [], "run-1": []}))
    v = session.check(h)
    assert v.status == "unknown" and not v.findings and "twice" in v.summary


def test_a_run_killed_at_its_deadline_is_unknown_not_a_failed_session_run():
    writes = twice({0: ("/sb/tmp/t/s-a/r", "/sb/tmp/t/s-a/r"), 1: ("/sb/tmp/t/s-b/r", "/sb/tmp/t/s-b/r")})
    killed_run = (*(inv(label) for label in writes if label != "again-1"),
                  inv("again-1", None, timed_out=True, ended=10.0))
    h = history(session_trial(True, writes, invocations=killed_run), session_trial(False, {"run-0": []}))
    v = session.check(h)
    assert v.status == "unknown" and not v.findings and "deadline" in v.summary


def test_a_fixed_lock_outside_the_sandbox_fails_with_its_path_named():
    link = FileOp(pid=1, call="link", paths=("/x/tool.1", "/x/tool.lock"), ok=True, lock=True)
    trial = dataclasses.replace(session_trial(True, twice({0: ("/sb/tmp/t/sess0/r", "/sb/tmp/t/sess0/r"),
                                                           1: ("/sb/tmp/t/sess1/r", "/sb/tmp/t/sess1/r")})))
    trial = dataclasses.replace(trial, traces={label: (*ops, link) for label, ops in trial.traces.items()})
    v = session.check(history(trial, session_trial(False, {"run-0": []})))
    assert v.status == "fail" and [f.code for f in v.findings] == ["CR506"]
    assert v.findings[0].args["path"] == "/x/tool.lock" and v.findings[0].args["how"] == "locked"
    assert "/x/tool.lock" in v.summary
    alone = session_trial(True, {"run-0": ["/sb/tmp/t/sess0/r", "/x/cache-of-one"], "run-1": ["/sb/tmp/t/sess1/r"]})
    assert session.check(history(alone, session_trial(False, {"run-0": []}))).status == "pass"  # one session's only


def serial_outputs(produced):
    """The output workload's two serial reference runs, out-N each giving `produced[N]`."""
    from clirace.history import OutputRound
    return [OutputRound(workload="output#3", serial=True, round=r, sandbox=f"/ref{r}",
                        invocations=tuple(inv(f"out-{n}") for n in range(len(produced))),
                        runs={f"out-{n}": OutputRun(f"m{n}", f"/o{n}", "", text) for n, text in enumerate(produced)})
            for r in (1, 2)]


def test_session_outputs_of_a_tool_that_transforms_its_input_are_compared_with_the_serial_runs():
    # The tool upper-cases its input: no output holds an input's text, so only the reference can judge.
    writes = {"run-0": ["/sb/tmp/t/sess0/r"], "run-1": ["/sb/tmp/t/sess1/r"]}
    right = dataclasses.replace(session_trial(True, writes, produced={"run-0": "M0 io/run-input-0.txt", "run-1": "M1"}),
                                reference="output#3")
    reference_runs = serial_outputs(["M0 io/out-input-0.txt", "M1"])
    v = session.check(history(right, session_trial(False, {"run-0": []}), *reference_runs))
    assert v.status == "pass" and "2 outputs compared with what their input gave run alone" in v.summary
    clobbered = dataclasses.replace(right, runs={**right.runs, "run-1": dataclasses.replace(
        right.runs["run-1"], produced="M0 io/run-input-0.txt")})
    v = session.check(history(clobbered, session_trial(False, {"run-0": []}), *reference_runs))
    assert v.status == "fail" and [f.code for f in v.findings] == ["CR131"]
    # without the reference (an older history), as before: not compared
    v = session.check(history(dataclasses.replace(clobbered, reference=""), session_trial(False, {"run-0": []})))
    assert v.status == "pass" and "outputs not compared" in v.summary


def test_shared_temp_path_without_ids():
    h = history(session_trial(True, {"run-0": [], "run-1": []}),
                session_trial(False, {"run-0": ["/sb/tmp/result"], "run-1": ["/sb/tmp/result"]}))
    assert [f.code for f in session.check(h).findings] == ["CR502"]


def test_session_without_observation_is_not_tested():
    h = history(session_trial(True, {"run-0": []}, observed=False), session_trial(False, {"run-0": []}, observed=False),
                strace=False)
    v = session.check(h)
    assert v.status == "not_tested" and "strace" in v.summary


def test_clobbered_output_fails_even_without_observation():
    h = history(session_trial(True, {"run-0": [], "run-1": []}, observed=False, produced={"run-0": "m1"}),
                session_trial(False, {"run-0": []}, observed=False))
    assert session.check(h).status == "fail"


def killed(after, old='{"a": "1"}', point="its first write to the config file"):
    return WriterKilled(name=point, invocations=(inv("killed-writer", None, signal=9),), point=KillPoint("write", 1, point),
                        key_path="{key}", old=old, after=after, key="k", value="v",
                        events=(event(EventKind.KILL_INJECTED, 0.01, "killed-writer"),))


def sampled(bad=0, samples=500, contents=2):
    torn = (Sample('{"a": ', bad),) if bad else ()
    seen = tuple(Sample(json.dumps({"a": "1", **{f"s{n}": "v" for n in range(n)}}), (samples - bad) // contents)
                 for n in range(contents))
    return ConfigSampled(name="sampled", samples=samples, distinct=(*seen, *torn))


def test_atomic_pass_when_old_or_new_whole():
    h = history(sampled(), killed('{"a": "1"}'), killed('{"a": "1", "k": "v"}', point="its first rename"))
    assert atomic_config.check(h).status == "pass"


def test_atomic_torn_by_kill():
    v = atomic_config.check(history(sampled(), killed("")))
    assert [f.code for f in v.findings] == ["CR602"]


def test_atomic_mixed_content_is_torn():
    v = atomic_config.check(history(sampled(), killed('{"b": "2"}')))
    assert [f.code for f in v.findings] == ["CR602"]


def test_atomic_torn_read():
    assert [f.code for f in atomic_config.check(history(sampled(bad=3))).findings] == ["CR601"]


def test_atomic_without_strace_is_not_tested():
    untestable = NotRun(experiment="atomic-config/kill", why="strace is not available")
    assert atomic_config.check(history(sampled(), untestable, strace=False)).status == "not_tested"


def test_atomic_ignores_the_trace_run_that_found_the_kill_points():
    discovery = KillPointsFound(points=(KillPoint("write", 1, "its first write to the config file"),))
    h = history(sampled(), discovery, killed('{"a": "1"}'))
    assert atomic_config.check(h).status == "pass"


def test_atomic_new_content_may_hold_the_value_wrapped_as_the_spec_writes_it():
    wrapped = killed('{"a": "1", "k": "https://v.example/"}', point="its first rename")
    assert atomic_config.check(history(sampled(), wrapped)).status == "pass"
    assert [f.code for f in atomic_config.check(history(sampled(), killed('{"a": "1", "k": "w"}'))).findings] == ["CR602"]


def test_a_writer_that_wrote_nothing_near_its_config_is_undecided():
    v = atomic_config.check(history(sampled(), KillPointsFound(config_dir="/sb/home/.config/tool")))
    assert v.status == "unknown" and "never wrote or renamed anything" in v.summary


def test_a_vanished_config_is_torn_for_a_reader():
    v = atomic_config.check(history(ConfigSampled(samples=10, missing=2, distinct=(Sample('{"a": "1"}', 8),))))
    assert [f.code for f in v.findings] == ["CR601"] and v.findings[0].args["bad"] == 2


def test_a_kill_that_landed_elsewhere_is_undecided_never_a_pass():
    """strace counts when=N per thread: in a multi-threaded writer the kill can land on another thread's write,
    leaving the config whole. The kill log says where it landed; a whole file after a misplaced kill is no pass."""
    log = ('7 write(4</sb/home/.config/t/audit.log>, "x", 1) = 1\n'
           '7 write(4</sb/home/.config/t/audit.log>, "x", 1) = ?\n7 +++ killed by SIGKILL +++\n')
    meant = WriterKilled(name="w", invocations=(inv("killed-writer", None, signal=9),),
                         point=KillPoint("write", 2, "write #2 to config.json itself", "/x/config.json"),
                         config_path="/sb/home/.config/t/config.json", old='{"a": "1"}', after='{"a": "1"}',
                         key="k", value="v", kill_log=log)
    v = atomic_config.check(history(sampled(), meant))
    assert v.status == "unknown" and "landed on write of /sb/home/.config/t/audit.log" in v.summary
    right = log.replace("audit.log", "config.json")
    assert atomic_config.check(history(sampled(), dataclasses.replace(meant, kill_log=right))).status == "pass"


def test_a_kill_on_the_right_call_and_path_but_not_the_count_meant_is_undecided():
    """The point is the 2nd write to config.json; the log shows the kill on the 1st (another thread's count, an
    earlier exec's): a whole file then says nothing about the 2nd."""
    log = '7 write(4</sb/home/.config/t/config.json>, "x", 1) = ?\n7 +++ killed by SIGKILL +++\n'
    meant = WriterKilled(name="w", invocations=(inv("killed-writer", None, signal=9),),
                         point=KillPoint("write", 2, "write #2 to config.json itself", "/x/config.json"),
                         config_path="/sb/home/.config/t/config.json", old='{"a": "1"}', after='{"a": "1"}',
                         key="k", value="v", kill_log=log)
    v = atomic_config.check(history(sampled(), meant))
    assert v.status == "unknown" and "landed on write of /sb/home/.config/t/config.json (its #1" in v.summary, v
    second = '7 write(4</sb/home/.config/t/config.json>, "x", 1) = 1\n' + log
    assert atomic_config.check(history(sampled(), dataclasses.replace(meant, kill_log=second))).status == "pass"


def test_clirace_s_own_deadline_kill_is_no_landed_kill():
    """A writer that hung was ended by clirace at its deadline: SIGKILL too, "+++ killed by SIGKILL +++" in the
    log too, but no injected kill hit it, so the point was never tried."""
    hung = dataclasses.replace(killed('{"a": "1"}'), events=(),
                               invocations=(inv("killed-writer", None, signal=9, timed_out=True),))
    v = atomic_config.check(history(sampled(), KillPointsFound(points=(hung.point,)), hung))
    assert v.status == "unknown" and "no kill landed" in v.summary, v


def test_atomic_needs_enough_samples_and_a_config_seen_to_change():
    for thin in (sampled(samples=5), sampled(contents=1)):
        v = atomic_config.check(history(thin, killed('{"a": "1"}')))
        assert v.status == "unknown", thin
        assert f"at least {atomic_config.MIN_SAMPLES} samples and the config seen to change" in v.summary


def test_atomic_needs_a_landed_kill_on_each_kind_of_kill_point_found():
    rename = KillPoint("rename", 1, "rename #1 onto config.json")
    found = KillPointsFound(points=(KillPoint("write", 1, "its first write to the config file"), rename))
    never = WriterKilled(name="r", invocations=(inv("killed-writer", 0),), point=rename, key_path="{key}",
                         old='{"a": "1"}', after='{"a": "1", "k": "v"}', key="k", value="v")
    v = atomic_config.check(history(sampled(), found, killed('{"a": "1"}'), never))
    assert v.status == "unknown" and "no kill landed on a rename onto the config" in v.summary
    assert "kill points never reached: rename #1 onto config.json" in v.summary


def test_a_writer_the_kill_never_reaches_is_undecided_not_passed():
    point = KillPoint("write", 1, "its first write to the config file")
    never = WriterKilled(name="w", invocations=(inv("killed-writer", 0),), point=point, key_path="{key}",
                         old='{"a": "1"}', after='{"a": "1", "k": "v"}', key="k", value="v")
    v = atomic_config.check(history(sampled(), KillPointsFound(points=(point,)), never))
    assert v.status == "unknown" and "no kill landed on a write to a temp file beside it" in v.summary


def test_a_config_too_large_to_judge_after_a_kill_decides_nothing():
    v = atomic_config.check(history(sampled(), killed('{"a": "' + "x" * (1 << 20) + '"}')))
    assert v.status == "unknown" and "too large to judge" in v.summary


def test_a_pass_names_the_evidence_it_passed_on():
    v = atomic_config.check(history(sampled(), killed('{"a": "1"}')))
    assert v.status == "pass"
    assert "500 samples during parallel writes (2 distinct contents)" in v.summary
    assert "a kill landed on each kind of kill point (a write to a temp file beside it)" in v.summary
