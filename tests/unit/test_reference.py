"""The serial reference runs: a spec the tool does not fit is a spec error, an unknown outcome alone leaves
the workload undecided, and the output oracle masks what varies between two runs of the same input."""
import dataclasses

from clirace.checks import counter, output, reference
from clirace.history import Alone, ClaimRound, ConfigSnapshot, CounterRound, KeysRound, OutputRound, OutputRun
from clirace.history.vocab import ConfigFormat

from .histories import history, inv


def serial_keys(text, fmt=ConfigFormat.YAML, key="{key}"):
    return KeysRound(workload="keys#0", serial=True, invocations=(inv("set-0"),), keys={"set-0": ("cliracek0", "v0")},
                     config=ConfigSnapshot("/sb/config", fmt, key, text))


def test_a_key_the_lookup_cannot_find_alone_is_a_spec_error_naming_what_is_there():
    kubeconfig = "clusters:\n- name: cliracek0\n  cluster: {server: v0}\ncontexts: []\n"
    (problem,) = reference.problems(history(serial_keys(kubeconfig)))
    assert problem.spec and "cliracek0" in problem.message and "clusters, contexts" in problem.message
    assert reference.problems(history(serial_keys("cliracek0: v0\n"))) == []


def test_a_read_that_prints_nothing_alone_is_a_spec_error():
    t = KeysRound(workload="k", serial=True, invocations=(inv("set-0"), inv("get-0", stdout="")),
                  keys={"set-0": ("cliracek0", "v0")})
    (problem,) = reference.problems(history(t))
    assert problem.spec and "is not found" in problem.message and "the read command printed nothing" in problem.message
    assert "printed printed" not in problem.message


def test_a_claim_that_prints_nothing_alone_is_said_once():
    t = ClaimRound(workload="q", serial=True, items=("item0-x",), pattern=r"^claimed (\S+)$",
                   invocations=(inv("claim-0", stdout=""), inv("list-after", stdout="")))
    (problem,) = reference.problems(history(t))
    assert problem.spec and "run alone, claim-0 printed nothing;" in problem.message, problem.message


def test_a_command_killed_alone_leaves_the_workload_undecided_not_a_spec_error():
    t = CounterRound(workload="c", serial=True, start=0,
                     invocations=(inv("inc-0", None, timed_out=True), inv("read-after", stdout="1")))
    (problem,) = reference.problems(history(t))
    assert not problem.spec
    parallel = CounterRound(workload="c", start=0, invocations=(inv("inc-0"), inv("read-after", stdout="1")))
    assert counter.check(history(t, parallel)).status == "unknown"


def serial_counter(superseded=False, read_after_killed=False, sandbox="/sb"):
    read = inv("read-after", None, stderr=f"waiting on {sandbox}/state", timed_out=True) if read_after_killed else \
        inv("read-after", stdout="3")
    return CounterRound(workload="c", serial=True, start=0, superseded=superseded, sandbox=sandbox,
                        invocations=(*(inv(f"inc-{i}") for i in range(3)), read))


def test_a_reference_pass_run_again_is_judged_on_its_second_pass_and_cites_the_first():
    parallel = CounterRound(workload="c", start=0, invocations=(inv("inc-0"), inv("inc-1"), inv("read-after", stdout="2")))
    first = serial_counter(superseded=True, read_after_killed=True, sandbox="/sb1")
    answered = history(first, serial_counter(sandbox="/sb2"), parallel)
    assert reference.problems(answered) == []
    verdict = counter.check(answered)
    assert verdict.status == "pass" and "second reference pass" in verdict.summary, verdict
    assert "{sandbox}" in verdict.summary and "/sb1" not in verdict.summary, verdict.summary  # the same every run
    twice = history(first, serial_counter(read_after_killed=True, sandbox="/sb2"), parallel)
    (problem,) = reference.problems(twice)
    assert not problem.spec and "in its first pass" in problem.message and "/sb" not in problem.message
    verdict = counter.check(twice)
    assert verdict.status == "unknown" and verdict.summary.count("read-after") == 2, verdict.summary
    assert verdict.hint == reference.TWICE_HINT
    # A history without the marker (saved before it) judges as it did: the unanswered pass decides nothing.
    before = counter.check(history(serial_counter(read_after_killed=True), parallel))
    assert before.status == "unknown" and before.hint == reference.UNDECIDED_HINT and "first pass" not in before.summary


