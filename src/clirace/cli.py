"""`clirace` on the command line. Exit codes: 0 score >= --min-score, 1 below it, 2 bad spec or usage,
3 internal error, 130 interrupted (Ctrl-C), 143 terminated (SIGTERM)."""
from __future__ import annotations

import signal
import sys
from enum import Enum
from pathlib import Path
from typing import List, Optional

import typer

from . import errors
from ._outputs import FORMATS

app = typer.Typer(add_completion=False, no_args_is_help=True, rich_markup_mode=None,
                  help="Run a CLI's mutating commands in parallel and score how it copes (rubric §15).")


Format = Enum("Format", {name: name for name in FORMATS}, type=str)  # one list of formats: _outputs.FORMATS


class Terminated(BaseException):
    """SIGTERM, turned into an exception so that sandboxes and children are cleaned up on the way out."""


FORMAT_HELP = ("Format on stdout (or -o): text (a table), json, markdown (a pull request or step summary), github "
               "(workflow annotations), junit (CI test results) or sarif (code scanning).")
REPORT_HELP = "Also write FORMAT to PATH, e.g. sarif=clirace.sarif (repeatable; each file written atomically)."
OUTPUT_HELP = "Write the --format report to this file instead of stdout."
MIN_SCORE_HELP = "Exit 1 when the score is below this (for CI)."
OUTSIDE_HELP = "Accept spec paths outside the trial's sandbox (the real home, /tmp, any literal absolute path)."


@app.command()
def check(
    spec: Path = typer.Argument(..., help="The YAML spec describing the tool (`clirace init` writes a starter, `clirace validate` checks it, `clirace schema` prints its format)."),
    format: Format = typer.Option("text", "--format", "-f", help=FORMAT_HELP),
    min_score: int = typer.Option(0, "--min-score", min=0, max=3, help=MIN_SCORE_HELP),
    seed: Optional[int] = typer.Option(None, "--seed", min=0, help="Seed for every random choice; printed with the result."),
    rounds: Optional[int] = typer.Option(None, "--rounds", min=1, max=100, help="Parallel rounds per workload (default: the spec's, else 3)."),
    parallel: Optional[int] = typer.Option(None, "--parallel", min=2, max=64, help="Invocations per round (default: the spec's, else 8)."),
    budget: Optional[float] = typer.Option(None, "--budget", min=1, max=3600, metavar="SECONDS", help="After the spec's rounds, keep adding rounds (at a rendezvous, or amplified) until this many seconds have gone on them, shared among the workloads: more rounds, a smaller detection bound."),
    only: Optional[List[str]] = typer.Option(None, "--only", help="Run only this check (repeatable); see `clirace checks`."),
    keep: bool = typer.Option(False, "--keep", help="Keep the sandboxes and print where they are."),
    no_strace: bool = typer.Option(False, "--no-strace", help="Do not use strace (file observation, crash injection)."),
    history: Optional[Path] = typer.Option(None, "--history", help="Save the run's history here (re-judge with `clirace judge`)."),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help=OUTPUT_HELP),
    report: Optional[List[str]] = typer.Option(None, "--report", metavar="FORMAT=PATH", help=REPORT_HELP),
    allow_outside_sandbox: bool = typer.Option(False, "--allow-outside-sandbox", help=OUTSIDE_HELP),
):
    """Check a tool described by SPEC and print its §15 score with the evidence."""
    from . import registry
    from .pipeline import Options, judge, run
    from .sandbox import adopt_orphans
    from .spec import load_spec
    from ._outputs import emit

    checks = []
    for name in only or ():
        resolved = registry.resolve(name)
        if resolved is None:
            raise errors.UsageError(f"--only {name!r} is not a check.", hint=f"Checks: {', '.join(registry.EXPERIMENTS)}.")
        checks.append(resolved)
    outputs = _outputs(format, output, report, history)
    spec_obj = load_spec(spec, allow_outside_sandbox=allow_outside_sandbox)
    opts = Options(seed=seed, rounds=rounds, parallel=parallel, budget=budget, only=tuple(checks), keep=keep,
                   strace=not no_strace,
                   allow_outside_sandbox=allow_outside_sandbox)
    seen = {}

    def on_signal(signum, frame):
        # The first Ctrl-C or SIGTERM stops the run; the next ones must not cut short the cleanup it starts
        # (ending the children, removing the sandboxes), so they are only noted.
        if "signal" in seen:
            if not seen.get("told"):
                seen["told"] = True
                print("clirace: stopping: ending children and removing sandboxes...", file=sys.stderr, flush=True)
            return
        seen["signal"] = signum
        raise KeyboardInterrupt() if signum == signal.SIGINT else Terminated()

    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    adopt_orphans()  # this process is clirace's own: it may adopt (and end) what its targets orphan
    with _Progress() as progress:
        try:
            for sig, handler in previous.items():
                if handler is not signal.SIG_IGN:  # e.g. SIGINT in a job a shell started in the background
                    signal.signal(sig, on_signal)
            result = run(spec_obj, opts, progress=progress.say, on_history=lambda h: seen.setdefault("h", h))
        except (KeyboardInterrupt, Terminated) as stop:
            progress.stop()
            code = errors.EXIT_INTERRUPTED if isinstance(stop, KeyboardInterrupt) else errors.EXIT_TERMINATED
            if "h" in seen:
                partial = judge(seen["h"])  # the history says it was interrupted, and the judgement what it lacks
                emit(partial, outputs)
            kept = seen["h"].kept if keep and "h" in seen else None
            how = "interrupted" if code == errors.EXIT_INTERRUPTED else "terminated"
            print(f"clirace: {how}; children ended and " + (f"sandboxes kept in {kept}." if kept else
                  "sandboxes removed."), file=sys.stderr)
            raise typer.Exit(code)
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
    emit(result, outputs)
    if keep and result.kept:
        print(f"clirace: sandboxes kept in {result.kept}", file=sys.stderr)
    raise typer.Exit(errors.EXIT_OK if result.score.score >= min_score else errors.EXIT_BELOW_MIN_SCORE)


