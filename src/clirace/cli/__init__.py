"""`clirace` on the command line. Exit codes: 0 the gate passed (or --exit-zero), 1 it failed (silent corruption,
no-silent-corruption not decided without --allow-undecided,
a score below --min-score, a regression against --baseline; `diff`: a regression), 2 bad spec, option or path,
3 internal error, 4 what the check made could not all be removed, 130 interrupted (Ctrl-C), 141 the reader of
stdout closed it early (`| head -1`; nothing more is said), 143 terminated (SIGTERM). See verdict/gate.py.

The folder cli/: The entry points: the command line, the pipeline that the command line, the Python API and the
pytest plugin share.

May import: anything in clirace; nothing imports it but the package face, __main__ and pytest_plugin.
"""
from __future__ import annotations

import signal
import sys
from dataclasses import replace
from enum import Enum
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any, NoReturn, TextIO

import typer
import typer.core

from clirace import errors
from clirace.cli._checking import Signals, check_each
from clirace.cli._outputs import FORMATS

if TYPE_CHECKING:
    from clirace.cli._checking import Item
    from clirace.cli._outputs import Outputs, Pinned
    from clirace.verdict.baseline import Snapshot
    from clirace.verdict.gate import Gate
    from clirace.verdict.result import Result

CONTEXT = {"help_option_names": ["-h", "--help"]}
app = typer.Typer(add_completion=True, no_args_is_help=True, rich_markup_mode=None, context_settings=CONTEXT,
                  help="Run a CLI's mutating commands in parallel and score how it copes (rubric §15).")


# Choices made from one list each (Format: _outputs.FORMATS); mypy cannot see members made from a list, so their
# `.value` is Any to it.
Format = Enum("Format", {name: name for name in FORMATS}, type=str)  # type: ignore[misc]
DiffFormat = Enum("DiffFormat", {name: name for name in ("text", "json", "markdown", "github")}, type=str)  # type: ignore[misc]
Color = Enum("Color", {name: name for name in ("auto", "always", "never")}, type=str)  # type: ignore[misc]


FORMAT_HELP = ("Format on stdout (or -o): text (a table), json, markdown (a pull request or step summary), github "
               "(workflow annotations), junit (CI test results) or sarif (code scanning).")
REPORT_HELP = "Also write FORMAT to PATH, e.g. sarif=clirace.sarif (repeatable; each file written atomically)."
OUTPUT_HELP = "Write the --format report to this file instead of stdout."
MIN_SCORE_HELP = "The gate also fails below this score (default: [tool.clirace] min-score, else 0)."
EXIT_ZERO_HELP = ("Exit 0 even when the gate fails (silent corruption, a score below --min-score, a regression); "
                  "the reports still say it failed.")
ALLOW_UNDECIDED_HELP = ("Let the gate pass when no-silent-corruption was not decided (undecided, or not tested: a "
                        "spec without workloads); the gate line still says it was not decided.")
OUTSIDE_HELP = "Accept spec paths outside the trial's sandbox (the real home, /tmp, any literal absolute path)."
COLOR_HELP = "Colour in the text report: auto (a terminal; NO_COLOR and FORCE_COLOR are honoured), always, never."
QUIET_HELP = "No progress lines on stderr; only the report (and errors)."
SPECS_HELP = ("Spec files, or directories holding clirace.yaml or *.clirace.yaml files (default: [tool.clirace] "
              "specs in the nearest pyproject.toml). `clirace init` writes a starter, `clirace validate` checks it.")


