"""Workload checks on literal histories: each invariant, its finding code, and the rates over rounds."""
from clirace.checks import claim, counter, keys, output

from .histories import history, inv, trial


def counter_trial(start, final, oks, round_=0):
    invs = [inv(f"inc-{i}", 0 if ok else 4) for i, ok in enumerate(oks)]
    return trial("counter", round_=round_, invocations=invs, start=start, final=final)


def test_counter_passes_when_every_success_counted():
    v = counter.check(history(counter_trial(0, 2, [True, True, False])))
    assert v.status == "pass" and not v.findings


def test_counter_lost_increment():
    v = counter.check(history(counter_trial(5, 6, [True, True, True])))
    assert v.status == "fail"
    assert [f.code for f in v.findings] == ["CR101"]
    assert v.findings[0].args["lost"] == 2


def test_counter_phantom_increment():
    v = counter.check(history(counter_trial(0, 3, [True, False, False])))
    assert [f.code for f in v.findings] == ["CR102"]


def test_counter_reports_nondeterministic_rounds():
    v = counter.check(history(counter_trial(0, 2, [True, True]), counter_trial(0, 1, [True, True], round_=1)))
    assert v.status == "fail"
    assert "1 of 2 rounds" in v.summary and "non-deterministic" in v.summary


def test_counter_error_round_is_unknown_not_pass():
    broken = trial("counter", start=0, final=0)
    broken.error = "setup command failed"
    v = counter.check(history(broken))
    assert v.status == "unknown"


def test_no_workload_is_not_applicable():
    assert counter.check(history()).status == "not_applicable"


def keys_trial(text, oks, fmt="json"):
    ks = {f"set-{i}": [f"k{i}", f"v{i}"] for i in range(len(oks))}
    invs = [inv(label, 0 if ok else 1) for label, ok in zip(ks, oks)]
    return trial("keys", invocations=invs, keys=ks, config={"path": "c", "format": fmt, "key": "{key}", "text": text})


def test_keys_lost_write():
    v = keys.check(history(keys_trial('{"k0": "v0"}', [True, True])))
    assert [f.code for f in v.findings] == ["CR111"]
    assert v.findings[0].args["keys"] == "k1"


def test_keys_failed_writer_may_be_missing():
    assert keys.check(history(keys_trial('{"k0": "v0"}', [True, False]))).status == "pass"


def test_keys_torn_config():
    v = keys.check(history(keys_trial('{"k0": "v', [True])))
    assert [f.code for f in v.findings] == ["CR113"]


def test_keys_stale_value_in_ini():
    v = keys.check(history(keys_trial("[DEFAULT]\nk0 = old\n", [True], fmt="ini")))
    assert [f.code for f in v.findings] == ["CR112"]


def test_keys_read_command_variant():
    t = trial("keys", invocations=[inv("set-0")], keys={"set-0": ["k0", "v0"]}, read={"k0": None})
    assert [f.code for f in keys.check(history(t)).findings] == ["CR111"]


def claim_trial(outputs, remaining=None):
    invs = [inv(f"claim-{i}", 0 if out else 3, stdout=f"claimed {out}\n" if out else "") for i, out in enumerate(outputs)]
    return trial("claim", invocations=invs, items=["a", "b", "c"], pattern=r"^claimed (\S+)$", remaining=remaining)


def test_claim_double():
    v = claim.check(history(claim_trial(["a", "a", "b"], remaining=["c"])))
    assert [f.code for f in v.findings] == ["CR121"]


def test_claim_lost_item():
    v = claim.check(history(claim_trial(["a", None, None], remaining=["b"])))
    assert [f.code for f in v.findings] == ["CR122"]
    assert v.findings[0].args["items"] == "c"


def test_claim_all_good():
    assert claim.check(history(claim_trial(["a", "b", None], remaining=["c"]))).status == "pass"


def output_trial(produced):
    runs = {f"out-{i}": {"marker": f"m{i}", "output": f"/o{i}", "produced": p} for i, p in enumerate(produced)}
    return trial("output", invocations=[inv(label) for label in runs], runs=runs)


def test_output_clobbered_names_the_other_run():
    v = output.check(history(output_trial(["m1 result", "m1 result"])))
    assert [f.code for f in v.findings] == ["CR131"]
    assert v.findings[0].args["found"] == "out-1's result"


def test_output_missing():
    assert [f.code for f in output.check(history(output_trial([None, "m1"]))).findings] == ["CR132"]


def test_counter_with_no_successful_increment_is_unknown_not_a_vacuous_pass():
    v = counter.check(history(counter_trial(0, 0, [False, False, False])))
    assert v.status == "unknown" and "never exercised" in v.summary