@app.command()
def judge(
    history: Path = typer.Argument(..., help="A history saved by `clirace check --history`."),
    format: Format = typer.Option("text", "--format", "-f", help=FORMAT_HELP),
    min_score: int = typer.Option(0, "--min-score", min=0, max=3, help=MIN_SCORE_HELP),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help=OUTPUT_HELP),
    report: Optional[List[str]] = typer.Option(None, "--report", metavar="FORMAT=PATH", help=REPORT_HELP),
):
    """Judge a saved history again, without launching anything."""
    from ._outputs import emit
    from .history import History
    from .pipeline import judge as judge_history

    outputs = _outputs(format, output, report, None)
    result = judge_history(History.load(history))
    emit(result, outputs)
    raise typer.Exit(errors.EXIT_OK if result.score.score >= min_score else errors.EXIT_BELOW_MIN_SCORE)


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
def explain(code: str = typer.Argument(..., help="A finding code, e.g. CR202 (see `clirace checks`).")):
    """Explain a finding code: what it means, why it matters to an agent calling the tool, how to fix it."""
    from ._spec_messages import did_you_mean
    from .explain import as_text
    from .rubric import rules

    if code.upper() not in rules():
        guess = did_you_mean(code.upper(), sorted(rules()), "{}")
        raise errors.UsageError(f"{code!r} is not a clirace finding code" + (f"; did you mean {guess}?" if guess else "."),
                                hint="`clirace checks` lists them all.")
    import shutil
    print(as_text(code, width=max(40, min(shutil.get_terminal_size((100, 24)).columns, 120))), end="")


@app.command()
def validate(
    specs: List[Path] = typer.Argument(..., help="Spec files to validate."),
    allow_outside_sandbox: bool = typer.Option(False, "--allow-outside-sandbox", help=OUTSIDE_HELP),
):
    """Load specs as `check` would and say what each lets clirace test; runs nothing of the tool."""
    from .observe import available
    from .spec import load_spec
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
        print("\n".join(describe(spec, strace)))
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


def _outputs(format: Format, output: Optional[Path], report: Optional[List[str]], history: Optional[Path]):
    """Every destination, checked writable before anything runs (exit 2 otherwise)."""
    from ._outputs import Outputs, check_all, parse_report

    outputs = Outputs(format.value, output, tuple(parse_report(r) for r in report or ()), history)
    check_all(outputs)
    return outputs


class _Progress:
    """A live status line on a terminal's stderr; plain lines on stderr otherwise."""

    def __init__(self):
        self.live = sys.stderr.isatty()
        self.status = None

    def __enter__(self):
        if self.live:
            from rich.console import Console
            self.status = Console(stderr=True).status("starting")
            self.status.start()
        return self

    def say(self, text: str) -> None:
        if self.status:
            self.status.update(text)
        else:
            # One write per line: experiments that run side by side report from several threads.
            sys.stderr.write(f"clirace: {text}\n")
            sys.stderr.flush()

    def stop(self):
        if self.status:
            self.status.stop()
            self.status = None

    def __exit__(self, *exc):
        self.stop()


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
