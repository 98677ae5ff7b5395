"""`clirace validate` and `clirace init`, through the real CLI. Nothing of any tool is run but its --help."""
import os
import re
from dataclasses import dataclass

import pytest

from clirace.cli._unrun import commands_in
from clirace.spec._paths import shown_path
from clirace.spec.starter import examples, schema_line

from ..conftest import FIXTURES, ROOT, run_clirace

NO_STRACE = {**os.environ, "CLIRACE_NO_STRACE": "1"}
UNSET_SKIPS_LOCK = FIXTURES / "adversarial" / "unset-skips-lock"
# The specs the tests below read `validate`'s text of, by name, and the runs that validate them: strace turned off
# (True) or as found (False), and whether the tools run. A tool's --help (about 0.1 s of CPU a run, six for level3)
# gives only the "subcommands" and "warning" lines, which only the specs validated with their tools are read for;
# the rest run with --no-tool, which changes nothing else in a spec's block (the criteria are the spec's).
SHARED_SPECS = {
    "level3": (FIXTURES / "level3" / "clirace.yaml", [(True, False)]),
    "tasks-sqlite": (FIXTURES / "tasks-sqlite" / "clirace.yaml", [(False, False)]),
    "take-hold": (FIXTURES / "adversarial" / "startup-read-lock-left" / "clirace.yaml", [(False, False), (True, False)]),
    "sqlite-fcntl": (FIXTURES / "locks" / "sqlite-busy" / "fcntl.yaml", [(True, False)]),
    "sqlite-write": (FIXTURES / "locks" / "sqlite-busy" / "clirace.yaml", [(True, False)]),
    "sqlite-helper": (FIXTURES / "locks" / "sqlite-busy" / "helper.yaml", [(True, False)]),
    "unset-skips-lock": (UNSET_SKIPS_LOCK / "clirace.yaml", [(True, True)]),
    "unset-never-run": (None, [(True, True)]),  # written by the fixture: unset-skips-lock's spec without `config unset`
    "tool-cannot-run": (None, [(True, True)]),  # written by the fixture
}
shared_run = pytest.mark.xdist_group("test_validate_init-shared")  # one worker runs them, and so the fixture once


@dataclass
class Validated:
    returncode: int
    stderr: str
    stdout: str  # this spec's block of the run's output: its "SPEC: valid" line and the indented lines under it


@pytest.fixture(scope="module")
def validated(tmp_path_factory) -> dict[tuple[str, bool], Validated]:
    """`clirace validate` of every spec in SHARED_SPECS, by (name, strace off), in one run per setting: a validate
    costs a clirace start (about 0.35 s of CPU) besides the tools' --help runs, and twelve starts became three.
    A spec's block is what a validate of that spec alone prints (each spec is loaded and judged on its own)."""
    scratch = tmp_path_factory.mktemp("validate")
    paths = {name: path for name, (path, _) in SHARED_SPECS.items()}
    paths["unset-never-run"] = scratch / "unset-never-run.yaml"
    paths["unset-never-run"].write_text(
        (UNSET_SKIPS_LOCK / "clirace.yaml").read_text().replace("{spec_dir}", str(UNSET_SKIPS_LOCK))
        .replace('contender: ["config", "unset", "theme"]', 'contender: ["config", "set", "{key}", "{value}"]'))
    paths["tool-cannot-run"] = scratch / "tool-cannot-run.yaml"
    paths["tool-cannot-run"].write_text('version: 1\ntool:\n  command: ["sh", "-c", "exit 7"]\nworkloads:\n'
                                        '  - kind: counter\n    run: ["b"]\n    read: ["c"]\n')
    out = {}
    for no_strace, tools in ((True, False), (False, False), (True, True)):
        names = [name for name, (_, runs) in SHARED_SPECS.items() if (no_strace, tools) in runs]
        proc = run_clirace("validate", *(paths[name] for name in names), *([] if tools else ["--no-tool"]),
                           env=NO_STRACE if no_strace else None)
        blocks = re.split(r"^(?=\S)", proc.stdout, flags=re.M)[1:]  # each spec's block starts unindented
        assert [block.split(": valid")[0] for block in blocks] == [shown_path(paths[name]) for name in names], \
            proc.stdout + proc.stderr
        for name, block in zip(names, blocks, strict=True):
            out[name, no_strace] = Validated(proc.returncode, proc.stderr, block)
    return out


