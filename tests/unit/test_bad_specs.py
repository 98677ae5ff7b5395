"""Every malformed spec in tests/specs/bad/ is refused with exit 2 and one readable paragraph.

The table keeps, next to each file, the line the message must point at (None: the defect has no position,
e.g. an empty file) and a fragment that only that defect's message contains. Every case goes through
`load_spec` in process; the CLI_CASES (one or more per kind of defect) also go through the real CLI in a
subprocess, a few at a time. A CLI run costs about 0.5 s of CPU (its imports), so running all ~60 would take
30 s of CPU; set CLIRACE_ALL_CLI=1 to run every case through the CLI anyway.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from clirace.errors import SpecError
from clirace.spec import load_spec
from clirace.spec._paths import shown_path

BAD = Path(__file__).resolve().parents[1] / "specs" / "bad"
RUN_TIMEOUT = 30
OUTSIDE = "--allow-outside-sandbox"

# file (in tests/specs/bad/), expected line or None, fragment of the message
CASES = [
    # YAML itself
    ("yaml_bad_indent.yaml", 5, "indented differently"),
    ("yaml_unclosed_quote.yaml", 4, 'expected its closing "'),
    ("yaml_unclosed_bracket.yaml", 4, "'[' opened here is never closed"),
    ("yaml_tab_indent.yaml", 4, "tab character"),
    ("two_documents.yaml", 4, "second YAML document"),
    ("duplicate_key.yaml", 5, "'timeout' appears twice"),
    ("yaml_merge_key.yaml", 5, "merge key (<<)"),
    ("alias_bomb.yaml", None, "alias bomb"),
    ("deeply_nested.yaml", 4, "nested more than 32 levels deep"),
    ("python_object_tag.yaml", 3, "YAML tag '!!python/object/apply:os.system'"),
    # not YAML text at all, or not a mapping
    ("empty.yaml", None, "the spec is empty"),
    ("comments_only.yaml", None, "only comments and blank lines"),
    ("list_document.yaml", 1, "the spec is a list"),
    ("scalar_document.yaml", 1, "the spec is a single value"),
    ("binary_nul_bytes.yaml", 3, "NUL byte: this is a binary file"),
    ("non_utf8_bytes.yaml", 1, "0xE9, which is not UTF-8"),
    ("control_character_del.yaml", 3, "found U+007F (a control character), which YAML does not allow"),
    ("control_character_esc.yaml", 4, "found U+001B (a control character), which YAML does not allow"),
    # wrong types
    ("type_parallel_string.yaml", 4, "parallel is the string 'eight'; expected a whole number"),
    ("type_tool_string.yaml", 3, "tool is the string '{python} -c pass'; expected a mapping"),
    ("type_workloads_mapping.yaml", 5, "expected a list"),
    ("type_env_value_number.yaml", 6, "tool.env.TOOL_DEBUG is the number 1; expected a string"),
    ("type_command_mapping.yaml", 3, "expected a command"),
    ("command_string_unbalanced_quote.yaml", 4, "No closing quotation"),
    # misspelt or misplaced keys, bad enum values
    ("misspelt_key_workloads.yaml", 4, "did you mean 'workloads'"),
    ("misspelt_key_tool_command.yaml", 3, "did you mean 'command'"),
    ("misspelt_key_workload_read.yaml", 7, "did you mean 'read'"),
    ("misspelt_key_park_fifo.yaml", 9, "did you mean 'fifo'"),
    ("misspelt_value_kind.yaml", 5, "did you mean 'counter'"),
    ("misplaced_key_timeout.yaml", 5, "'timeout' belongs in tool"),
    ("session_env_invalid_name.yaml", 8, "environment variable name"),
    ("hold_env_invalid_name.yaml", 13, "lock.hold.env has the key 'A=B'; expected an environment variable name"),
    # missing required fields
    ("missing_version.yaml", 1, "has no 'version'"),
    ("missing_tool_command.yaml", 2, "tool has no 'command'"),
    ("missing_counter_read.yaml", 5, "(a counter workload) has no 'read'"),
    ("keys_without_read_or_config.yaml", 5, "neither 'read' nor 'config'"),
    ("version_two.yaml", 1, "reads spec version 1 only"),
    # placeholders
    ("unknown_placeholder_sandbox.yaml", 4, "did you mean '{sandbox}'"),
    ("unknown_placeholder_in_read.yaml", 8, "unknown placeholder '{value}' in workloads[0].read[2]"),
    ("session_flag_without_session_id.yaml", 8, "never uses {session_id}"),
    ("wait_option_without_timeout_ms.yaml", 8, "never uses {timeout_ms}"),
    ("hold_command_without_release.yaml", 7, "neither {release_file} nor {hold_seconds}"),
    ("wait_env_without_timeout.yaml", 8, "lock.wait_env is {'TOOL_LOCK_WAIT': '1000'}, which never uses {timeout_ms}"),
    ("keys_key_without_i.yaml", 8, "workloads[0].key is 'task', which never uses {i}"),
    ("keys_key_unknown_placeholder.yaml", 8, "unknown placeholder '{n}' in workloads[0].key; expected one of {i}"),
    # setup commands of their own
    ("setup_two_ways.yaml", 6, "setup[1] gives run and sh; expected exactly one of run"),
    ("setup_run_not_on_path.yaml", 5, "setup[0].run names the program 'clirace-no-such-setup-program', which is not on PATH"),
    # the program and its working directory
    ("command_not_on_path.yaml", 3, "'clirace-no-such-program', which is not on PATH"),
    ("program_not_executable.yaml", 4, "not_executable.sh', which is not executable"),
    ("cwd_absolute_nonexistent.yaml", 4, "'/nonexistent/clirace/workdir', which does not exist"),
    # counts and durations
    ("parallel_zero.yaml", 4, "parallel is the number 0; expected a whole number from 2 to 256"),
    ("parallel_ten_thousand.yaml", 4, "parallel is the number 10000; expected a whole number from 2 to 256"),
    ("rounds_negative.yaml", 4, "rounds is the number -1; expected a whole number from 1 to 100"),
    ("timeout_absurd.yaml", 4, "at most 600s"),
    ("timeout_in_words.yaml", 4, "did you mean '600s'"),
    ("timeout_negative.yaml", 4, "duration greater than zero"),
    ("timeout_nan.yaml", 4, "tool.timeout is not a number"),
    # lock and claim details
    ("claimed_invalid_regex.yaml", 8, "not a valid regular expression (missing )"),
    ("counter_value_invalid_regex.yaml", 8, "workloads[0].value is not a valid regular expression (missing )"),
    ("lock_hold_two_ways.yaml", 8, "2 ways to keep the lock busy (command and take)"),
    # paths that leave the sandbox (accepted with --allow-outside-sandbox, see test_sandbox_cases_load_when_allowed)
    ("sandbox_cwd_root.yaml", 5, "which is the root directory, outside the sandbox"),
    ("sandbox_cwd_relative.yaml", 5, "a relative path, which resolves against the directory clirace is started"),
    ("sandbox_env_home_real.yaml", 5, "tool.env.HOME is '/home/someone', which is a real path, outside the sandbox"),
    ("sandbox_config_path_tmp.yaml", 7, "in the real /tmp, outside the sandbox"),
    ("sandbox_park_fifo_var_tmp.yaml", 9, "in the real /var/tmp, outside the sandbox"),
    ("sandbox_take_path_escapes.yaml", 8, "climbs out of the sandbox with '..'"),
    ("sandbox_temp_dirs_tmp.yaml", 9, "session.temp_dirs[1] is '/tmp'"),
    ("sandbox_park_fifo_spec_dir.yaml", 9, "'{spec_dir}/state.json', which is in the spec's own directory"),
    # values YAML or the kernel cannot take (issue 10)
    ("timeout_trailing_newline.yaml", 4, "tool.timeout is the string '1s\\n'; expected a duration greater than zero"),
    ("prompt_zero.yaml", 6, "lock.prompt is the string '0ms'; expected a duration greater than zero"),
    ("tag_int_not_a_number.yaml", 4, "found 'abc' tagged !!int, which is not a valid int"),
    ("tag_bool_not_a_bool.yaml", 5, "found 'maybe' tagged !!bool"),
    ("tag_int_empty.yaml", 4, "found '' tagged !!int, which is not a valid int"),
    ("tag_timestamp_not_a_date.yaml", 5, "found 'yesterday' tagged !!timestamp"),
    ("integer_4400_digits.yaml", 4, "a number of 4,400 characters; expected a number of at most 18 digits"),
    ("argument_nul.yaml", 6, "workloads[0].run[1] holds a NUL character"),
    ("keys_read_and_config.yaml", 7, "gives both 'read' and 'config'"),
    ("keys_sqlite_without_query.yaml", 7, "workloads[0].config is a sqlite database without a query"),
    ("argument_lone_surrogate.yaml", 6, "workloads[0].run[1] holds the lone surrogate \\ud800"),
    ("env_value_too_large.yaml", 5, "tool.env.BIG is 200,000 bytes long; expected at most 100,000 bytes"),
    ("env_path_nonexistent.yaml", 5, "the program 'sh', which is not on the PATH that tool.env sets ('/nonexistent')"),
    # regexes: invalid in Python, a value group that can stay unset, catastrophic backtracking
    ("regex_repeat_too_large.yaml", 8, "not a valid regular expression (the repetition number is too large)"),
    ("regex_group1_optional.yaml", 8, "workloads[0].value has a group 1 that a match can leave unset"),
    ("regex_catastrophic.yaml", 8, "workloads[0].value backtracks catastrophically: on a run of 2,048 'a'"),
    # paths where clirace expects a file
    ("park_fifo_is_directory.yaml", 9, "lock.hold.park.fifo is '{config_home}', which names a directory"),
    ("take_path_is_directory.yaml", 7, "lock.hold.take.path is '{state_home}/tool/', which names a directory"),
    ("config_path_through_file.yaml", 7, "_support/not_executable.sh', a file, not a directory"),
]
PARAMS = [pytest.param(name, line, fragment, id=name.removesuffix(".yaml")) for name, line, fragment in CASES]
# Through the real CLI, one case of each way a spec is refused (the reader, YAML syntax and budgets, the schema,
# names and placeholders, the program, the sandbox, tags): what the CLI adds (exit 2, one paragraph on stderr, no
# traceback) does not depend on the case, and every case's message and place are held in process above. Each
# case costs a process start (about 0.3 s of CPU); CLIRACE_ALL_CLI=1 runs every case through the CLI.
CLI_CASES = {
    "yaml_unclosed_quote.yaml", "alias_bomb.yaml", "deeply_nested.yaml", "empty.yaml", "binary_nul_bytes.yaml",
    "non_utf8_bytes.yaml", "type_parallel_string.yaml", "misspelt_key_workloads.yaml",
    "unknown_placeholder_sandbox.yaml", "command_not_on_path.yaml", "sandbox_take_path_escapes.yaml",
    "tag_int_not_a_number.yaml", "argument_nul.yaml",
}
if os.environ.get("CLIRACE_ALL_CLI"):
    CLI_CASES = {name for name, _, _ in CASES}
CLI_PARAMS = [param for param in PARAMS if param.values[0] in CLI_CASES]


def run_check(spec: Path, cwd: Path, *options: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "clirace", "check", *options, str(spec)], cwd=cwd,
                          capture_output=True, text=True, errors="replace", timeout=RUN_TIMEOUT,
                          env={**os.environ, "NO_COLOR": "1"})


@pytest.fixture(scope="module")
def cli_results(tmp_path_factory):
    """The CLI's answer for every corpus file, run a few at a time."""
    cwd = tmp_path_factory.mktemp("cwd")
    with ThreadPoolExecutor(max_workers=4) as pool:
        futures = {name: pool.submit(run_check, BAD / name, cwd) for name in sorted(CLI_CASES)}
        return {name: future.result() for name, future in futures.items()}


