"""The spec's `services:` section: what it declares, the placeholders it allows, and the server locks of
`lock.hold.take`; the services' messages when a binary is missing. Loads specs only: no server starts."""
from __future__ import annotations

from pathlib import Path

import pytest

from clirace.cli.validate import coverage
from clirace.errors import SpecError
from clirace.run import services
from clirace.spec import load_spec

pytestmark = pytest.mark.timeout(10)
SERVERS = Path(__file__).resolve().parents[2] / "fixtures" / "servers"
BASE = 'version: 1\ntool:\n  command: ["{python}", "-c", "pass"]\n'
COUNTER = 'workloads:\n  - kind: counter\n    run: ["incr", "{redis_url}"]\n    read: ["get"]\n'


def write(tmp_path: Path, text: str) -> Path:
    spec = tmp_path / "clirace.yaml"
    spec.write_text(text)
    return spec


@pytest.mark.parametrize("path", sorted(SERVERS.glob("*/*.yaml")), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_server_fixture_specs_load(path):
    spec = load_spec(path)
    assert spec.services is not None and (spec.services.redis or spec.services.postgres)


def test_services_are_read(tmp_path):
    spec = load_spec(write(tmp_path, BASE + 'services:\n  redis: {}\n  postgres:\n    setup: [["init"], "seed --n 3"]\n'))
    assert spec.services.redis and spec.services.postgres
    assert spec.services.postgres_setup == (("init",), ("seed", "--n", "3"))


def test_a_server_placeholder_needs_its_service_declared(tmp_path):
    with pytest.raises(SpecError) as caught:
        load_spec(write(tmp_path, BASE + COUNTER))
    assert "{redis_url}" in caught.value.message and "services.redis" in caught.value.message
    assert "services: {redis: {}}" in caught.value.hint
    assert load_spec(write(tmp_path, BASE + "services:\n  redis: {}\n" + COUNTER)).workloads[0].run[1] == "{redis_url}"


@pytest.mark.parametrize("take,problem", [
    ('{kind: redis-nx, key: "lock:x"}', "declares no services.redis"),
    ('{kind: pg-row, row: "t WHERE id = 1"}', "declares no services.postgres"),
    ('{kind: redis-nx}', "key"),
    ('{kind: pg-row}', "row"),
    ('{kind: flock}', "path"),
])
def test_server_locks_need_their_service_and_their_name(tmp_path, take, problem):
    lock = f'lock:\n  contender: ["x"]\n  hold:\n    take: {take}\n'
    with pytest.raises(SpecError) as caught:
        load_spec(write(tmp_path, BASE + lock))
    assert problem in caught.value.paragraph()


def test_a_server_lock_is_read(tmp_path):
    lock = 'lock:\n  contender: ["x"]\n  hold:\n    take: {kind: redis-nx, key: "lock:hits", ttl: 5s}\n'
    hold = load_spec(write(tmp_path, BASE + "services:\n  redis: {}\n" + lock)).lock.hold
    assert (hold.kind, hold.key, hold.ttl, hold.kind.on_server) == ("redis-nx", "lock:hits", 5.0, True)


def test_a_missing_server_names_its_binary_the_criteria_and_the_install(monkeypatch):
    spec = load_spec(SERVERS / "redis-incr-lock" / "clirace.yaml")
    monkeypatch.setattr(services.shutil, "which", lambda name: None)
    message = services.missing_message(spec, ["no-silent-corruption", "lock-excludes"])
    assert message.startswith("services.redis needs redis-server, which is not installed")
    assert "no-silent-corruption, lock-excludes cannot be tested" in message and "apt-get install redis-server" in message
    cov = coverage(spec, (True, ""))
    assert not any(c.testable for c in cov)
    assert {c.criterion for c in cov if c.how.startswith("services.redis needs redis-server")} == {
        "no-silent-corruption", "lock-excludes", "lock-error-structured", "lock-released-on-exit", "lock-wait-timeout"}
    with pytest.raises(SpecError):
        services.require(spec, ["no-silent-corruption"])