def criteria_lines(stdout):
    return [line.split() for line in stdout.splitlines() if line.startswith("  level ")]


@shared_run
def test_validate_says_per_criterion_what_the_spec_lets_clirace_test(validated):
    proc = validated["level3", True]
    assert proc.returncode == 0, proc.stderr
    words = {line[2]: " ".join(line[3:5]) for line in criteria_lines(proc.stdout)}
    assert words["lock-wait-timeout"] == "will test" and words["no-silent-corruption"] == "will test"
    assert words["session-isolation"] == "will not"  # strace turned off: said, with the reason
    assert "strace disabled by CLIRACE_NO_STRACE" in proc.stdout
    assert words["atomic-config-writes"].startswith("partly")


@shared_run
def test_validate_for_a_tool_whose_state_is_sqlite_and_whose_lock_wait_is_an_environment_variable(validated):
    """Issue 18: atomic-config-writes can be tested on a SQLite database, the lock wait given by wait_env, the
    session id by a flag and a variable at once (fixtures/tasks-sqlite)."""
    proc = validated["tasks-sqlite", False]
    assert proc.returncode == 0, proc.stderr
    lines = {line.split()[2]: line for line in proc.stdout.splitlines() if line.startswith("  level")}
    assert "will test" in lines["lock-wait-timeout"] and "lock.wait_env TASKS_LOCK_TIMEOUT_MS=" in lines["lock-wait-timeout"]
    assert "SQLite database" in lines["atomic-config-writes"] and "will not" not in lines["atomic-config-writes"]
    assert "session.flag and session.env" in lines["session-isolation"]


@shared_run
@pytest.mark.parametrize("strace", [True, False], ids=["strace", "no-strace"])
def test_validate_says_a_take_hold_tests_release_through_strace(validated, strace):
    """With lock.hold.take, release on exit is tested by stopping a real contender at its lock call: it needs
    strace, and validate says so either way (it used to say 'will not test' even with strace)."""
    from clirace.run.stopper import NotAvailable, require
    try:
        require()
    except NotAvailable as exc:
        if strace:
            pytest.skip(f"strace cannot stop a process here: {exc}")
    proc = validated["take-hold", not strace]
    assert proc.returncode == 0, proc.stderr
    line = next(" ".join(words) for words in criteria_lines(proc.stdout) if words[2] == "lock-released-on-exit")
    if strace:
        assert line.startswith("level 2 lock-released-on-exit will test") and "stopped by strace" in line, line
    else:
        assert "will not test" in line and "strace disabled by CLIRACE_NO_STRACE" in line, line


def test_a_spec_with_only_a_tool_can_test_nothing(tmp_path):
    spec = tmp_path / "x.yaml"
    spec.write_text('version: 1\ntool:\n  command: ["true"]\n')
    proc = run_clirace("validate", spec)
    assert proc.returncode == 2
    assert "nothing can be tested" in proc.stdout
    assert all(" ".join(line[3:6]) == "will not test" for line in criteria_lines(proc.stdout))


def test_validate_runs_nothing_of_the_tool_and_reports_each_bad_spec(tmp_path):
    marker = tmp_path / "ran"
    good = tmp_path / "good.yaml"
    good.write_text(f'version: 1\ntool:\n  command: ["touch", "{marker}"]\n'
                    'setup: [["a"]]\nworkloads:\n  - kind: counter\n    run: ["b"]\n    read: ["c"]\n')
    bad = tmp_path / "bad.yaml"
    bad.write_text('version: 1\ntool:\n  comand: ["true"]\n')
    proc = run_clirace("validate", good, bad, "--allow-outside-sandbox")
    assert proc.returncode == 2
    assert f"{good}: valid" in proc.stdout and f"{bad}:3:3:" in proc.stderr
    assert not marker.exists()