def shown_from(cwd: Path, spec: Path) -> str:
    """How a clirace run in `cwd` names `spec`."""
    here = os.getcwd()
    os.chdir(cwd)
    try:
        return shown_path(spec)
    finally:
        os.chdir(here)


def assert_one_paragraph(text: str, spec: Path, line: int | None, fragment: str, cwd: Path | None = None) -> None:
    spec = shown_from(cwd or Path.cwd(), spec)  # named as the user would type it from the working directory
    assert text.startswith("clirace: "), text
    assert "\n" not in text.strip(), f"more than one line:\n{text}"
    assert "Traceback" not in text
    if line is None:
        assert f"{spec}: " in text, f"the message does not name {spec}:\n{text}"
    else:
        found = re.search(re.escape(str(spec)) + r":(\d+):(\d+): ", text)
        assert found, f"no {spec}:LINE:COL in:\n{text}"
        assert int(found.group(1)) == line, f"points at line {found.group(1)}, expected {line}:\n{text}"
    assert fragment in text, f"expected {fragment!r} in:\n{text}"


def test_corpus_is_the_table():
    assert sorted(p.name for p in BAD.glob("*.yaml")) == sorted(name for name, _, _ in CASES)
    assert len(CASES) >= 30
    assert CLI_CASES <= {name for name, _, _ in CASES}


