"""Record again the saved histories that tests/unit/test_saved_verdicts.py judges: run from the repository's root,
`python tests/data/histories/record.py [NAME...]` (all of them without a name). Each is a real `clirace check`
of a fixture, with the options the live test of that fixture used, saved with `--history`; record them again
whenever the history format changes or the fixture does, and check that the live verdict was the one the test
asserts (the script prints each score)."""
from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
HERE = Path(__file__).resolve().parent
DIGESTS = HERE / "recorded.json"
# saved history name: (fixture under fixtures/, the check's options)
RECORDED = {
    "adversarial-lock-left-on-sigterm": ("adversarial/lock-left-on-sigterm", ("--seed", "1", "--rounds", "1")),
    "adversarial-lock-held-exit-zero": ("adversarial/lock-held-exit-zero", ("--seed", "1", "--rounds", "1")),
    "adversarial-retry-after-string": ("adversarial/retry-after-string", ("--seed", "1", "--rounds", "1")),
    "adversarial-json-error-wrong-code": ("adversarial/json-error-wrong-code", ("--seed", "1", "--rounds", "1")),
    "adversarial-slow-counter-deadline": ("adversarial/slow-counter-deadline", ("--seed", "1", "--rounds", "1")),
    "adversarial-process-reencodes": ("adversarial/process-reencodes", ("--seed", "1", "--rounds", "1")),
}


def fixture_digest(fixture: str) -> str:
    """sha256 over every file the fixture's tool runs or reads: its folder (spec, tool, README), and for an
    adversarial variant the loader and the reference levels it is built from. A saved history judges the tool as it
    was recorded, so the tests refuse one whose fixture changed since (recorded.json keeps the digest of each)."""
    fixtures = ROOT / "fixtures"
    folder = fixtures / fixture
    paths = [p for p in folder.rglob("*") if p.is_file() and "__pycache__" not in p.parts]
    paths += [fixtures / "adversarial" / "_level.py", *fixtures.glob("level*/tool.py")]
    digest = hashlib.sha256()
    for path in sorted(paths):
        digest.update(str(path.relative_to(fixtures)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def record(name: str) -> None:
    fixture, options = RECORDED[name]
    saved = HERE / f"{name}.json"
    proc = subprocess.run([sys.executable, "-m", "clirace", "check", f"fixtures/{fixture}/clirace.yaml", *options,
                           "--format", "json", "--history", str(saved)], cwd=ROOT, capture_output=True, text=True)
    if proc.returncode not in (0, 1):
        sys.exit(f"{name}: clirace check exited {proc.returncode}: {proc.stderr[-2000:]}")
    result = json.loads(proc.stdout)
    digests = json.loads(DIGESTS.read_text()) if DIGESTS.exists() else {}
    digests[name] = fixture_digest(fixture)
    DIGESTS.write_text(json.dumps(dict(sorted(digests.items())), indent=1) + "\n")
    print(f"{name}: score {result['score']}, {saved.stat().st_size} bytes")


if __name__ == "__main__":
    for name in sys.argv[1:] or RECORDED:
        record(name)