def test_init_writes_a_starter_that_validates_once_it_names_a_real_program(tmp_path):
    proc = run_clirace("init", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    text = (tmp_path / "clirace.yaml").read_text()
    assert text.startswith(schema_line()) and "$schema=" in text.splitlines()[0]
    (tmp_path / "clirace.yaml").write_text(text.replace('["mytool"]', '["true"]'))
    validated = run_clirace("validate", "clirace.yaml", cwd=tmp_path)
    assert validated.returncode == 0
    # every key level 2 needs is in the starter: release after an error too (lock.hold.park.invalid_content)
    assert re.search(r"level 2  lock-released-on-exit +will test", validated.stdout), validated.stdout
    assert "error_command" in text
    again = run_clirace("init", cwd=tmp_path)
    assert again.returncode == 2 and "--force" in again.stderr


def test_init_copies_an_example_with_its_companion_files(tmp_path):
    assert examples() == sorted(p.name[:-len(".clirace.yaml")] for p in (ROOT / "docs" / "examples").glob("*.clirace.yaml"))
    proc = run_clirace("init", tmp_path / "f.yaml", "--example", "flock-counter")
    assert proc.returncode == 0, proc.stderr
    assert os.access(tmp_path / "flock-counter.sh", os.X_OK)
    assert run_clirace("validate", tmp_path / "f.yaml").returncode == 0
    unknown = run_clirace("init", tmp_path / "g.yaml", "--example", "nope")
    assert unknown.returncode == 2 and "flock-counter" in unknown.stderr


@pytest.mark.parametrize("command", ["check", "validate"])
def test_a_missing_spec_points_at_clirace_init(tmp_path, command):
    proc = run_clirace(command, tmp_path / "none.yaml")
    assert proc.returncode == 2 and "clirace init" in proc.stderr and "fixtures/" not in proc.stderr


@shared_run
def test_validate_suggests_sqlites_write_lock_for_a_take_on_a_database(validated):
    """Issue 23: an fcntl take on a SQLite database refuses the contender at its read; validate says to hold
    SQLite's write lock instead, and says nothing of the kind once the spec does."""
    lines = {}
    for name in ("sqlite-fcntl", "sqlite-write"):
        proc = validated[name, True]
        assert proc.returncode == 0, proc.stderr
        lines[name] = next(line for line in proc.stdout.splitlines() if "lock-excludes" in line)
    assert "is a SQLite database: kind fcntl locks the whole file" in lines["sqlite-fcntl"]
    assert "kind: sqlite-write" in lines["sqlite-fcntl"]
    assert "SQLite database" not in lines["sqlite-write"]


@shared_run
def test_validate_says_a_helper_holder_cannot_test_the_tools_release(validated):
    proc = validated["sqlite-helper", True]
    assert proc.returncode == 0, proc.stderr
    words = {line[2]: " ".join(line[3:]) for line in criteria_lines(proc.stdout)}
    assert words["lock-released-on-exit"].startswith("will not test lock.hold.run is a helper program")
    assert words["lock-excludes"].startswith("will test lock.contender while lock.hold.run holds the lock")
ARGPARSE = """usage: tool [-h] [--lock-timeout MS] {counter,config,queue} ...

positional arguments:
  {counter,config,queue}
    process   fingerprint a file
  key         a positional argument, not a command

options:
  -h, --help  show this help message and exit
"""
COBRA = """Usage:
  tool [command]

Available Commands:
  completion  Generate the autocompletion script
  config      Modify config files
  help        Help about any command

Flags:
  -h, --help   help for tool
"""
CLAP = """Usage: tool <COMMAND>

Commands:
  add     Add a dependency
  remove  Remove a dependency
  help    Print this message

Options:
  -h, --help  Print help
"""


def test_the_subcommands_a_help_text_lists_are_read_in_the_common_formats():
    assert commands_in(ARGPARSE) == ["counter", "config", "queue"]
    assert commands_in(COBRA) == ["completion", "config", "help"]
    assert commands_in(CLAP) == ["add", "remove", "help"]
    assert commands_in("Usage: tool FILE\n\nOptions:\n  -v  verbose\n") == []


@shared_run
def test_validate_warns_of_a_subcommand_its_help_shows_that_the_spec_never_runs(validated):
    # unset-skips-lock's `config unset` takes no lock: a spec that never runs it scores the tool 3.
    proc = validated["unset-never-run", True]
    assert proc.returncode == 0, proc.stderr
    warned = [line for line in proc.stdout.splitlines() if line.startswith("  warning: the spec never runs")]
    assert any("`config unset`" in line and 'lock.contender: ["config", "unset", ...]' in line for line in warned)
    assert not any("`config set`" in line or "`config get`" in line for line in warned), warned
    assert "`config unset`" not in validated["unset-skips-lock", True].stdout


@shared_run
def test_validate_says_nothing_found_when_the_tool_cannot_run(validated):
    proc = validated["tool-cannot-run", True]
    assert "  subcommands: none found (the tool's --help could not be read" in proc.stdout, proc.stdout