@app.command()
def check(
    specs: list[Path] | None = typer.Argument(None, metavar="SPEC...", help=SPECS_HELP, show_default=False),
    format: Format = typer.Option("text", "--format", "--output-format", "-f", help=FORMAT_HELP),
    min_score: int | None = typer.Option(None, "--min-score", metavar="N", min=0, max=3, help=MIN_SCORE_HELP),
    exit_zero: bool = typer.Option(False, "--exit-zero", help=EXIT_ZERO_HELP),
    allow_undecided: bool = typer.Option(False, "--allow-undecided", help=ALLOW_UNDECIDED_HELP),
    baseline: Path | None = typer.Option(None, "--baseline", metavar="OLD", help="Compare with an earlier run (a saved --format json result or --history): each finding and criterion fixed, new, still or undecided; a regression fails the gate."),
    confidence: float | None = typer.Option(None, "--confidence", metavar="C", help="With --rate R: run enough rounds that a race showing in R of rounds would have shown with probability >= C (e.g. 0.99)."),
    rate: float | None = typer.Option(None, "--rate", metavar="R", help="See --confidence (e.g. 0.1: 44 rounds at 0.99)."),
    seed: int | None = typer.Option(None, "--seed", metavar="N", min=0, max=2**63 - 1, help="Seed for every random choice; printed with the result."),
    rounds: int | None = typer.Option(None, "--rounds", metavar="N", min=1, max=100, help="Parallel rounds per workload (default: [tool.clirace] rounds, the spec's, else 3)."),
    parallel: int | None = typer.Option(None, "--parallel", metavar="N", min=2, max=256, help="Invocations per round (default: the spec's, else 8)."),
    budget: float | None = typer.Option(None, "--budget", min=1, max=3600, metavar="SECONDS", help="After the spec's rounds, keep adding rounds (at a rendezvous, or amplified) until this many seconds have gone on them, shared among the workloads: more rounds, a smaller detection bound."),
    only: list[str] | None = typer.Option(None, "--only", metavar="CHECK", help="Run only this check (repeatable); see `clirace checks`."),
    shard: str | None = typer.Option(None, "--shard", metavar="K/N", help="Run the K-th of N shares of the check (with the same --seed on every machine); join the shards' --history files with `clirace judge H1 H2 ...`."),
    keep: bool = typer.Option(False, "--keep", help="Keep the sandboxes and print where they are."),
    no_strace: bool = typer.Option(False, "--no-strace", help="Do not use strace (file observation, crash injection)."),
    history: Path | None = typer.Option(None, "--history", metavar="PATH", help="Save the run's history here (re-judge with `clirace judge`); with several specs, a directory."),
    output: Path | None = typer.Option(None, "--output", "-o", metavar="PATH", help=OUTPUT_HELP),
    report: list[str] | None = typer.Option(None, "--report", metavar="FORMAT=PATH", help=REPORT_HELP),
    allow_outside_sandbox: bool = typer.Option(False, "--allow-outside-sandbox", help=OUTSIDE_HELP),
    quiet: bool = typer.Option(False, "--quiet", "-q", help=QUIET_HELP),
    color: Color = typer.Option("auto", "--color", help=COLOR_HELP),
) -> None:
    """Check the tools described by SPECS and print each one's §15 score with the evidence. Exit 0 when the gate
    passes, 1 when it fails (silent corruption, or no-silent-corruption not decided without --allow-undecided, a
    score below --min-score, a regression against --baseline), 2 for a bad spec or option."""
    from clirace.cli import _pyproject
    from clirace.run.cleanup import adopt_orphans

    settings = _pyproject.find(Path.cwd())
    paths = _pyproject.expand(list(specs or settings.specs))
    if not paths:
        raise errors.UsageError("no spec given, and no [tool.clirace] specs in a pyproject.toml here or above.",
                                hint="e.g. `clirace check clirace.yaml`; `clirace init` writes a starter spec.")
    min_score = min_score if min_score is not None else settings.min_score or 0
    rounds = rounds or settings.rounds
    checks = []
    if only:
        from clirace.checks import registry
    for name in only or ():
        resolved = registry.resolve(name)
        if resolved is None:
            raise errors.UsageError(f"--only {name!r} is not a check.", hint=f"Checks: {', '.join(registry.EXPERIMENTS)}.")
        checks.append(resolved)
    if shard is not None:
        from clirace.history import shards
        shard = shards.label(shards.parse(shard))
        if budget is not None:
            raise errors.UsageError("--budget and --shard do not go together: a budget's rounds depend on each "
                                    "machine's speed, so the shards would not divide one plan.",
                                    hint="Give the rounds instead: --rounds N (or --confidence C --rate R).")
        if seed is None:
            raise errors.UsageError("--shard needs --seed: every shard must make the same choices.",
                                    hint="e.g. --seed 42 --shard 1/2 on one machine and --seed 42 --shard 2/2 on another.")
    if (confidence is None) != (rate is None):
        raise errors.UsageError("--confidence and --rate go together.", hint="e.g. --confidence 0.99 --rate 0.1.")
    if baseline is not None and len(paths) > 1:
        raise errors.UsageError("--baseline compares one spec's run; give one spec.",
                                hint="Or compare saved results with `clirace diff OLD NEW`, one spec at a time.")
    needed = old = None
    if baseline is not None or confidence is not None:  # (baseline reads the checks' bounds: imported only here)
        from clirace.verdict.baseline import rounds_for
        needed = rounds_for(confidence, rate) if confidence is not None and rate is not None else None
        if baseline is not None:
            from clirace.cli.pipeline import load_baseline
            old = load_baseline(baseline)
    outputs = _outputs(format, output, report, history, color)
    from clirace.history import RunOptions, new_seed
    opts = RunOptions(seed=seed if seed is not None else new_seed(), rounds=rounds, parallel=parallel, budget=budget,
                      only=tuple(checks), strace=not no_strace, allow_outside_sandbox=allow_outside_sandbox,
                      confidence=confidence, rate=rate, shard=shard or "")
    adopt_orphans()  # this process is clirace's own: it may adopt (and end) what its targets orphan
    with Signals() as signals, _pinned(outputs, paths) as pinned:
        items = check_each(paths, opts, needed, lambda done: _emit(done, outputs, pinned), quiet=quiet, keep=keep,
                           raise_spec_errors=len(paths) == 1 and not outputs.paths() and outputs.format == "text",
                           signals=signals)
        # Decided: a signal from here on is noted, and the result still written whole (then exit 130 or 143).
        signals.deferred()
        from clirace.report._failed import Failed  # (the report, imported now rather than by _emit below)

        for item in items:
            if not isinstance(item, Failed):
                _gate(item, min_score, exit_zero, old, allow_undecided)
        _emit(items, outputs, pinned)
    if signals.received is not None:
        print(f"clirace: {'interrupted' if signals.received == signal.SIGINT else 'terminated'} while writing "
              "the result; it was written whole.", file=sys.stderr)
    raise typer.Exit(signals.exit_code(_exit_code(items)))


