"""GitHub Actions workflow commands: one annotation per finding rule, at the spec line of what was exercised.

`::error file=SPEC,line=L,col=C,title=CRxxx name::message`, escaped as the runner expects: in the message
`%`, CR and LF; in properties also `:` and `,`. Target text is cleaned first (control characters escaped, one
line), so nothing it printed can start a workflow command of its own.
"""
from __future__ import annotations

from ..rubric import load_section
from ._group import more_text
from ._locate import display_path, located_findings
from ._safe import clean, replay, spec_dir_of

LEVEL = {"corruption": "error", "error": "error"}  # advisory and info: notice


def escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def to_github(result) -> str:
    spec_dir = spec_dir_of(result)
    lines = []
    groups: dict[str, list] = {}
    for finding, check, place in located_findings(result):
        groups.setdefault(finding.code, []).append((finding, check, place))
    for code, items in groups.items():
        finding, check, place = items[0]
        message = clean(finding.message(), spec_dir)
        if len(items) > 1:
            message += f" ({more_text([f for f, _, _ in items[1:]])})"
        if finding.rule.get("fix"):
            message += f" Fix: {finding.rule['fix']}"
        message += f" Replay: {replay(result, finding.evidence.replay)}"
        props = {"file": place.path, "line": str(place.line), "col": str(place.column),
                 "title": f"{code} {finding.rule['name']}"}
        rendered = ",".join(f"{k}={escape_property(v)}" for k, v in props.items() if v)
        lines.append(f"::{LEVEL.get(finding.severity, 'notice')} {rendered}::{escape_data(message)}")
    spec = display_path(result.spec_path)
    top = max(level["score"] for level in load_section("s15")["levels"])
    summary = f"clirace score {result.score.score}/{top} for {clean(spec)}: {result.score.line}"
    lines.append(f"::notice title={escape_property('clirace score')}::{escape_data(summary)}")
    return "\n".join(lines)
