"""Good specs load into the Spec the rest of the pipeline expects."""
from __future__ import annotations

from pathlib import Path

import pytest

from clirace.spec import DEFAULT_PARALLEL, DEFAULT_ROUNDS, DEFAULT_TIMEOUT, duration, load_spec

pytestmark = pytest.mark.timeout(10)

FIXTURES = sorted((Path(__file__).resolve().parents[2] / "fixtures").glob("level*/clirace.yaml"))
BASE = 'version: 1\ntool:\n  command: ["{python}", "-c", "pass"]\n'


def write(tmp_path: Path, text: str) -> Path:
    spec = tmp_path / "clirace.yaml"
    spec.write_text(text)
    return spec


@pytest.mark.parametrize("path", FIXTURES, ids=[p.parent.name for p in FIXTURES])
def test_fixture_specs_load(path):
    spec = load_spec(path)
    assert spec.path == path
    assert spec.command == ("{python}", "{spec_dir}/tool.py")
    assert [w.kind for w in spec.workloads] == ["counter", "keys", "claim", "output"]
    assert spec.workload("keys").config.format == "json"
    assert spec.workload("claim").claimed == r"^claimed (\S+)$"
    assert spec.lock is not None and spec.lock.contender == ("config", "set", "{key}", "{value}")
    assert spec.timeout == 10.0


def test_fixtures_found():
    assert len(FIXTURES) == 4


def test_level3_has_session_and_wait_option():
    spec = load_spec(next(p for p in FIXTURES if p.parent.name == "level3"))
    assert spec.session.flag == ("--session-id", "{session_id}")
    assert spec.lock.wait_option == ("--lock-timeout", "{timeout_ms}")
    assert spec.lock.hold.how == "park"


def test_command_strings_are_shlex_split(tmp_path):
    spec = load_spec(write(tmp_path, """version: 1
tool:
  command: "{python} -c 'import sys; print(sys.argv)'"
setup:
  - config set theme "dark blue"
workloads:
  - kind: counter
    run: counter incr --by 1
    read: ["counter", "get"]
"""))
    assert spec.command == ("{python}", "-c", "import sys; print(sys.argv)")
    assert spec.setup == (("config", "set", "theme", "dark blue"),)
    assert spec.workloads[0].run == ("counter", "incr", "--by", "1")
    assert spec.workloads[0].read == ("counter", "get")


def test_list_arguments_become_strings(tmp_path):
    spec = load_spec(write(tmp_path, BASE + "workloads:\n  - kind: counter\n    run: [incr, 5, 1.5]\n    read: [get]\n"))
    assert spec.workloads[0].run == ("incr", "5", "1.5")


@pytest.mark.parametrize("text, seconds", [("250ms", 0.25), ("1.5s", 1.5), (2, 2.0), ("2s", 2.0), (0.5, 0.5)])
def test_duration(text, seconds):
    assert duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text, seconds", [("250ms", 0.25), ("1.5s", 1.5), ("2", 2.0)])
def test_durations_in_a_spec(tmp_path, text, seconds):
    spec = load_spec(write(tmp_path, BASE + f"  timeout: {text}\n"
                           "lock:\n  contender: [set]\n  hold:\n    command: [hold, '{release_file}']\n"
                           f"    ready: {{delay: {text}}}\n  wait: {text}\n  prompt: {text}\n"))
    assert spec.timeout == pytest.approx(seconds)
    assert spec.lock.wait == pytest.approx(seconds)
    assert spec.lock.prompt == pytest.approx(seconds)
    assert spec.lock.hold.ready == ("delay", pytest.approx(seconds))


def test_defaults(tmp_path):
    spec = load_spec(write(tmp_path, BASE))
    assert (spec.parallel, spec.rounds, spec.timeout) == (DEFAULT_PARALLEL, DEFAULT_ROUNDS, DEFAULT_TIMEOUT)
    assert (spec.parallel, spec.rounds, spec.timeout) == (8, 3, 10.0)
    assert spec.cwd == "{sandbox}"
    assert spec.env == {} and spec.setup == () and spec.workloads == ()
    assert spec.lock is None and spec.session is None


def test_counts_are_ints(tmp_path):
    # JSON Schema's "integer" accepts 4.0; the Spec must still hold an int (range() and friends need one).
    spec = load_spec(write(tmp_path, BASE + "parallel: 4.0\nrounds: 2.0\n"))
    assert (spec.parallel, spec.rounds) == (4, 2)
    assert isinstance(spec.parallel, int) and isinstance(spec.rounds, int)


def test_date_like_values_stay_strings(tmp_path):
    spec = load_spec(write(tmp_path, BASE + "workloads:\n  - kind: counter\n    name: 2024-01-31\n"
                                            "    run: [incr]\n    read: [get]\n"))
    assert spec.workloads[0].name == "2024-01-31"


def test_aliases_within_budget_are_fine(tmp_path):
    spec = load_spec(write(tmp_path, BASE + "setup:\n  - &init [config, set, theme, dark]\n  - *init\n"))
    assert spec.setup == (("config", "set", "theme", "dark"),) * 2


def test_hold_run_is_a_program_of_its_own_and_the_new_take_kinds_load(tmp_path):
    from clirace.history.vocab import HoldMode, LockKind
    from clirace.spec import OwnCommand
    base = """version: 1
tool: {command: ["{python}", "tool.py"]}
workloads: [{kind: counter, run: ["incr"], read: ["get"]}]
lock:
  contender: ["incr"]
  hold:
"""
    helper = load_spec(write(tmp_path, base + """    run: ["{python}", "holder.py", "{release_file}"]
    ready: {file: "{ready_file}"}
"""))
    hold = helper.lock.hold
    assert hold.how is HoldMode.COMMAND and hold.own and hold.command == ("{python}", "holder.py", "{release_file}")
    assert not isinstance(hold.command, OwnCommand)  # the holder wraps it when it starts it (not tool.command + it)
    for kind in ("link", "sqlite-write"):
        taken = load_spec(write(tmp_path, base + f'    take: {{path: "{{state_home}}/t/x", kind: {kind}}}\n'))
        assert taken.lock.hold.kind is LockKind(kind) and not taken.lock.hold.own
    with pytest.raises(Exception, match="gives 2 ways to keep the lock busy"):
        load_spec(write(tmp_path, base + """    run: ["holder", "{release_file}"]
    command: ["hold", "{release_file}"]
"""))
def test_read_contender_and_error_command_may_be_commands_of_their_own(tmp_path):
    from clirace.errors import SpecError
    from clirace.spec import SHELL, OwnCommand

    head = ('version: 1\ntool:\n  command: ["true"]\nworkloads:\n  - kind: counter\n    run: ["incr"]\n'
            '    read: {sh: "echo 1"}\nlock:\n  contender: {run: ["true", "{key}"]}\n  hold: {take: {path: "{home}/l", '
            'kind: flock}}\n  error_command: {sh: "exit 3"}\n')
    spec = load_spec(write(tmp_path, head))
    assert spec.workloads[0].read == OwnCommand((SHELL, "-c", "echo 1"))
    assert spec.lock.contender == OwnCommand(("true", "{key}")) and spec.lock.error_command == OwnCommand((SHELL, "-c", "exit 3"))
    with pytest.raises(SpecError, match="lock.wait_option is given, but lock.contender is a command of its own"):
        load_spec(write(tmp_path, head + '  wait_option: ["--wait", "{timeout_ms}"]\n'))