@pytest.mark.timeout(90)  # the first case also waits for the fixture's runs
@pytest.mark.parametrize("name, line, fragment", CLI_PARAMS)
def test_cli_refuses_bad_spec(cli_results, name, line, fragment):
    result = cli_results[name]
    assert result.returncode == 2, result.stderr
    assert result.stdout == ""
    assert "Traceback" not in result.stdout + result.stderr
    assert_one_paragraph(result.stderr, BAD / name, line, fragment)
    if name.startswith("sandbox_"):
        assert OUTSIDE in result.stderr


@pytest.mark.timeout(10)
@pytest.mark.parametrize("name, line, fragment", PARAMS)
def test_load_spec_raises_spec_error(name, line, fragment):
    with pytest.raises(SpecError) as caught:
        load_spec(BAD / name)
    assert_one_paragraph(f"clirace: {caught.value.paragraph()}", BAD / name, line, fragment)


@pytest.mark.timeout(30)
def test_huge_file(tmp_path):
    spec = tmp_path / "huge.yaml"
    filler = "".join(f"# filler line {n} to make the spec absurdly large\n" for n in range(30_000))
    spec.write_text('version: 1\ntool:\n  command: ["{python}", "-c", "pass"]\n' + filler)
    assert spec.stat().st_size > 1_000_000
    result = run_check(spec, tmp_path)
    assert result.returncode == 2, result.stderr
    assert_one_paragraph(result.stderr, spec, None, "bytes; expected at most 1,000,000 bytes", tmp_path)


