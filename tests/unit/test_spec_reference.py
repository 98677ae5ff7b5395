"""docs/spec-reference.md is generated from the spec's JSON Schema: it fails here when the two differ (regenerate
with `python -m clirace.spec.reference > docs/spec-reference.md`)."""
from clirace.spec.reference import render, schema

from ..conftest import ROOT


def test_the_checked_in_spec_reference_is_what_the_schema_generates():
    checked_in = (ROOT / "docs" / "spec-reference.md").read_text()
    assert checked_in == render(schema()), "regenerate: python -m clirace.spec.reference > docs/spec-reference.md"


def test_every_key_of_the_schema_is_in_the_reference():
    text = render(schema())

    def keys(node):
        if isinstance(node, dict):
            for key, child in node.get("properties", {}).items():
                yield key
                yield from keys(child)
            for child in node.values():
                if isinstance(child, (dict, list)):
                    yield from keys(child) if isinstance(child, dict) else (k for c in child for k in keys(c))
    missing = {key for key in keys(schema()) if f"| `{key}` |" not in text} - {"kind"}
    assert missing == set()