def _gate(result: Result, min_score: int, exit_zero: bool, old: Snapshot | None, allow_undecided: bool = False) -> None:
    from clirace.cli.pipeline import snapshot_of
    from clirace.verdict import baseline, gate
    if old is not None:
        result.comparison = baseline.compare(old, snapshot_of(result))
    result.gate = gate.evaluate(result, min_score, exit_zero, result.comparison, allow_undecided)


def _gate_of(result: Result) -> Gate:
    if result.gate is None:  # every command evaluates the gate before it writes a report: never met
        raise errors.InternalError(f"{result.spec_path}: the exit status was asked before the gate was evaluated")
    return result.gate


def _exit_code(items: list[Item], judged: bool = False) -> int:
    """4 when what a check made could not all be removed, else 2 when a spec could not be checked, else 1 when a
    gate failed, else 0: one status for every spec. (`judged`: a saved history re-judged made nothing to remove.)"""
    from clirace.report._failed import Failed  # (imported by now: the report was written)

    codes = [item.exit_code if isinstance(item, Failed) else
             errors.EXIT_NOT_REMOVED if item.history.not_removed and not judged else _gate_of(item).exit_code
             for item in items]
    for item in items:  # a check that itself failed is clirace's bug: exit 3, after the report of the rest
        for check, said in (item.clirace_failed() if not isinstance(item, Failed) else {}).items():
            bug = errors.InternalError(f"the check {check} failed ({said}); the report says what the others decided")
            typer.echo(f"clirace: {bug.paragraph()}", err=True)
            codes.append(errors.EXIT_INTERNAL)
    return max(codes, default=errors.EXIT_OK)


