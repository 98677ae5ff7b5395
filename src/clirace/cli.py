"""`clirace` on the command line. Exit codes: 0 the gate passed (or --exit-zero), 1 it failed (silent corruption,
a score below --min-score, a regression against --baseline; `diff`: a regression), 2 bad spec, option or path,
3 internal error, 4 what the check made could not all be removed, 130 interrupted (Ctrl-C), 143 terminated
(SIGTERM). See gate.py."""
from __future__ import annotations

import sys
from enum import Enum
from pathlib import Path
from typing import List, Optional

import typer

from . import errors
from ._checking import Terminated, check_each
from ._outputs import FORMATS

CONTEXT = {"help_option_names": ["-h", "--help"]}
app = typer.Typer(add_completion=True, no_args_is_help=True, rich_markup_mode=None, context_settings=CONTEXT,
                  help="Run a CLI's mutating commands in parallel and score how it copes (rubric §15).")


Format = Enum("Format", {name: name for name in FORMATS}, type=str)  # one list of formats: _outputs.FORMATS
DiffFormat = Enum("DiffFormat", {name: name for name in ("text", "json", "markdown", "github")}, type=str)
Color = Enum("Color", {name: name for name in ("auto", "always", "never")}, type=str)


FORMAT_HELP = ("Format on stdout (or -o): text (a table), json, markdown (a pull request or step summary), github "
               "(workflow annotations), junit (CI test results) or sarif (code scanning).")
REPORT_HELP = "Also write FORMAT to PATH, e.g. sarif=clirace.sarif (repeatable; each file written atomically)."
OUTPUT_HELP = "Write the --format report to this file instead of stdout."
MIN_SCORE_HELP = "The gate also fails below this score (default: [tool.clirace] min-score, else 0)."
EXIT_ZERO_HELP = ("Exit 0 even when the gate fails (silent corruption, a score below --min-score, a regression); "
                  "the reports still say it failed.")
OUTSIDE_HELP = "Accept spec paths outside the trial's sandbox (the real home, /tmp, any literal absolute path)."
COLOR_HELP = "Colour in the text report: auto (a terminal; NO_COLOR and FORCE_COLOR are honoured), always, never."
SPECS_HELP = ("Spec files, or directories holding clirace.yaml or *.clirace.yaml files (default: [tool.clirace] "
              "specs in the nearest pyproject.toml). `clirace init` writes a starter, `clirace validate` checks it.")


