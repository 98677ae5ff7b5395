"""configfile: parsing what a target wrote is bounded, and "too large to judge" is never "torn"."""
from __future__ import annotations

import time
from pathlib import Path

import pytest

from clirace.errors import SpecError
from clirace.spec import load_spec
from clirace.spec.configfile import MAX_BYTES, TooLarge, Unparseable, lookup, parse

pytestmark = pytest.mark.timeout(20)

ALIAS_BOMB = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{chr(98 + n)}: &{chr(98 + n)} [*{chr(97 + n)}, *{chr(97 + n)}, *{chr(97 + n)}, *{chr(97 + n)}, *{chr(97 + n)}, "
    f"*{chr(97 + n)}, *{chr(97 + n)}, *{chr(97 + n)}, *{chr(97 + n)}, *{chr(97 + n)}]\n" for n in range(9))


@pytest.mark.parametrize("fmt, text, why", [
    pytest.param("yaml", ALIAS_BOMB, "more than 100,000 values once its aliases are expanded", id="yaml-alias-bomb"),
    pytest.param("yaml", "a: " + "[" * 5000 + "]" * 5000, "nested more than 100 levels", id="yaml-deep-flow"),
    pytest.param("yaml", "a:\n" + "".join("  " * n + "- \n" for n in range(1, 400)), "nested", id="yaml-deep-block"),
    pytest.param("json", "[" * 100_000 + "]" * 100_000, "nested too deeply", id="json-deep"),
    pytest.param("toml", "a = " + "[" * 5000 + "]" * 5000, "nested too deeply", id="toml-deep"),
    pytest.param("json", '{"a": "' + "x" * MAX_BYTES + '"}', "more than the 1,048,576 clirace judges", id="json-huge"),
])
def test_too_large_to_judge(fmt, text, why):
    started = time.monotonic()
    with pytest.raises(TooLarge) as caught:
        parse(text, fmt)
    assert why in str(caught.value)
    assert time.monotonic() - started < 5


def test_size_is_counted_in_bytes():
    with pytest.raises(TooLarge):
        parse(b"{}" + b" " * MAX_BYTES, "json")
    assert parse(b'{"a": 1}' + b" " * (MAX_BYTES - 8), "json") == {"a": 1}


@pytest.mark.parametrize("fmt, text, why", [
    ("json", '{"a": 1', "JSONDecodeError"),
    ("json", "", "the file is empty"),
    ("json", b'{"a": "\xe9"}', "not UTF-8: byte 0xE9 at offset 7"),
    ("yaml", "a: [1, 2", "ParserError"),
    ("yaml", "- 1\n", "expected a mapping, found list"),
    ("yaml", "a: !!python/object/apply:os.system [true]\n", "ConstructorError"),
    ("yaml", "a: !!int abc\n", "a value YAML cannot build"),
    ("toml", "a = ", "TOMLDecodeError"),
])
def test_unparseable_is_not_too_large(fmt, text, why):
    with pytest.raises(Unparseable) as caught:
        parse(text, fmt)
    assert not isinstance(caught.value, TooLarge)
    assert why in str(caught.value)


def test_what_parses():
    assert parse('{"n": ' + "9" * 5000 + "}", "json") == {"n": "9" * 5000}  # kept as text, not a ValueError
    assert parse("a: &x {b: 1}\nc: *x\n", "yaml") == {"a": {"b": 1}, "c": {"b": 1}}  # a few aliases are fine
    assert parse("k = v\n[s]\nx = 1\n", "ini") == {"DEFAULT": {"k": "v"}, "s": {"k": "v", "x": "1"}}


KUBECONFIG = {"clusters": [{"name": "alpha", "cluster": {"server": "https://a.example"}},
                           {"name": "cliracek3", "cluster": {"server": "https://k3.example"}}]}


