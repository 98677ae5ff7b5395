"""Every test in tests/e2e launches real target processes: all are marked e2e here, so that
`pytest -m "not e2e"` (the fast subset, tests/unit) launches none, whether or not a test remembered its marker."""
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(items):
    for item in items:
        if HERE in Path(str(item.path)).resolve().parents:
            item.add_marker(pytest.mark.e2e)
