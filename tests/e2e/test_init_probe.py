"""`clirace init --probe` on the commands of five shipped examples (docs/examples): the spec it writes from one
observed run of each command validates, finds the lock and state the hand-written spec names, and, checked with
the same seed and rounds, scores what the hand-written spec scores. Where test_examples checks the hand-written
spec whole, both compare with the options of its run, made once for both (shared_check)."""
import json
import shutil

import pytest

from clirace.run import observe

from ..conftest import ROOT, run_clirace
from .test_examples import OPTIONS as EXAMPLE_OPTIONS
from .test_examples import SHARED, shared_example

EXAMPLES = ROOT / "docs" / "examples"
JQ = ("sh -c '[ -e ~/settings.json ] || echo \"{}\" > ~/settings.json; jq --arg k \"$1\" --arg v \"$2\" "
      "\".[\\$k] = \\$v\" ~/settings.json > ~/settings.json.tmp && mv ~/settings.json.tmp ~/settings.json' set-key")
DB = "sqlite3 {state_home}/counter.db"
CASES = {  # example -> (init --probe arguments, lines the probed spec must hold)
    "flock-counter": (["--probe", "{dir}/flock-counter.sh incr", "--read", "{dir}/flock-counter.sh get",
                       "--setup", "{dir}/flock-counter.sh incr"],
                      ["  - kind: counter", 'take: {path: "{home}/.counter.lock", kind: flock}']),
    "git-config": (["--tool", "git config --global", "--probe", "git config --global clirace.{key} {value}",
                    "--setup", "git config --global user.name clirace"],
                   ['config: {path: "{home}/.gitconfig", format: ini, key: "clirace.{key}"}',
                    'take: {path: "{home}/.gitconfig.lock", kind: exclusive-create}']),
    "jq-script": (["--tool", JQ, "--probe", JQ + " {key} {value}", "--setup", JQ + " theme dark"],
                  ['config: {path: "{home}/settings.json", format: json}', "# NOT FOUND: no lock call"]),
    # rclone renames rclone.conf to .old, then its temp file onto rclone.conf; the key names a section
    "rclone-config": (["--tool", "rclone config create", "--setup", "rclone config create first alias remote /srv",
                       "--probe", "rclone config create {key} alias remote {value}"],
                      ['config: {path: "{config_home}/rclone/rclone.conf", format: ini, key: "{key}.remote"}']),
    "sqlite3": (["--tool", "sqlite3", "--probe", f"{DB} 'UPDATE c SET n = n + 1;'", "--read", f"{DB} 'SELECT n FROM c;'",
                 "--setup", f"{DB} 'CREATE TABLE IF NOT EXISTS c(n INTEGER); INSERT INTO c SELECT 0 WHERE NOT "
                 "EXISTS (SELECT 1 FROM c);'"],
                ["  - kind: counter", 'take: {path: "{state_home}/counter.db", kind: fcntl}']),
}


def options(example: str) -> tuple[str, ...]:
    return EXAMPLE_OPTIONS if example in SHARED else ("--rounds", "2", "--seed", "7")


def score(spec, example: str) -> int:
    proc = run_clirace("check", spec, "-q", *options(example), "--format", "json", timeout=200)
    assert proc.returncode in (0, 1), proc.stderr
    return json.loads(proc.stdout)["score"]


@pytest.mark.e2e
@pytest.mark.timeout(300)
@pytest.mark.skipif(not observe.available()[0], reason="strace cannot trace here")
@pytest.mark.parametrize("example", [pytest.param(example, marks=[shared_example(example)] if example in SHARED else [])
                                     for example in sorted(CASES)])
def test_a_probed_spec_validates_finds_the_lock_and_state_and_scores_as_the_hand_written_one(tmp_path, example,
                                                                                            shared_check):
    needs = {"git-config": "git", "jq-script": "jq", "rclone-config": "rclone", "sqlite3": "sqlite3"}.get(example)
    if needs and shutil.which(needs) is None:
        pytest.skip(f"{needs} is not installed")
    for companion in EXAMPLES.glob(f"{example}.*"):
        if not companion.name.endswith(".clirace.yaml"):
            shutil.copy(companion, tmp_path / companion.name)
    args, expected = CASES[example]
    proc = run_clirace("init", tmp_path / "probed.clirace.yaml", *(a.replace("{dir}", str(tmp_path)) for a in args),
                       cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr  # it validated
    text = (tmp_path / "probed.clirace.yaml").read_text()
    for line in expected:
        assert line in text, text
    written = EXAMPLES / f"{example}.clirace.yaml"
    expected = (shared_check(written, *options(example), timeout=200).result["score"] if example in SHARED
                else score(written, example))
    assert score(tmp_path / "probed.clirace.yaml", example) == expected