def test_lookup_dotted_and_query():
    assert lookup({"a": {"b": 1}}, "a.b", "json") == 1
    assert lookup({"a.b": 2}, "a.b", "json") == 2
    assert lookup({"DEFAULT": {"k": "v"}}, "k", "ini") == "v"
    assert lookup({"a": 1}, "a.b", "json") is None
    query = "clusters[?name=='cliracek3'].cluster.server | [0]"
    assert lookup(KUBECONFIG, query, "yaml", query=True) == "https://k3.example"
    assert lookup(KUBECONFIG, "clusters[?name=='nope'].cluster.server | [0]", "yaml", query=True) is None
    assert lookup({"a": 1}, "abs(a)", "json", query=True) == 1
    assert lookup({"a": "x"}, "abs(a)", "json", query=True) is None  # a type error on this data: no value


# -------------------------------------------------------------------------------------- the spec side

BASE = 'version: 1\ntool:\n  command: ["{python}", "-c", "pass"]\nworkloads:\n  - kind: keys\n    run: [set, "{key}", "{value}"]\n'


def spec_with(tmp_path: Path, config: str) -> Path:
    path = tmp_path / "clirace.yaml"
    path.write_text(BASE + f"    config: {config}\n")
    return path


def test_spec_config_query(tmp_path):
    spec = load_spec(spec_with(tmp_path, """{path: "{home}/.kube/config", format: yaml, query: "clusters[?name=='{key}'].cluster.server | [0]"}"""))
    config = spec.workloads[0].config
    assert config.query and config.key == "clusters[?name=='{key}'].cluster.server | [0]"
    plain = load_spec(spec_with(tmp_path, '{path: "{home}/c.json", format: json, key: "settings.{key}"}'))
    assert not plain.workloads[0].config.query and plain.workloads[0].config.key == "settings.{key}"


@pytest.mark.parametrize("config, words", [
    ('{path: "{home}/c", format: yaml, key: "{key}", query: "a.{key}"}', "gives both 'key' and 'query'"),
    ('{path: "{home}/c", format: yaml, query: "a[?name==\'{key}\'"}', "is not a JMESPath expression"),
    ('{path: "{home}/c", format: yaml, query: "clusters[0]"}', "never uses {key}"),
    ('{path: "{home}/c", format: yaml, query: "a.{nope}"}', "unknown placeholder '{nope}'"),
])
def test_spec_config_query_refused(tmp_path, config, words):
    with pytest.raises(SpecError) as caught:
        load_spec(spec_with(tmp_path, config))
    assert words in caught.value.paragraph() and ":7:" in caught.value.paragraph()


def test_an_exception_in_cliraces_own_reader_is_its_bug_not_a_torn_config(monkeypatch):
    """Issue 25 item 6: a reader that raises something other than its format's parse error says nothing about the
    file: never "unparseable" (CR113 here, corruption and score 0), but the check undecided and exit 3, once the
    report of what the other checks decided is out."""
    from clirace.cli import _exit_code, _gate
    from clirace.cli.pipeline import judge
    from clirace.errors import EXIT_INTERNAL
    from clirace.spec import configfile
    from clirace.spec.configfile import ReaderFailed

    from .histories import history
    from .test_workload_checks import keys_trial

    def broken(text):  # a bug in clirace's reader, as a KeyError in _parse_ini would be
        raise KeyError("DEFAULT")

    monkeypatch.setattr(configfile, "_json", broken)
    with pytest.raises(ReaderFailed) as caught:
        parse('{"k0": "v0"}', "json")
    assert not isinstance(caught.value, Unparseable) and "KeyError" in str(caught.value)
    result = judge(history(keys_trial('{"k0": "v0", "k1": "v1"}', [True, True])))
    verdict = result.verdicts["keys"]
    assert verdict.status == "unknown" and not verdict.findings, verdict
    assert "CR113" not in [f.code for f in result.findings()] and "keys" in result.clirace_failed()
    _gate(result, 0, False, None)
    assert _exit_code([result]) == EXIT_INTERNAL