@app.command()
def judge(
    histories: list[Path] = typer.Argument(..., metavar="HISTORY...", help="A history saved by `clirace check --history`, or the histories of every shard of one check (`--shard K/N`), joined into one verdict."),
    format: Format = typer.Option("text", "--format", "--output-format", "-f", help=FORMAT_HELP),
    min_score: int | None = typer.Option(None, "--min-score", metavar="N", min=0, max=3, help=MIN_SCORE_HELP),
    exit_zero: bool = typer.Option(False, "--exit-zero", help=EXIT_ZERO_HELP),
    allow_undecided: bool = typer.Option(False, "--allow-undecided", help=ALLOW_UNDECIDED_HELP),
    baseline: Path | None = typer.Option(None, "--baseline", metavar="OLD", help="Compare with an earlier run (a saved JSON result or history)."),
    output: Path | None = typer.Option(None, "--output", "-o", metavar="PATH", help=OUTPUT_HELP),
    report: list[str] | None = typer.Option(None, "--report", metavar="FORMAT=PATH", help=REPORT_HELP),
    quiet: bool = typer.Option(False, "--quiet", "-q", help=QUIET_HELP),
    color: Color = typer.Option("auto", "--color", help=COLOR_HELP),
) -> None:
    """Judge a saved history again, without launching anything (exit status as `check`'s)."""
    from clirace.cli import _pyproject
    from clirace.cli.pipeline import judge as judge_history
    from clirace.cli.pipeline import load_baseline as load
    from clirace.history import History
    from clirace.report._failed import Failed

    settings = _pyproject.find(Path.cwd())
    min_score = min_score if min_score is not None else settings.min_score or 0
    old = load(baseline) if baseline is not None else None
    outputs = _outputs(format, output, report, None, color)
    from clirace.history.shards import merge

    with _pinned(outputs, list(histories)) as pinned:
        try:
            result = judge_history(merge([History.load(h) for h in histories], [str(h) for h in histories]))
            _gate(result, min_score, exit_zero, old, allow_undecided)
            item: Item = result
        except errors.HistoryError as exc:
            if not outputs.paths() and outputs.format == "text":
                raise
            print(f"clirace: {exc.paragraph()}", file=sys.stderr)  # an error, said even with -q
            item = Failed(str(histories[0]), exc)
        _emit([item], outputs, pinned)
    raise typer.Exit(_exit_code([item], judged=True))


@app.command()
def diff(
    old: Path = typer.Argument(..., metavar="OLD", help="The earlier run: a saved JSON result (--format json) or history (--history)."),
    new: Path = typer.Argument(..., metavar="NEW", help="The later run, the same way."),
    format: DiffFormat = typer.Option("text", "--format", "--output-format", "-f", help="text, json, markdown or github."),
    output: Path | None = typer.Option(None, "--output", "-o", metavar="PATH", help="Write it to this file instead of stdout."),
    report: list[str] | None = typer.Option(None, "--report", metavar="FORMAT=PATH",
                                               help="Also write FORMAT (text, json, markdown, github) to PATH "
                                                    "(repeatable; each file written atomically)."),
    exit_zero: bool = typer.Option(False, "--exit-zero", help="Exit 0 even on a regression; the output still says it."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help=QUIET_HELP),
) -> None:
    """Compare two runs: each finding and criterion fixed, new, still or undecided, with the detection bound that
    makes "fixed" believable. Exit 1 on a regression (a new finding, a lower score, a criterion from pass to fail)."""
    from clirace.cli._outputs import parse_report
    from clirace.cli.pipeline import load_baseline as load
    from clirace.report.diff import RENDERERS
    from clirace.verdict.baseline import compare

    reports = tuple(parse_report(r, tuple(RENDERERS)) for r in report or ())
    outputs = _outputs(Format(format.value), output, None, None, Color("auto"))
    comparison = compare(load(old), load(new))
    with _pinned(replace(outputs, reports=reports), []) as pinned:
        for fmt, path in reports:
            pinned.destination("--report", path).write(_terminated(RENDERERS[fmt](comparison)))
        text = _terminated(RENDERERS[format.value](comparison))
        if output is not None:
            pinned.destination("-o", output).write(text)
        else:
            sys.stdout.write(text)
    from clirace.verdict.gate import EXIT_GATE_FAILED
    raise typer.Exit(EXIT_GATE_FAILED if comparison.regressions() and not exit_zero else errors.EXIT_OK)