def test_lock_held_with_exit_zero_is_a_refusal_not_a_lost_increment():
    refused = '{"ok": false, "error": {"code": "LOCK_HELD", "retry_after_ms": 100}}'
    invs = [inv("inc-0", 0, stdout="1"), inv("inc-1", 0, stdout=refused), inv("inc-2", 0, stdout=refused)]
    v = counter.check(history(trial("counter", invocations=invs, start=0, final=1)))
    assert v.status == "pass"


def test_summaries_total_every_failed_round_not_the_first_rounds_figure():
    rounds = [keys_trial('{"k0": "v0"}', [True, True, True]), keys_trial('{"k0": "v0", "k1": "v1"}', [True, True, True])]
    for n, t in enumerate(rounds):
        t.round = n
    assert keys.check(history(*rounds)).summary.startswith(
        "lost 3 of 6 keys written by invocations that exited 0 in 2 of 2 rounds")
    doubled, lost = claim_trial(["a", "a", "b"], remaining=["c"]), claim_trial(["a", None, None], remaining=[])
    lost.round = 1
    assert claim.check(history(doubled, lost)).summary.startswith(
        "1 item(s) claimed more than once; 2 item(s) neither claimed nor left in the queue in 2 of 2 rounds")
    assert output.check(history(output_trial(["m1 result", "m1 result"]))).summary.startswith(
        "1 successful run(s) ended with another run's output or none of its own input in 1 of 1 rounds")


def test_ini_without_sections_or_with_colons_in_keys_is_read_not_called_torn():
    from clirace.configfile import Unparseable, lookup, parse
    npmrc = parse("@cliracek0:registry=https://v0.example/\n; comment\n", "ini")
    assert lookup(npmrc, "@cliracek0:registry", "ini") == "https://v0.example/"
    gitconfig = parse("[user]\n\tname = x\n[clirace]\n\tcliracek0 = v0\n", "ini")
    assert lookup(gitconfig, "clirace.cliracek0", "ini") == "v0"
    pipconf = parse("[global]\ntimeout: 60\nindex-url = https://x/\n", "ini")
    assert lookup(pipconf, "global.timeout", "ini") == "60"
    assert keys.check(history(keys_trial("k0 = v0\nk1 = v1\n", [True, True], fmt="ini"))).status == "pass"
    for torn in ("", "[clirace\nk0 = v0\n"):
        try:
            parse(torn, "ini")
        except Unparseable:
            continue
        raise AssertionError(f"{torn!r} parsed")


def test_a_pass_says_how_many_invocations_were_refused():
    v = counter.check(history(counter_trial(0, 2, [True, True, False])))
    assert v.status == "pass"
    assert v.summary.endswith("; 1 of 3 invocations were refused or failed (e.g. inc-2: exit 4; printed nothing)"), v.summary
    assert "were refused or failed" not in counter.check(history(counter_trial(0, 2, [True, True]))).summary


def test_a_key_may_hold_its_value_wrapped_but_not_another_runs():
    wrapped = keys_trial('{"k0": "https://v0.example/", "k1": "https://v1.example/"}', [True, True])
    assert keys.check(history(wrapped)).status == "pass"
    swapped = keys_trial('{"k0": "https://v1.example/", "k1": "https://v1.example/"}', [True, True])
    v = keys.check(history(swapped))
    assert [f.code for f in v.findings] == ["CR112"] and v.findings[0].args["key"] == "k0"
    merged = keys_trial('{"k0": "v0v1", "k1": "v1"}', [True, True])  # two writes ran together into k0
    v = keys.check(history(merged))
    assert [f.code for f in v.findings] == ["CR112"] and v.findings[0].args["found"] == "v0v1"


def test_outputs_that_hold_no_input_at_all_are_undecided_not_clobbered():
    v = output.check(history(output_trial(["H4sIAAAA", "H4sIAAAB"])))  # e.g. gzip: no input's text survives
    assert v.status == "unknown" and not v.findings, v
    assert "no output holds any input's text" in v.summary and "as it is" in v.hint
    # One output with another run's input is still clobbering, even if the other holds nothing readable.
    assert [f.code for f in output.check(history(output_trial(["H4sIAAAA", "m0 result"]))).findings] == ["CR131", "CR131"]


def test_a_counter_read_through_its_value_pattern(tmp_path):
    # 'v2 count: 5' read as "the first integer" is 2 before and after: 8 lost increments that never were.
    from clirace.scenarios import workloads
    from clirace.spec import Workload

    class Box:  # the one call _read_int makes: run the read command
        def run(self, label, argv):
            return inv(label, stdout="tool v2 count: 5\n")

    plain = Workload(kind="counter", name="c", run=("incr",), read=("get",))
    assert workloads._read_int(Box(), plain, "read-after") == 2
    patterned = Workload(kind="counter", name="c", run=("incr",), read=("get",), value=r"count: (\d+)")
    assert workloads._read_int(Box(), patterned, "read-after") == 5