@pytest.mark.timeout(10)
def test_missing_file_and_directory(tmp_path):
    with pytest.raises(SpecError, match="spec file not found"):
        load_spec(tmp_path / "nope.yaml")
    with pytest.raises(SpecError, match="is a directory"):
        load_spec(tmp_path)


@pytest.fixture
def fifo(tmp_path) -> Path:
    path = tmp_path / "spec.fifo"
    os.mkfifo(path)
    return path


@pytest.mark.timeout(10)
@pytest.mark.parametrize("device, kind", [("/dev/zero", "a character device"), ("/dev/urandom", "a character device"),
                                          ("fifo", "a named pipe (FIFO)")])
def test_special_file_is_refused_before_reading(device, kind, fifo):
    """/dev/zero would fill memory, /dev/urandom never ends, a FIFO with no writer blocks forever."""
    path = fifo if device == "fifo" else Path(device)
    with pytest.raises(SpecError) as caught:
        load_spec(path)
    assert_one_paragraph(f"clirace: {caught.value.paragraph()}", path, None, f"is {kind}, not a spec file")


@pytest.mark.timeout(30)
def test_cli_refuses_special_files(tmp_path, fifo):
    for path in (Path("/dev/urandom"), fifo):
        result = run_check(path, tmp_path)
        assert result.returncode == 2, result.stderr
        assert_one_paragraph(result.stderr, path, None, "not a spec file", tmp_path)