def _terminated(text: str) -> str:
    return text if text.endswith("\n") else text + "\n"


@app.command()
def schema(
    result: bool = typer.Option(False, "--result", help="Print the schema of `--format json` output instead."),
) -> None:
    """Print the JSON Schema of the spec format (or, with --result, of the JSON result)."""
    from importlib import resources
    name = "result_schema.json" if result else "spec_schema.json"
    print(resources.files("clirace.report" if result else "clirace.spec").joinpath(name).read_text().rstrip("\n"))


def _version(value: bool) -> None:
    if value:
        from clirace.history.version import __version__
        print(f"clirace {__version__}")
        raise typer.Exit(errors.EXIT_OK)


@app.callback()
def _main(
    version: bool = typer.Option(False, "--version", "-V", callback=_version, is_eager=True,
                                 help="Print the clirace version and exit."),
) -> None:
    """Run a CLI's mutating commands in parallel and score how it copes (rubric §15)."""


@app.command()
def checks(
    format: str = typer.Option("text", "--format", "--output-format", "-f", metavar="FORMAT",
                               help="text (for reading) or json (for tools).", show_default=True),
) -> None:
    """List the criteria, the checks that decide them (with the experiment each runs and the codes it can
    emit), and the rules."""
    import shutil
    import textwrap

    from clirace.checks.catalogue import load_section, rules
    from clirace.checks.registry import EXPERIMENTS

    if format not in ("text", "json"):
        raise errors.UsageError(f"--format {format!r} is not a format of `clirace checks`.", hint="Give text or json.")
    if format == "json":
        import json
        section = load_section("s15")
        print(json.dumps({
            "section": section["section"], "title": section["title"],
            "criteria": [{"id": c["id"], "level": level["score"], "text": " ".join(c["text"].split()),
                          "checks": [{"id": check_id, "experiment": EXPERIMENTS[check_id].scenario,
                                      "codes": list(EXPERIMENTS[check_id].codes)} for check_id in c["checks"]]}
                         for level in section["levels"] for c in level.get("criteria", [])],
            "rules": [{"code": code, "name": rule["name"], "severity": rule["severity"], "check": rule["check"],
                       "fix": rule.get("fix", "")} for code, rule in rules().items() if not rule.get("retired")],
        }, indent=2))
        return

    width = max(40, min(shutil.get_terminal_size((100, 24)).columns, 120))

    def block(head: str, lines: list[str], indent: int) -> None:
        print(head)
        for line in lines:
            print(textwrap.fill(line, width, initial_indent=" " * indent, subsequent_indent=" " * indent))

    section = load_section("s15")
    print(f"Criteria of §{section['section']} {section['title']}")
    for level in section["levels"]:
        for c in level.get("criteria", []):
            block(f"  level {level['score']}  {c['id']}", [c["text"], *(
                f"check {check_id} (experiment: {EXPERIMENTS[check_id].scenario}) emits "
                f"{', '.join(EXPERIMENTS[check_id].codes)}" for check_id in c["checks"])], 11)
    print()
    print("Rules (clirace explain CODE says more)")
    for code, rule in rules().items():
        if rule.get("retired"):
            continue
        block(f"  {code}  {rule['name']} [{rule['severity']}]",
              [f"from check {rule['check']}", *([rule["fix"]] if rule.get("fix") else [])], 8)


