"""What `clirace init --probe` makes of what one run left behind (cli/probe.py), on literal files and observations:
where the probe's key landed, as config.key must say it for the checks' own reader to find it; the format of a
name:value file; and a run that failed against a server it could not reach, said in the spec."""
import pytest
import yaml

from clirace.cli.probe import Observed, _format, _key_path, _render
from clirace.spec import configfile


@pytest.mark.parametrize("name, text, fmt, expected", [
    # npm config set @{key}:registry URL: the key is part of a longer name, outside any section
    (".npmrc", "@cliracek0:registry=https://cliracev0.example/\n", "ini", "@{key}:registry"),
    # rclone config create {key} alias remote {value}: the key names a section, the value is one of its keys
    ("rclone.conf", "[first]\ntype = alias\nremote = /srv\n\n[cliracek0]\ntype = alias\nremote = cliracev0\n", "ini",
     "{key}.remote"),
    # htpasswd -b -p FILE {key} {value}: name:value lines
    (".htpasswd", "first:secret\ncliracek0:cliracev0\n", "ini", "{key}"),
    ("pip.conf", "[clirace]\ncliracek0 = cliracev0\n", "ini", "clirace.{key}"),
    ("package.json", '{"name": "example", "cliracek0": "cliracev0"}', "json", "{key}"),
    ("c.yaml", "profiles:\n  cliracek0: {url: cliracev0}\n", "yaml", "profiles.{key}.url"),
])
def test_the_key_is_found_where_the_checks_reader_finds_it(tmp_path, name, text, fmt, expected):
    path = tmp_path / name
    path.write_text(text)
    assert _format(path) == fmt
    found = _key_path(path, fmt)
    assert found == expected
    data = configfile.parse(text, fmt)
    assert "cliracev0" in str(configfile.lookup(data, found.replace("{key}", "cliracek0"), fmt))


def test_a_key_the_run_never_wrote_is_not_found(tmp_path):
    path = tmp_path / ".npmrc"
    path.write_text("registry=https://example/\n")
    assert _key_path(path, "ini") is None


def test_a_failed_run_against_a_server_says_so_and_its_stderr_stays_in_one_comment():
    seen = Observed(["psql", "-c", "UPDATE c SET n = n + 1"], 0.2, 2, note="it exited 2: psql: error: connection "
                    "to server on socket \"/var/run/postgresql/.s.PGSQL.5432\" failed")
    text = _render(["psql"], [seen], ["-c", "SELECT n FROM c"], ["printf x > {home}/f", ["-c", "SELECT 1"]], "")
    assert "# NOT FOUND: the state it changes: it failed run alone" in text
    assert "could not reach a server, which the probe does not start: declare it under services" in text
    spec = yaml.safe_load(text)  # every line of it is YAML: the comment did not spill
    assert spec["setup"] == [{"sh": "printf x > {home}/f"}, ["-c", "SELECT 1"]]
    assert spec["workloads"][0]["run"] == ["-c", "UPDATE c SET n = n + 1"]
