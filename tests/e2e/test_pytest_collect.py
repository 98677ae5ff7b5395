"""`*.clirace.yaml` files collected by pytest, in a scratch project holding only the spec and its tool."""
import re

import pytest

pytest_plugins = ["pytester"]

TOOL = r'''
import fcntl, os, sys
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "calls.log"), "a") as log:
    log.write(os.environ["HOME"] + "\n")   # which check run (its sandbox) called the tool
path = os.path.join(os.environ["HOME"], "counter")
with open(path + ".lock", "w") as lock:
    fcntl.flock(lock, fcntl.LOCK_EX)
    n = int(open(path).read()) if os.path.exists(path) else 0
    if sys.argv[1] == "incr":
        open(path, "w").write(str(n + 1))
    else:
        print(n)
'''

SPEC = """version: 1
tool:
  command: ["{python}", "{spec_dir}/tool.py"]
  timeout: 5s
rounds: 1
parallel: 2
workloads:
  - kind: counter
    run: ["incr"]
    read: ["get"]
"""


def check_runs(pytester) -> int:
    """How many times the check ran: one distinct clirace run directory per run."""
    homes = (pytester.path / "calls.log").read_text().split()
    return len({re.search(r"/clirace-[^/]+/", home).group() for home in homes})


@pytest.fixture
def project(pytester):
    pytester.makefile(".py", tool=TOOL)
    pytester.makefile(".clirace.yaml", x=SPEC)
    return pytester


@pytest.mark.e2e
@pytest.mark.timeout(180)
@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["one-process", "xdist"])
def test_one_item_per_criterion_and_a_score_item_from_one_check(project, workers):
    result = project.runpytest_subprocess("-p", "no:cacheprovider", "-v", "-rs", *workers)
    result.assert_outcomes(passed=2, skipped=6)
    assert outcomes(result) == {"no-silent-corruption": "PASSED", "score": "PASSED", **{
        c: "SKIPPED" for c in ("lock-excludes", "lock-error-structured", "lock-released-on-exit", "session-isolation",
                               "atomic-config-writes", "lock-wait-timeout")}}
    if not workers:  # xdist's summary leaves the reasons out
        result.stdout.fnmatch_lines(["SKIPPED*x.clirace.yaml*not tested: lock-excludes*to test: Add lock.contender*"])
    assert check_runs(project) == 1


def outcomes(result) -> dict:
    found = {}
    for line in result.stdout.lines:
        item = re.search(r"x\.clirace\.yaml::([a-z-]+)", line)
        word = re.search(r"\b(PASSED|SKIPPED|FAILED)\b", line)
        if item and word and "::" in line and not line.startswith("SKIPPED ["):
            found[item.group(1)] = word.group(1)
    return found


@pytest.mark.e2e
@pytest.mark.timeout(180)
def test_the_fixture_resolves_specs_beside_the_test_file_and_shares_one_check(project):
    project.mkdir("sub")
    (project.path / "sub" / "x.clirace.yaml").write_text(SPEC.replace("{spec_dir}/tool.py", "{spec_dir}/../tool.py"))
    (project.path / "x.clirace.yaml").unlink()
    project.makepyfile(**{"sub/test_it": """
def test_one(clirace):
    assert clirace("x.clirace.yaml").criterion("no-silent-corruption") == "pass"

def test_two(clirace):
    assert clirace("x.clirace.yaml").score == 0
"""})
    result = project.runpytest_subprocess("-p", "no:cacheprovider", "--rootdir", str(project.path), "sub/test_it.py")
    result.assert_outcomes(passed=2)
    assert check_runs(project) == 1


@pytest.mark.e2e
@pytest.mark.timeout(60)
def test_a_spec_error_shows_file_line_and_column(pytester):
    pytester.makefile(".clirace.yaml", x="version: 1\ntool:\n  comand: [true]\n")
    pytester.makepyfile(test_it="def test_it(clirace):\n    clirace('missing.yaml')\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.stdout.fnmatch_lines(["*missing.yaml: spec file not found*", "*x.clirace.yaml:3:3: unknown key*"])