@pytest.mark.timeout(10)
def test_a_huge_integer_where_no_schema_looks(tmp_path):
    """Numbers are bounded wherever they are, not only where the schema has a maximum."""
    spec = write(tmp_path, "workloads:\n  - kind: counter\n    run: [incr]\n    read: [get]\n    start: 0xffffffffffffffff\n")
    with pytest.raises(SpecError, match="too large; expected a number of at most 18 digits"):
        load_spec(spec)


@pytest.mark.timeout(10)
@pytest.mark.parametrize("pattern", [r"count: (\d+)", r"(?:v\d )?count: (\d+)", r"(\d+)", r"\d+", r"(a)+(b)?",
                                     r"^claimed (\S+)$", r"(?P<n>\d+)|"])
def test_usable_patterns_load(tmp_path, pattern):
    if pattern.endswith("|"):  # group 1 in one alternative only: refused
        with pytest.raises(SpecError, match="group 1"):
            load_spec(write(tmp_path, _counter_value(pattern)))
        return
    load_spec(write(tmp_path, _counter_value(pattern)))


def _counter_value(pattern: str) -> str:
    return f"workloads:\n  - kind: counter\n    run: [incr]\n    read: [get]\n    value: '{pattern}'\n"


# ------------------------------------------------------------------------------------------------ sandbox

BASE = 'version: 1\ntool:\n  command: ["{python}", "-c", "pass"]\n'


def write(tmp_path: Path, body: str) -> Path:
    spec = tmp_path / "clirace.yaml"
    spec.write_text(BASE + body)
    return spec


@pytest.fixture
def fake_home(tmp_path, monkeypatch):
    home = tmp_path / "home" / "someone"
    home.mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    return home


@pytest.mark.timeout(10)
@pytest.mark.parametrize("body, fragment", [
    pytest.param("  cwd: {home}\n", "in the real home directory", id="cwd-real-home"),
    pytest.param("  cwd: {home}/project\n", "in the real home directory", id="cwd-under-real-home"),
    pytest.param("  env: {{TMPDIR: /tmp}}\n", "tool.env.TMPDIR is '/tmp', which is in the real /tmp", id="env-tmpdir"),
    pytest.param("  env: {{DATA: {home}/data}}\n", "in the real home directory", id="env-any-var-in-home"),
    pytest.param("  env: {{XDG_CONFIG_HOME: '{{spec_dir}}/cfg'}}\n", "which is in the spec's own directory",
                 id="env-xdg-spec-dir"),
    pytest.param("  env: {{HOME: '{{sandbox}}/../..'}}\n", "climbs out of the sandbox", id="env-home-escapes"),
    pytest.param("  env: {{TMPDIR: scratch}}\n", "a relative path", id="env-tmpdir-relative"),
    pytest.param("  cwd: '{{spec_dir}}'\n", "in the spec's own directory", id="cwd-spec-dir"),
    pytest.param("lock:\n  contender: [set]\n  hold:\n    take: {{path: '{{spec_dir}}/tool.lock', kind: flock}}\n",
                 "in the spec's own directory", id="take-path-spec-dir"),
    pytest.param("workloads:\n  - kind: keys\n    run: [set, '{{key}}', '{{value}}']\n"
                 "    config: {{path: '{{spec_dir}}/config.json', format: json}}\n",
                 "in the spec's own directory", id="config-path-spec-dir"),
    pytest.param("session:\n  run: [run]\n  temp_dirs: ['{{tmp}}', /var/tmp/x]\n", "in the real /var/tmp",
                 id="temp-dirs-var-tmp"),
    pytest.param("workloads:\n  - kind: keys\n    run: [set, '{{key}}', '{{value}}']\n"
                 "    config: {{path: /etc/tool/config.json, format: json}}\n",
                 "which is a real path, outside the sandbox", id="config-path-etc"),
])
def test_sandbox_refusals(tmp_path, fake_home, body, fragment):
    (fake_home / "project").mkdir()
    spec = write(tmp_path, body.format(home=fake_home))
    with pytest.raises(SpecError) as caught:
        load_spec(spec)
    text = f"clirace: {caught.value.paragraph()}"
    assert fragment in text and OUTSIDE in text, text
    assert "\n" not in text
    load_spec(spec, allow_outside_sandbox=True)  # the same spec is fine when allowed


