"""Per-code explanations (rubric/explain.yaml): what a rule means, why it matters to an agent calling the
tool, how to fix it, with a before/after example. `clirace explain CODE` prints one; SARIF uses them as help.

Kept apart from rubric/rules.yaml (the catalogue the checks report from) so that prose can grow without
touching the data the verdicts depend on; a test keeps the two in step.
"""
from __future__ import annotations

from functools import lru_cache
from typing import Any

# (from the catalogue itself, not verdict/rubric.py's re-export: `clirace explain` needs no scorer)
from clirace.checks.catalogue import load_yaml, rubric_dir, rules

FIELDS = ("means", "matters", "fix", "before", "after")


@lru_cache(maxsize=1)
def explanations() -> dict[str, dict[str, str]]:
    path = rubric_dir() / "explain.yaml"
    found: dict[str, dict[str, str]] = load_yaml(path) if path.exists() else {}
    return found


def explanation(code: str) -> dict[str, str] | None:
    """The explanation of `code` (FIELDS), or None for a code clirace does not know."""
    code = code.upper()
    if code not in rules():
        return None
    return _fields(code)


def _fields(code: str) -> dict[str, str]:
    """Every one of FIELDS for an upper-case code, "" where explain.yaml says nothing."""
    return {**{k: "" for k in FIELDS}, **(explanations().get(code) or {})}


def _known(code: str) -> tuple[dict[str, Any], dict[str, str]]:
    """The rule and explanation of a code clirace knows (KeyError otherwise, as rules()[code] raises)."""
    return rules()[code.upper()], _fields(code.upper())


def as_text(code: str, width: int = 100) -> str:
    """For a terminal: prose wrapped to `width`, examples as they are."""
    import textwrap

    rule, ex = _known(code)
    parts = [f"{code.upper()} {rule['name']} [{rule['severity']}]", ""]
    for title, key in (("What it means", "means"), ("Why it matters to an agent", "matters"), ("How to fix it", "fix")):
        text = ex[key] or (rule.get("fix", "") if key == "fix" else "")
        if text:
            parts += [f"{title}:", textwrap.fill(" ".join(text.split()), width, initial_indent="  ",
                                                 subsequent_indent="  "), ""]
    for title, key in (("Before", "before"), ("After", "after")):
        if ex[key]:
            parts += [f"{title}:", *("    " + line for line in ex[key].rstrip().splitlines()), ""]
    return "\n".join(parts).rstrip() + "\n"


def as_markdown(code: str) -> str:
    rule, ex = _known(code)
    parts: list[str] = []
    for title, key in (("What it means", "means"), ("Why it matters", "matters"), ("How to fix it", "fix")):
        text = ex[key] or (rule.get("fix", "") if key == "fix" else "")
        if text:
            parts += [f"**{title}.** {' '.join(text.split())}", ""]
    for title, key in (("Before", "before"), ("After", "after")):
        if ex[key]:
            parts += [f"**{title}:**", "", "```", ex[key].rstrip(), "```", ""]
    return "\n".join(parts).rstrip() + "\n"


def about(name: str, width: int = 100) -> str | None:
    """For `clirace explain` given a criterion id or a check name (not a code): the criterion, its level and
    text, and the checks that decide it with the codes each can emit; None when `name` is neither."""
    import textwrap

    from clirace.checks.catalogue import load_section
    from clirace.checks.registry import EXPERIMENTS, resolve

    section = load_section("s15")
    check = resolve(name)
    found = [(level["score"], c) for level in section["levels"] for c in level.get("criteria", [])
             if c["id"] == name or (check is not None and check in c["checks"])]
    if not found:
        return None
    level, criterion = found[0]
    is_criterion = criterion["id"] == name
    checks: list[str] = [check] if check is not None and not is_criterion else criterion["checks"]
    head = f"criterion {name}" if is_criterion else f"check {check} (under criterion {criterion['id']})"
    lines = [f"{head}, level {level} of §{section['section']} {section['title']}", "",
             textwrap.fill(" ".join(criterion["text"].split()), width), ""]
    for check_id in checks:
        lines.append(f"check {check_id} (experiment: {EXPERIMENTS[check_id].scenario}) can emit:")
        lines += [f"  {code} {rules()[code]['name']} [{rules()[code]['severity']}]"
                  for code in EXPERIMENTS[check_id].codes if not rules()[code].get("retired")]
    lines += ["", "`clirace explain CODE` explains a code."]
    return "\n".join(lines) + "\n"
