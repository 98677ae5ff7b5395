"""The Markdown report is safe by construction: what the target printed renders only as code.

The history is literal; the hostile text is imported from the hostile fixture that prints it, so this test and
`tests/e2e/test_hostile_reports.py` (which runs the fixture for real) check the same bytes.
"""
import re

from markdown_it import MarkdownIt

from clirace.report import to_markdown
from clirace.report.markdown import fenced

from .hostile import HOSTILE, hostile_result

OURS = {"<details><summary>Evidence</summary>\n", "</details>\n"}  # the only HTML clirace writes itself
MARKERS = ("@octocat", "<img", "[link", "http://", "<details>", "**locked**", "\x1b", "\x07", "\x9b", "_em_")


def tokens(markdown):
    def walk(toks):
        for t in toks:
            yield t
            yield from walk(t.children or [])
    return list(walk(MarkdownIt("commonmark").enable("table").parse(markdown)))


def test_hostile_text_renders_only_inside_code():
    markdown = to_markdown(hostile_result())
    toks = tokens(markdown)
    assert {t.type for t in toks} & {"link_open", "image", "html_inline"} == set()
    assert {t.content for t in toks if t.type == "html_block"} <= OURS
    outside = [t.content for t in toks if t.type == "text"]
    for marker in MARKERS:
        assert not any(marker in text for text in outside), marker
    assert not any("@" in text for text in outside)  # no mention at all outside code
    inside = " ".join(t.content for t in toks if t.type in ("code_inline", "fence"))
    assert HOSTILE[:60] in inside and "\\x1b]52;c;" in inside  # shown, as inert text
    assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]", markdown)


def test_every_finding_folds_its_evidence():
    markdown = to_markdown(hostile_result())
    assert markdown.count("<details><summary>Evidence</summary>") == markdown.count("#### CR") > 0
    assert markdown.count("<details><summary>") == markdown.count("\n</details>")


def test_a_fence_is_longer_than_any_backtick_run_inside():
    block = fenced("a ```` b\n`````")
    assert block.startswith("``````text\n") and block.endswith("\n``````")
    assert [t.type for t in tokens(block)] == ["fence"]


def test_an_oversized_report_drops_whole_findings_with_a_note():
    result = hostile_result()
    full = to_markdown(result)
    cut = to_markdown(result, limit=len(full) - 10)
    assert len(cut) <= len(full) - 10
    assert "more findings not shown" in cut
    assert cut.count("<details><summary>") == cut.count("\n</details>")
    assert sum(1 for t in tokens(cut) if t.type == "fence") == cut.count("<details><summary>")


def test_runner_paths_are_shortened_and_controls_escaped():
    import sys
    import tempfile

    from clirace.report._safe import clean
    run = f"{tempfile.gettempdir()}/clirace-ab12cd34"
    text = f"{run}/lock-3/home/x {run} {sys.executable} /src/proj/tool.py \x1b[2J\x9b\x00"
    assert clean(text, "/src/proj") == "{sandbox}/home/x {run} {python} {spec_dir}/tool.py \\x1b[2J\\x9b\\x00"


def test_the_gate_the_blockers_and_a_comparison_stay_safe_and_clirace_s_own_counts_plain():
    from clirace.cli.pipeline import snapshot_of
    from clirace.report.markdown import plain_or_code
    from clirace.verdict import baseline

    result = hostile_result()
    old = snapshot_of(result, f"before-{HOSTILE[:40]}.json")
    result.comparison = baseline.compare(old, snapshot_of(result))
    result.comparison.notes.append("note " + HOSTILE)
    markdown = to_markdown(result)
    assert markdown.splitlines()[0].endswith("gate ❌ failed")
    toks = tokens(markdown)
    assert {t.type for t in toks} & {"link_open", "image", "html_inline"} == set()
    outside = [t.content for t in toks if t.type == "text"]
    for marker in MARKERS:
        assert not any(marker in text for text in outside), marker
    assert any("lost 1 of 1 increments" in text for text in outside)  # clirace's own counts: not in code spans
    assert plain_or_code("CR111 lost-key: 3 of 3 rounds") == "CR111 lost-key: 3 of 3 rounds"
    assert plain_or_code("see [x](http://e)").startswith("`")


def test_the_paths_clirace_really_makes_read_as_run_and_sandbox():
    """make_workdir's folder is clirace-PID-HEX (dashes in its name), a sandbox KIND-HEX (kill-points-...), the private
    folder .clirace-PID-HEX.HEX: each read as {run} or {sandbox}, never half-shortened ("{run}-ab12/kill-points-...")."""
    import tempfile

    from clirace.report._safe import clean
    run = f"{tempfile.gettempdir()}/clirace-4242-9f8e7d6c5b4a3921"
    private = f"{tempfile.gettempdir()}/.clirace-4242-9f8e7d6c5b4a3921.0a1b2c3d4e5f6789"
    text = f"{run}/kill-points-00aa11bb22cc33dd/home/.config/t.json; {run}; {private}/5e6f/kill-1.log"
    assert clean(text) == "{sandbox}/home/.config/t.json; {run}; {run}/5e6f/kill-1.log"