@pytest.mark.timeout(10)
@pytest.mark.parametrize("body", [
    pytest.param("  cwd: '{home}'\n", id="cwd-sandbox-home"),
    pytest.param("  env: {PLUGINS: '{spec_dir}/plugins'}\n", id="env-input-in-spec-dir"),
    pytest.param("  env: {HOME: '{sandbox}/other-home', TMPDIR: '{tmp}/x', XDG_CONFIG_HOME: '{config_home}'}\n",
                 id="env-inside-sandbox"),
    pytest.param("  env: {JAVA_HOME: /usr/lib/jvm, PATH: '/usr/local/bin:/usr/bin', MODE: fast}\n",
                 id="env-real-but-harmless"),
    pytest.param("lock:\n  contender: [set]\n  hold:\n    take: {path: '{home}/.config/../tool.lock', kind: flock}\n",
                 id="take-path-dotdot-inside"),
])
def test_sandbox_accepts(tmp_path, fake_home, body):
    load_spec(write(tmp_path, body))


@pytest.mark.timeout(10)
@pytest.mark.parametrize("name", [name for name, _, _ in CASES if name.startswith("sandbox_")])
def test_sandbox_cases_load_when_allowed(name):
    """The sandbox corpus files are otherwise valid: the flag is all that stands between them and a run."""
    assert load_spec(BAD / name, allow_outside_sandbox=True).path == BAD / name


@pytest.mark.timeout(60)
def test_cli_allow_outside_sandbox(tmp_path):
    # cwd "/" and nothing to run: with the flag clirace gets past the spec and scores nothing, launching nothing.
    spec = write(tmp_path, "  cwd: /\n")
    refused = run_check(spec, tmp_path)
    assert refused.returncode == 2 and OUTSIDE in refused.stderr, refused.stderr
    allowed = run_check(spec, tmp_path, OUTSIDE, "--format", "json", "--no-strace")
    assert allowed.returncode == 1, allowed.stderr  # the gate: no-silent-corruption was not tested
    assert "Traceback" not in allowed.stdout + allowed.stderr
    assert '"score"' in allowed.stdout


@pytest.mark.timeout(30)
def test_too_many_values_without_aliases(tmp_path):
    spec = tmp_path / "big.yaml"
    spec.write_text('version: 1\ntool:\n  command: ["{python}", "-c", "pass"]\nsetup:\n'
                    + "".join(f"  - [noop, {n}]\n" for n in range(8_000)))
    with pytest.raises(SpecError) as caught:
        load_spec(spec)
    text = caught.value.paragraph()
    assert "more than 20,000 values" in text and "alias" not in text, text
