"""`clirace init`: a commented starter spec, or one of the shipped examples (docs/examples, in the wheel as
clirace/_examples), headed by a yaml-language-server line so that editors complete and check it against the
schema written beside it (clirace.schema.json, `clirace schema`'s)."""
from __future__ import annotations

import os
from importlib import resources
from pathlib import Path

from clirace.errors import UsageError

SUFFIX = ".clirace.yaml"

STARTER = """\
# clirace spec: describes your tool's mutating commands; `clirace validate` says what it lets clirace test,
# `clirace check` runs it. Every command runs in a throw-away sandbox: HOME, TMPDIR and XDG_* point there.
version: 1
tool:
  command: ["mytool"]          # TODO your tool: a name on PATH, or ["{python}", "{spec_dir}/tool.py"]
  timeout: 10s                 # deadline of one invocation
# setup:                       # run in every fresh sandbox first; each must exit 0
#   - ["init"]
parallel: 8                    # invocations per parallel round
rounds: 3                      # rounds per workload
workloads:                     # what must survive parallel calls (at least one, for level 1)
  - kind: keys                 # N parallel writes of distinct {key}={value}: each success readable after
    run: ["config", "set", "{key}", "{value}"]                        # TODO
    config: {path: "{config_home}/mytool/config.json", format: json}  # TODO (json, yaml, toml or ini)
  # - kind: counter            # N parallel increments: final = start + number of runs that exited 0
  #   run: ["counter", "incr"]
  #   read: ["counter", "get"]  # prints the counter
  # - kind: claim              # a queue of N items, N parallel claims: no double claim, no lost item
  #   add: ["queue", "add", "{item}"]
  #   run: ["queue", "claim"]
  #   claimed: '^claimed (\\S+)$'
  # - kind: output             # N parallel runs, distinct inputs: each output holds its own input's text
  #   run: ["process", "--input", "{input}", "--output", "{output}"]
lock:                          # levels 1-3: how the tool's lock behaves when it is busy
  contender: ["config", "set", "{key}", "{value}"]   # TODO a mutating command that takes the lock; with {key}
                               #   and {value} it writes a key of its own, read back like the keys workload's
  hold:                        # how clirace keeps the lock busy, exactly one of:
    park:                      # - a real invocation, parked while it reads this file (made a named pipe)
      command: ["config", "set", "{key}", "{value}"]
      fifo: "{config_home}/mytool/config.json"
      invalid_content: "not json"   # TODO what the holder then reads to fail with the lock taken (level 2:
                                    #   release after an error); or instead, error_command below
    # take: {path: "{state_home}/mytool/lock", kind: flock}   # - clirace takes the lock itself
  # error_command: ["queue", "claim"]              # takes the lock, then fails (level 2 needs it, or invalid_content)
  # wait_option: ["--lock-timeout", "{timeout_ms}"] # level 3: a bounded wait for the lock
# session:                     # level 3: temp files namespaced by a session id
#   flag: ["--session-id", "{session_id}"]
"""


SCHEMA_FILE = "clirace.schema.json"  # written beside the spec: no URL to serve, and it matches this clirace


def schema_line() -> str:
    """The line that points editors at the schema file beside the spec (yaml-language-server resolves a relative
    $schema against the spec's directory)."""
    return f"# yaml-language-server: $schema=./{SCHEMA_FILE}\n"


def schema_text() -> str:
    return resources.files("clirace.spec").joinpath("spec_schema.json").read_text()


def examples_dir() -> Path:
    shipped = resources.files("clirace").joinpath("_examples")
    if shipped.is_dir():
        return Path(str(shipped))
    return Path(__file__).resolve().parents[3] / "docs" / "examples"  # a source checkout or editable install


def examples() -> list[str]:
    return sorted(p.name[:-len(SUFFIX)] for p in examples_dir().glob(f"*{SUFFIX}"))


def write_starter(path: Path, example: str | None = None, force: bool = False) -> list[Path]:
    """Write the spec (and an example's companion files beside it); return what was written."""
    files: dict[Path, str] = {}
    if example is None:
        files[path] = schema_line() + STARTER
    else:
        if example.endswith(SUFFIX):
            example = example[:-len(SUFFIX)]
        if example not in examples():
            raise UsageError(f"--example {example!r} is not a shipped example.", hint=f"Examples: {', '.join(examples())}.")
        source = examples_dir()
        files[path] = schema_line() + (source / f"{example}{SUFFIX}").read_text()
        for companion in sorted(source.glob(f"{example}.*")):
            if not companion.name.endswith(SUFFIX):
                files[path.parent / companion.name] = companion.read_text()
    schema = path.parent / SCHEMA_FILE
    if force or not schema.exists():  # shared by every spec of the directory: an existing one is kept
        files[schema] = schema_text()
    for target in files:
        if target.exists() and not force and target != schema:
            raise UsageError(f"{target} already exists.", hint="Pass --force to overwrite it, or another path.")
        if not target.parent.is_dir():
            raise UsageError(f"{target}: the directory {target.parent} does not exist.")
    for target, text in files.items():
        target.write_text(text)
        if target.suffix == ".sh":
            os.chmod(target, 0o755)
    return list(files)