@app.command()
def check(
    specs: Optional[List[Path]] = typer.Argument(None, help=SPECS_HELP, show_default=False),
    format: Format = typer.Option("text", "--format", "-f", help=FORMAT_HELP),
    min_score: Optional[int] = typer.Option(None, "--min-score", min=0, max=3, help=MIN_SCORE_HELP),
    exit_zero: bool = typer.Option(False, "--exit-zero", help=EXIT_ZERO_HELP),
    baseline: Optional[Path] = typer.Option(None, "--baseline", metavar="OLD", help="Compare with an earlier run (a saved --format json result or --history): each finding and criterion fixed, new, still or undecided; a regression fails the gate."),
    confidence: Optional[float] = typer.Option(None, "--confidence", metavar="C", help="With --rate R: run enough rounds that a race showing in R of rounds would have shown with probability >= C (e.g. 0.99)."),
    rate: Optional[float] = typer.Option(None, "--rate", metavar="R", help="See --confidence (e.g. 0.1: 44 rounds at 0.99)."),
    seed: Optional[int] = typer.Option(None, "--seed", min=0, help="Seed for every random choice; printed with the result."),
    rounds: Optional[int] = typer.Option(None, "--rounds", min=1, max=100, help="Parallel rounds per workload (default: [tool.clirace] rounds, the spec's, else 3)."),
    parallel: Optional[int] = typer.Option(None, "--parallel", min=2, max=64, help="Invocations per round (default: the spec's, else 8)."),
    budget: Optional[float] = typer.Option(None, "--budget", min=1, max=3600, metavar="SECONDS", help="After the spec's rounds, keep adding rounds (at a rendezvous, or amplified) until this many seconds have gone on them, shared among the workloads: more rounds, a smaller detection bound."),
    only: Optional[List[str]] = typer.Option(None, "--only", help="Run only this check (repeatable); see `clirace checks`."),
    keep: bool = typer.Option(False, "--keep", help="Keep the sandboxes and print where they are."),
    no_strace: bool = typer.Option(False, "--no-strace", help="Do not use strace (file observation, crash injection)."),
    history: Optional[Path] = typer.Option(None, "--history", help="Save the run's history here (re-judge with `clirace judge`); with several specs, a directory."),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help=OUTPUT_HELP),
    report: Optional[List[str]] = typer.Option(None, "--report", metavar="FORMAT=PATH", help=REPORT_HELP),
    allow_outside_sandbox: bool = typer.Option(False, "--allow-outside-sandbox", help=OUTSIDE_HELP),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress lines on stderr; only the report."),
    color: Color = typer.Option("auto", "--color", help=COLOR_HELP),
):
    """Check the tools described by SPECS and print each one's §15 score with the evidence. Exit 0 when the gate
    passes, 1 when it fails (silent corruption, a score below --min-score, a regression against --baseline),
    2 for a bad spec or option."""
    from . import _pyproject
    from .options import Options
    from .sandbox import adopt_orphans

    settings = _pyproject.find(Path.cwd())
    paths = _pyproject.expand(list(specs or settings.specs))
    if not paths:
        raise errors.UsageError("no spec given, and no [tool.clirace] specs in a pyproject.toml here or above.",
                                hint="e.g. `clirace check clirace.yaml`; `clirace init` writes a starter spec.")
    min_score = min_score if min_score is not None else settings.min_score or 0
    rounds = rounds or settings.rounds
    checks = []
    if only:
        from . import registry
    for name in only or ():
        resolved = registry.resolve(name)
        if resolved is None:
            raise errors.UsageError(f"--only {name!r} is not a check.", hint=f"Checks: {', '.join(registry.EXPERIMENTS)}.")
        checks.append(resolved)
    if (confidence is None) != (rate is None):
        raise errors.UsageError("--confidence and --rate go together.", hint="e.g. --confidence 0.99 --rate 0.1.")
    if baseline is not None and len(paths) > 1:
        raise errors.UsageError("--baseline compares one spec's run; give one spec.",
                                hint="Or compare saved results with `clirace diff OLD NEW`, one spec at a time.")
    needed = old = None
    if baseline is not None or confidence is not None:  # (baseline reads the checks' bounds: imported only here)
        from .baseline import load, rounds_for
        needed = rounds_for(confidence, rate) if confidence is not None and rate is not None else None
        old = load(baseline) if baseline is not None else None
    outputs = _outputs(format, output, report, history, color)
    opts = Options(seed=seed, rounds=rounds, parallel=parallel, budget=budget, only=tuple(checks), keep=keep,
                   strace=not no_strace, allow_outside_sandbox=allow_outside_sandbox, confidence=confidence, rate=rate)
    adopt_orphans()  # this process is clirace's own: it may adopt (and end) what its targets orphan
    with _pinned(outputs, paths) as pinned:
        items = check_each(paths, opts, needed, lambda done: _emit(done, outputs, pinned), quiet=quiet, keep=keep,
                           raise_spec_errors=len(paths) == 1 and not outputs.paths() and outputs.format == "text")
        for item in items:
            if hasattr(item, "score"):
                _gate(item, min_score, exit_zero, old)
        _emit(items, outputs, pinned)
    raise typer.Exit(_exit_code(items))


def _gate(result, min_score: int, exit_zero: bool, old) -> None:
    from . import baseline, gate
    if old is not None:
        result.comparison = baseline.compare(old, baseline.of_result(result))
    result.gate = gate.evaluate(result, min_score, exit_zero, result.comparison)


def _exit_code(items, judged: bool = False) -> int:
    """4 when what a check made could not all be removed, else 2 when a spec could not be checked, else 1 when a
    gate failed, else 0: one status for every spec. (`judged`: a saved history re-judged made nothing to remove.)"""
    codes = [item.exit_code if not hasattr(item, "score") else
             errors.EXIT_NOT_REMOVED if item.history.not_removed and not judged else item.gate.exit_code
             for item in items]
    return max(codes, default=errors.EXIT_OK)