def test_a_serial_claim_or_key_write_killed_before_it_answered_is_no_spec_error():
    """A run killed at its deadline may or may not have done its work: its empty output, its item still queued or
    its key absent say nothing of the spec (a stalled serial claim was a spec error, exit 2)."""
    items = ("item0-x", "item1-x", "item2-x")
    claims = (inv("claim-0", None, timed_out=True), inv("claim-1", stdout="claimed item1-x"),
              inv("claim-2", stdout="claimed item2-x"))
    claim = ClaimRound(workload="q", serial=True, items=items, pattern=r"^claimed (\S+)$",
                       invocations=(*claims, inv("list-after", stdout="item0-x\n")))
    assert reference.problems(history(claim)) == []
    left_two = dataclasses.replace(claim, invocations=(*claims, inv("list-after", stdout="item0-x\nitem1-x\n")))
    (problem,) = reference.problems(history(left_two))  # one unknown claim leaves at most one item
    assert problem.spec and "still queued" in problem.message
    keys = KeysRound(workload="k", serial=True, keys={"set-0": ("k0", "v0"), "set-1": ("k1", "v1")},
                     invocations=(inv("set-0", None, timed_out=True), inv("set-1"), inv("get-0"),
                                  inv("get-1", stdout="v1")))
    assert reference.problems(history(keys)) == []


def test_a_contender_that_fails_alone_is_a_spec_error_and_an_error_command_that_succeeds_too():
    failing = Alone(name="contender", command="contender", invocations=(inv("alone", 128, stderr="already exists"),))
    succeeding = Alone(name="error_command", command="error_command", invocations=(inv("alone", 0),))
    messages = [p.message for p in reference.problems(history(failing, succeeding))]
    assert any("lock.contender fails" in m for m in messages) and any("error_command succeeds" in m for m in messages)


def test_a_holder_or_wait_option_failing_alone_and_an_error_command_refused_with_a_usage_error_are_spec_errors():
    usage = "usage: tool [-h] {config,queue} ...\ntool: error: argument command: invalid choice: 'queu'\n"
    holder = Alone(name="holder", command="holder", invocations=(inv("alone", 2, stderr=usage),))
    waiter = Alone(name="waiter", command="waiter", invocations=(inv("alone", 2, stderr=usage),))
    misspelt = Alone(name="error_command", command="error_command", invocations=(inv("alone", 2, stderr=usage),))
    found = reference.problems(history(holder, waiter, misspelt))
    assert [p.key for p in found] == [("lock", "hold"), ("lock", "wait_option"), ("lock", "error_command")]
    assert all(p.spec and "exit 2" in p.message and "invalid choice: 'queu'" in p.message for p in found)
    # An error command that takes the lock and then fails is what the spec asks for, whatever its exit status.
    refused = Alone(name="error_command", command="error_command",
                    invocations=(inv("alone", 2, stderr="error: the queue is empty\n"),))
    assert reference.problems(history(refused)) == []
    # A hook that did not end alone (it waits for neither {release_file} nor {hold_seconds}) is judged where it runs.
    hung = Alone(name="holder", command="holder", invocations=(inv("alone", None, timed_out=True),))
    assert reference.problems(history(hung)) == []


def outputs(round_, produced, serial=True, sandbox="/sb1"):
    runs = {f"out-{i}": OutputRun(f"m{i}", f"{sandbox}/io/o{i}", produced=p) for i, p in enumerate(produced)}
    return OutputRound(workload="o", serial=serial, round=round_, runs=runs, sandbox=sandbox,
                       invocations=tuple(inv(label) for label in runs))


def test_the_output_oracle_masks_what_varies_and_catches_a_swap():
    stamped = [f"at {t}\nAAAA{i}\n" for i, t in ((0, 111), (1, 112), (2, 113))]
    again = [f"at {t}\nAAAA{i}\n" for i, t in ((0, 221), (1, 222), (2, 223))]
    serial_runs = (outputs(0, stamped), outputs(1, again, sandbox="/sb2"))
    assert reference.problems(history(*serial_runs)) == []
    fine = outputs(0, ["at 9\nAAAA0\n", "at 8\nAAAA1\n", "at 7\nAAAA2\n"], serial=False, sandbox="/sb3")
    assert output.check(history(*serial_runs, fine)).status == "pass"
    swapped = outputs(0, ["at 9\nAAAA1\n", "at 8\nAAAA1\n", "at 7\nAAAA2\n"], serial=False, sandbox="/sb3")
    v = output.check(history(*serial_runs, swapped))
    assert [f.code for f in v.findings] == ["CR131"] and v.findings[0].args["found"] == "out-1's result"


def test_outputs_with_nothing_stable_or_alike_for_every_input_are_spec_errors():
    varying = (outputs(0, ["x1", "x2"]), outputs(1, ["y3", "y4"], sandbox="/sb2"))
    assert any("nothing in common" in p.message for p in reference.problems(history(*varying)))
    alike = (outputs(0, ["done 1", "done 2"]), outputs(1, ["done 3", "done 4"], sandbox="/sb2"))
    assert any("cannot be told" in p.message for p in reference.problems(history(*alike)))


def test_the_sandbox_path_in_an_output_is_not_a_difference():
    serial_runs = (outputs(0, ["wrote /sb1/io/o0 m0"]), outputs(1, ["wrote /sb2/io/o0 m0"], sandbox="/sb2"))
    par = outputs(0, ["wrote /sb3/io/o0 m0"], serial=False, sandbox="/sb3")
    assert output.check(history(*serial_runs, par)).status == "pass"
