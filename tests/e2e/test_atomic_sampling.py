"""The readers of atomic-config-writes: a batch of parallel writes that ends before they have the evidence a pass
needs (a fast tool, a reader starved of CPU on a loaded machine) is followed by more batches, each writing new
keys, up to a bound; what is still too thin then is undecided, never a pass."""
import pytest

from clirace.checks import atomic_config
from clirace.checks.findings import UNKNOWN
from clirace.history import ConfigSampled, RunOptions
from clirace.scenarios import atomic
from clirace.spec import load_spec

from .test_atomic_kills import SCRIPT_WRITER


@pytest.mark.e2e
@pytest.mark.timeout(60)
def test_readers_short_of_evidence_get_more_write_batches_then_an_undecided_verdict(tmp_path, monkeypatch):
    from clirace.cli import pipeline

    spec_path = tmp_path / "tool.clirace.yaml"
    spec_path.write_text(SCRIPT_WRITER)
    # Evidence no reader can gather (the experiment and the check ask the same question): every batch runs, and
    # the verdict says what was missing.
    monkeypatch.setattr(atomic_config, "MIN_SAMPLES", 10**9)
    result = pipeline.run(load_spec(spec_path), RunOptions(seed=1, parallel=3, only=(atomic_config.ID,),
                                                           strace=False))
    (sampled,) = result.history.of(ConfigSampled)
    writers = sampled.labelled("set-")
    assert len(writers) == atomic.WRITE_BATCHES * 3 and all(w.ok for w in writers), [w.label for w in writers]
    assert len({w.argv[-2] for w in writers}) == len(writers)  # a new key each, so the config keeps changing
    verdict = next(v for v in result.verdicts.values() if v.check == atomic_config.ID)
    assert verdict.status == UNKNOWN and "the readers judged" in verdict.summary, verdict.summary