@app.command()
def explain(code: str = typer.Argument(..., metavar="CODE", help="A finding code or its name (CR202, lost-key), a criterion id "
                                       "(lock-excludes) or a check name (counter); see `clirace checks`.")) -> None:
    """Explain a finding: what it means, why it matters to an agent calling the tool, how to fix it. Given a
    criterion or a check: what it decides, and the codes it can emit."""
    import shutil

    from clirace.checks.catalogue import rules
    from clirace.report.explain import about, as_text

    width = max(40, min(shutil.get_terminal_size((100, 24)).columns, 120))
    names = {rule["name"]: c for c, rule in rules().items()}
    given, code = code, names.get(code.lower(), code.upper())
    if code not in rules():
        described = about(given.lower(), width)
        if described is not None:
            print(described, end="")
            return
        from clirace.checks.catalogue import load_section
        from clirace.checks.registry import EXPERIMENTS
        subjects = sorted({*names, *EXPERIMENTS, *(c["id"] for level in load_section("s15")["levels"]
                                                   for c in level.get("criteria", []))})
        guess = errors.did_you_mean(code, sorted(rules()), "{}") or errors.did_you_mean(given.lower(), subjects, "{}")
        raise errors.UsageError(f"{given!r} is not a clirace finding code or name, criterion or check"
                                + (f"; did you mean {guess}?" if guess else "."), hint="`clirace checks` lists them all.")
    print(as_text(code, width=width), end="")


ValidateFormat = Enum("ValidateFormat", {name: name for name in ("text", "json")}, type=str)  # type: ignore[misc]


@app.command()
def validate(
    specs: list[Path] | None = typer.Argument(None, metavar="SPEC...", help=SPECS_HELP, show_default=False),
    no_tool: bool = typer.Option(False, "--no-tool", help="Check the spec alone, not that the programs it names are "
                                 "installed (a pre-commit hook, a fresh clone: the pre-commit hook's default)."),
    allow_outside_sandbox: bool = typer.Option(False, "--allow-outside-sandbox", help=OUTSIDE_HELP),
    format: ValidateFormat = typer.Option("text", "--format", "--output-format", "-f", help="Format on stdout (or "
                                          "-o): text, or json (per spec: valid, each criterion, the subcommands it "
                                          "never runs, or the error)."),
    output: Path | None = typer.Option(None, "--output", "-o", metavar="PATH", help=OUTPUT_HELP),
    report: list[str] | None = typer.Option(None, "--report", metavar="FORMAT=PATH",
                                            help="Also write FORMAT (text or json) to PATH (repeatable; each file "
                                                 "written atomically)."),
    exit_zero: bool = typer.Option(False, "--exit-zero", help="Exit 0 even when a spec is not valid or lets nothing "
                                   "be tested; the output still says it."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="Only one line per spec (valid or why not), not what "
                               "each criterion will test (text only)."),
) -> None:
    """Load specs as `check` would and say what each lets clirace test, and which subcommands its --help shows that
    the spec never runs; runs nothing of the tool but its --help, in a scratch home (nothing at all with
    --no-tool). Exit 0 when every spec is valid and lets something be tested (or --exit-zero), 2 otherwise."""
    from clirace.cli import _pyproject
    from clirace.cli._outputs import parse_report
    from clirace.cli.validate import FORMATS, render, validated
    from clirace.run.observe import available

    reports = tuple(parse_report(r, FORMATS) for r in report or ())
    outputs = replace(_outputs(Format(format.value), output, None, None, Color("auto")), reports=reports)
    settings = _pyproject.find(Path.cwd())
    paths = _pyproject.expand(list(specs or settings.specs))
    if not paths:
        raise errors.UsageError("no spec given, and no [tool.clirace] specs in a pyproject.toml here or above.",
                                hint="e.g. `clirace validate clirace.yaml`; `clirace init` writes a starter spec.")
    with _pinned(outputs, []) as pinned:
        strace = available()
        wanted = {format.value, *(fmt for fmt, _ in reports)}
        items = [validated(path, strace, no_tool, allow_outside_sandbox, "json" in wanted or not quiet)
                 for path in paths]
        for item in items:
            if item.error is not None:
                print(f"clirace: {item.error.paragraph()}", file=sys.stderr)  # said even when the report is a file
        for fmt, path in reports:
            pinned.destination("--report", path).write(render(items, fmt, quiet))
        if output is not None:
            pinned.destination("-o", output).write(render(items, format.value, quiet))
        else:
            sys.stdout.write(render(items, format.value, quiet, errors_too=format.value != "text"))
    failed = not all(item.passed for item in items)
    raise typer.Exit(errors.EXIT_USAGE if failed and not exit_zero else errors.EXIT_OK)


