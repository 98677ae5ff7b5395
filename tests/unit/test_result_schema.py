"""`--format json` output against the schema `clirace schema --result` prints (the file shipped in the package)."""
import json

import jsonschema
import pytest

from clirace import __version__
from clirace.cli.pipeline import judge, snapshot_of
from clirace.report import to_json

from ..conftest import run_clirace
from .hostile import hostile_history
from .test_report import observed_counter_history


@pytest.fixture(scope="module")
def result_schema():
    proc = run_clirace("schema", "--result")
    assert proc.returncode == 0, proc.stderr
    schema = json.loads(proc.stdout)
    jsonschema.Draft202012Validator.check_schema(schema)
    return schema


@pytest.mark.parametrize("build", [hostile_history, observed_counter_history])
def test_json_results_validate_against_the_shipped_schema(result_schema, build):
    data = json.loads(to_json(judge(build())))
    jsonschema.Draft202012Validator(result_schema).validate(data)
    assert data["clirace_version"] == __version__


def test_version_is_printed():
    proc = run_clirace("--version")
    assert proc.returncode == 0 and proc.stdout.strip() == f"clirace {__version__}"


def test_a_result_with_a_gate_and_a_baseline_and_a_list_of_them_validate(result_schema):
    from clirace.verdict import baseline, gate
    result = judge(hostile_history())
    result.comparison = baseline.compare(snapshot_of(judge(observed_counter_history())),
                                         snapshot_of(result))
    result.gate = gate.evaluate(result, 2, True, result.comparison)
    data = json.loads(to_json([result, judge(observed_counter_history())]))
    jsonschema.Draft202012Validator(result_schema).validate(data)
    assert data[0]["gate"]["enforced"] is False and data[0]["baseline"]["findings"]


def test_this_modules_tests_are_one_xdist_group(request):
    """tests/conftest.py pins this module to one xdist worker (SHARED_FIXTURE_MODULES: the schema fixture runs once):
    under `--dist loadgroup` the scheduler groups by the `@group` at the end of a test's id, so it must be there
    (pytest-xdist 3.8 failed to put it under pytest 9.2), and must not be without xdist."""
    assert request.node.nodeid.endswith("@test_result_schema") == bool(request.config.getoption("loadgroup", False))