@app.command()
def judge(
    history: Path = typer.Argument(..., help="A history saved by `clirace check --history`."),
    format: Format = typer.Option("text", "--format", "-f", help=FORMAT_HELP),
    min_score: Optional[int] = typer.Option(None, "--min-score", min=0, max=3, help=MIN_SCORE_HELP),
    exit_zero: bool = typer.Option(False, "--exit-zero", help=EXIT_ZERO_HELP),
    baseline: Optional[Path] = typer.Option(None, "--baseline", metavar="OLD", help="Compare with an earlier run (a saved JSON result or history)."),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help=OUTPUT_HELP),
    report: Optional[List[str]] = typer.Option(None, "--report", metavar="FORMAT=PATH", help=REPORT_HELP),
    color: Color = typer.Option("auto", "--color", help=COLOR_HELP),
):
    """Judge a saved history again, without launching anything (exit status as `check`'s)."""
    from . import _pyproject
    from .baseline import load
    from .history import History
    from .pipeline import judge as judge_history
    from .report._failed import Failed

    settings = _pyproject.find(Path.cwd())
    min_score = min_score if min_score is not None else settings.min_score or 0
    old = load(baseline) if baseline is not None else None
    outputs = _outputs(format, output, report, None, color)
    with _pinned(outputs, [history]) as pinned:
        try:
            item = judge_history(History.load(history))
            _gate(item, min_score, exit_zero, old)
        except errors.HistoryError as exc:
            if not outputs.paths() and outputs.format == "text":
                raise
            print(f"clirace: {exc.paragraph()}", file=sys.stderr)
            item = Failed(str(history), exc)
        _emit([item], outputs, pinned)
    raise typer.Exit(_exit_code([item], judged=True))


@app.command()
def diff(
    old: Path = typer.Argument(..., help="The earlier run: a saved JSON result (--format json) or history (--history)."),
    new: Path = typer.Argument(..., help="The later run, the same way."),
    format: DiffFormat = typer.Option("text", "--format", "-f", help="text, json, markdown or github."),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="Write it to this file instead of stdout."),
):
    """Compare two runs: each finding and criterion fixed, new, still or undecided, with the detection bound that
    makes "fixed" believable. Exit 1 on a regression (a new finding, a lower score, a criterion from pass to fail)."""
    from .baseline import compare, load
    from .report.compare import RENDERERS

    outputs = _outputs(Format(format.value), output, None, None, Color("auto"))
    comparison = compare(load(old), load(new))
    text = RENDERERS[format.value](comparison)
    with _pinned(outputs, []) as pinned:
        if output is not None:
            pinned.destination("-o", output).write(text if text.endswith("\n") else text + "\n")
        else:
            sys.stdout.write(text if text.endswith("\n") else text + "\n")
    from .gate import EXIT_GATE_FAILED
    raise typer.Exit(EXIT_GATE_FAILED if comparison.regressions() else errors.EXIT_OK)


@app.command()
def schema(
    result: bool = typer.Option(False, "--result", help="Print the schema of `--format json` output instead."),
):
    """Print the JSON Schema of the spec format (or, with --result, of the JSON result)."""
    from importlib import resources
    name = "result_schema.json" if result else "spec_schema.json"
    print(resources.files("clirace").joinpath(name).read_text().rstrip("\n"))


def _version(value: bool) -> None:
    if value:
        from . import __version__
        print(f"clirace {__version__}")
        raise typer.Exit(errors.EXIT_OK)


@app.callback()
def _main(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                 help="Print the clirace version and exit."),
):
    """Run a CLI's mutating commands in parallel and score how it copes (rubric §15)."""