@app.command()
def init(
    path: Path = typer.Argument(Path("clirace.yaml"), metavar="PATH", help="Where to write the spec."),
    example: str | None = typer.Option(None, "--example", metavar="NAME", help="Start from a shipped example instead: "
                                          "flock-counter, git-config, sqlite3, ... (`--example list` lists them)."),
    probe: list[str] | None = typer.Option(None, "--probe", metavar="COMMAND", help="A mutating command of the "
                                              "tool, e.g. \"mytool config set {key} {value}\" (repeatable): each is "
                                              "run once alone under strace and the spec written from what it did."),
    read: str | None = typer.Option(None, "--read", metavar="COMMAND", help="With --probe: a command printing the "
                                       "state (a counter, or {key}'s value)."),
    setup: list[str] | None = typer.Option(None, "--setup", metavar="COMMAND", help="With --probe: a command run "
                                              "first in every sandbox (repeatable)."),
    tool: str | None = typer.Option(None, "--tool", metavar="COMMAND", help="With --probe: the words every "
                                       "command starts with, tool.command (default: the program alone)."),
    force: bool = typer.Option(False, "--force", help="Overwrite existing files."),
) -> None:
    """Write a commented starter spec (or a shipped example, or with --probe one written from observed runs),
    with the schema line editors use."""
    from clirace.spec.starter import examples, write_starter

    if example == "list":
        print("\n".join(examples()))
        return
    if probe:
        from clirace.cli.probe import write_spec
        from clirace.spec import load_spec
        written = write_spec(path, probe, read, list(setup or ()), force, tool)
        print(f"wrote {written} (every GUESS and NOT FOUND in it is for you to check)")
        try:
            load_spec(written)
            print(f"{written}: valid; next: check the guesses, then `clirace validate {path}`")
        except errors.SpecError as exc:  # written all the same: its NOT FOUND comments say what is missing
            print(f"clirace: {written} was written but does not validate yet (see its NOT FOUND comments): "
                  f"{exc.paragraph()}", file=sys.stderr)
            raise typer.Exit(errors.EXIT_USAGE) from None
        return
    for written in write_starter(path, example, force):
        print(f"wrote {written}")
    print(f"next: edit it, then `clirace validate {path}` and `clirace check {path}`")


def _outputs(format: Format, output: Path | None, report: list[str] | None, history: Path | None,
             color: Color) -> Outputs:
    from clirace.cli._outputs import Outputs, parse_report

    return Outputs(format.value, output, tuple(parse_report(r) for r in report or ()), history, color.value)


def _pinned(outputs: Outputs, specs: list[Path]) -> Pinned:
    """Every destination, checked writable and pinned before anything runs (exit 2 otherwise)."""
    from clirace.cli._outputs import check_all

    return check_all(outputs, tuple(str(s) for s in specs))


def _terminate(signum: int, frame: FrameType | None) -> None:
    raise errors.Terminated()


def _emit(items: list[Item], outputs: Outputs, pinned: Pinned) -> None:
    from clirace.cli._outputs import emit

    emit(items, outputs, pinned)


class _PipeClosed(BaseException):
    """stdout's reader went away. Not an OSError, so that click does not turn it into a silent exit 1 (the gate's
    failure status) on the way out."""


class _Stdout:
    """sys.stdout, with a write to a closed pipe raised as _PipeClosed."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except BrokenPipeError:
            raise _PipeClosed() from None

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            raise _PipeClosed() from None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def main() -> None:
    # SIGTERM from the very start, as SIGINT is by Python: a clean exit 143, never death by the signal (a `check`
    # replaces this with its own handler while it runs, Signals).
    if signal.getsignal(signal.SIGTERM) is not signal.SIG_IGN:
        signal.signal(signal.SIGTERM, _terminate)
    import os

    sys.stdout = _Stdout(sys.stdout)
    try:
        try:
            code = app(standalone_mode=False)  # not standalone, a command's typer.Exit(code) comes back as its value
            sys.stdout.flush()
        finally:
            sys.stdout = sys.stdout._stream if isinstance(sys.stdout, _Stdout) else sys.stdout
    except _PipeClosed:
        # Quietly, with its own status; stdout pointed at /dev/null so that the exit's own flush says nothing.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(errors.EXIT_PIPE_CLOSED)
    except errors.CliraceError as exc:
        print(f"clirace: {exc.paragraph()}", file=sys.stderr)
        sys.exit(exc.exit_code)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except SystemExit:
        raise
    except (KeyboardInterrupt, errors.Terminated) as stop:
        _stopped(stop)
    except Exception as exc:  # noqa: BLE001 - the last line of defence: say it is a bug, exit 3
        if (behind := errors.interrupt_behind(exc)) is not None:  # a clean-up failed on the way out of the interrupt
            _stopped(behind)
        # typer ships its own copy of click; recognise its exceptions by shape rather than import path.
        if hasattr(exc, "show") and hasattr(exc, "exit_code"):
            exc.show()
            sys.exit(errors.EXIT_USAGE)
        if type(exc).__name__ == "Abort":
            sys.exit(errors.EXIT_INTERRUPTED)
        err = errors.InternalError(f"{type(exc).__name__}: {exc}")
        print(f"clirace: {err.paragraph()}", file=sys.stderr)
        sys.exit(errors.EXIT_INTERNAL)
    sys.exit(code if isinstance(code, int) else errors.EXIT_OK)


def _stopped(stop: BaseException) -> NoReturn:
    """Exit as Ctrl-C (130) or SIGTERM (143) asked."""
    if isinstance(stop, KeyboardInterrupt):
        print("clirace: interrupted.", file=sys.stderr)
        sys.exit(errors.EXIT_INTERRUPTED)
    print("clirace: terminated.", file=sys.stderr)
    sys.exit(errors.EXIT_TERMINATED)


def run() -> None:
    """The program's entry point (the `clirace` script, `python -m clirace`): main(), then an exit that skips the
    interpreter's teardown, which frees every module one by one: 30-50 ms of CPU after typer's import, on every
    start of clirace (a third of `clirace --help`; docs/benchmarks.md). What a normal exit does that anything
    relies on is kept: the atexit handlers run (weakref.finalize and tempfile's clean-ups are among them) and
    both streams are flushed. While a thread that the normal exit would wait for still runs, or a stream cannot
    be flushed (its reader left: Python's own message and status then), the normal exit is taken instead.
    Tests call main() itself, in their own process, which this would end."""
    import atexit
    import os
    import threading

    try:
        main()
        code: str | int | None = errors.EXIT_OK
    except SystemExit as exc:
        code = exc.code
    waited_for = [t for t in threading.enumerate() if t is not threading.main_thread() and not t.daemon]
    if waited_for or isinstance(code, str) or not _flushed():
        sys.exit(code)
    atexit._run_exitfuncs()
    if not _flushed():  # a handler's own output: the normal exit says it could not be written, as it would have
        atexit._clear()
        sys.exit(code)
    os._exit(code or 0)


def _flushed() -> bool:
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):  # a closed pipe, a closed stream: let the normal exit report it as it does
        return False
    return True