@app.command()
def checks():
    """List the criteria, the checks that decide them (with the experiment each runs and the codes it can
    emit), and the rules."""
    import shutil
    import textwrap

    from .registry import EXPERIMENTS
    from .rubric import load_section, rules

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
def explain(code: str = typer.Argument(..., help="A finding code or its name, e.g. CR202 or lost-key (see `clirace checks`).")):
    """Explain a finding: what it means, why it matters to an agent calling the tool, how to fix it."""
    from ._spec_messages import did_you_mean
    from .explain import as_text
    from .rubric import rules

    names = {rule["name"]: c for c, rule in rules().items()}
    given, code = code, names.get(code.lower(), code.upper())
    if code not in rules():
        guess = did_you_mean(code, sorted(rules()), "{}") or did_you_mean(given.lower(), sorted(names), "{}")
        raise errors.UsageError(f"{given!r} is not a clirace finding code or name"
                                + (f"; did you mean {guess}?" if guess else "."), hint="`clirace checks` lists them all.")
    import shutil
    print(as_text(code, width=max(40, min(shutil.get_terminal_size((100, 24)).columns, 120))), end="")


@app.command()
def validate(
    specs: List[Path] = typer.Argument(..., help="Spec files to validate."),
    allow_outside_sandbox: bool = typer.Option(False, "--allow-outside-sandbox", help=OUTSIDE_HELP),
):
    """Load specs as `check` would and say what each lets clirace test, and which subcommands its --help shows that
    the spec never runs; runs nothing of the tool but its --help, in a scratch home."""
    from .observe import available
    from .spec import load_spec
    from ._unrun import lines as unrun_lines
    from .validate import coverage, describe

    strace = available()
    failed = False
    for path in specs:
        try:
            spec = load_spec(path, allow_outside_sandbox=allow_outside_sandbox)
        except errors.SpecError as exc:
            print(f"clirace: {exc.paragraph()}", file=sys.stderr)
            failed = True
            continue
        testable = any(c.testable for c in coverage(spec, strace))
        print(f"{path}: " + ("valid" if testable else "valid, but nothing can be tested"))
        print("\n".join(describe(spec, strace) + unrun_lines(spec)))
        failed = failed or not testable
    raise typer.Exit(errors.EXIT_USAGE if failed else errors.EXIT_OK)


@app.command()
def init(
    path: Path = typer.Argument(Path("clirace.yaml"), help="Where to write the spec."),
    example: Optional[str] = typer.Option(None, "--example", help="Start from a shipped example instead: "
                                          "flock-counter, git-config, sqlite3, ... (`--example list` lists them)."),
    force: bool = typer.Option(False, "--force", help="Overwrite existing files."),
):
    """Write a commented starter spec (or a shipped example), with the schema line editors use."""
    from .starter import examples, write_starter

    if example == "list":
        print("\n".join(examples()))
        return
    for written in write_starter(path, example, force):
        print(f"wrote {written}")
    print(f"next: edit it, then `clirace validate {path}` and `clirace check {path}`")


def _outputs(format: Format, output: Optional[Path], report: Optional[List[str]], history: Optional[Path],
             color: Color):
    from ._outputs import Outputs, parse_report

    return Outputs(format.value, output, tuple(parse_report(r) for r in report or ()), history, color.value)


def _pinned(outputs, specs):
    """Every destination, checked writable and pinned before anything runs (exit 2 otherwise)."""
    from ._outputs import check_all

    return check_all(outputs, tuple(str(s) for s in specs))


def _emit(items, outputs, pinned) -> None:
    from ._outputs import emit

    emit(items, outputs, pinned)


def main() -> None:
    try:
        code = app(standalone_mode=False)  # not standalone, a command's typer.Exit(code) comes back as its value
    except errors.CliraceError as exc:
        print(f"clirace: {exc.paragraph()}", file=sys.stderr)
        sys.exit(exc.exit_code)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except SystemExit:
        raise
    except KeyboardInterrupt:
        print("clirace: interrupted.", file=sys.stderr)
        sys.exit(errors.EXIT_INTERRUPTED)
    except Terminated:
        print("clirace: terminated.", file=sys.stderr)
        sys.exit(errors.EXIT_TERMINATED)
    except Exception as exc:  # noqa: BLE001 - the last line of defence: say it is a bug, exit 3
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
