"""Running `clirace check` over its specs, one after another, as the command line does it: progress on stderr,
Ctrl-C and SIGTERM turned into a clean stop (children ended, sandboxes removed, what was seen written out)."""
from __future__ import annotations

import signal
import sys
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

import typer

from clirace import errors

if TYPE_CHECKING:
    from rich.status import Status

    from clirace.cli.options import Options
    from clirace.history import History
    from clirace.report._failed import Failed
    from clirace.verdict.result import Result

    Item = Result | Failed  # what `clirace check` reports on for each spec


class Signals:
    """SIGINT and SIGTERM for the whole of `clirace check`, from before the first spec is read to the last byte of
    the result written. While specs are checked, the first one raises KeyboardInterrupt or Terminated (a clean stop:
    children ended, sandboxes removed, the partial result written); once the result is decided (`deferred`), it is
    only noted: the result is written whole, and the exit status is then 130 or 143 all the same. Every later one
    is only noted: it must not cut short the cleanup or the writing that the first one started."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self) -> None:
        self.received: int | None = None
        self._told = False
        self._defer = False
        self._previous: dict[int, Any] = {}  # signal.getsignal's handlers: a callable, an int or None
        self._unraisable: Any = sys.unraisablehook

    def __enter__(self) -> Signals:
        self._previous = {sig: signal.getsignal(sig) for sig in self.SIGNALS}
        for sig, handler in self._previous.items():
            if handler is not signal.SIG_IGN:  # e.g. SIGINT in a job a shell started in the background
                signal.signal(sig, self._on_signal)
        self._unraisable = sys.unraisablehook
        sys.unraisablehook = self._unraisable_hook
        return self

    def __exit__(self, *exc: object) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        sys.unraisablehook = self._unraisable

    def _unraisable_hook(self, unraisable: Any) -> None:
        """A signal acted on while Python ran a callback it cannot raise from (a weakref's, during garbage
        collection: seen once in CI) has its exception printed as 'Exception ignored in' with a traceback. It is
        noted already (`received`): the run goes on to its end and exits 130/143; print nothing for it."""
        if self.received is not None and isinstance(unraisable.exc_value, (KeyboardInterrupt, errors.Terminated)):
            return
        self._unraisable(unraisable)

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        if self.received is not None:
            if not self._told:
                self._told = True
                print("clirace: stopping: ending children and removing sandboxes...", file=sys.stderr, flush=True)
            return
        self.received = signum
        if not self._defer:
            raise KeyboardInterrupt() if signum == signal.SIGINT else errors.Terminated()

    def deferred(self) -> Signals:
        """From now on a signal is noted, not raised: what is left is writing a decided result."""
        self._defer = True
        return self

    def exit_code(self, otherwise: int) -> int:
        if self.received is None:
            return otherwise
        return errors.EXIT_INTERRUPTED if self.received == signal.SIGINT else errors.EXIT_TERMINATED


def check_each(paths: list[Path], opts: Options, needed: int | None, emit: Callable[[list[Item]], None], *,
               quiet: bool, keep: bool, raise_spec_errors: bool, signals: Signals) -> list[Item]:
    """Each spec checked in turn: its Result, or a Failed for a spec that could not be checked (`raise_spec_errors`:
    the SpecError itself). Ctrl-C or SIGTERM (caught by `signals`) ends the run with what was checked so far (and
    the partial result of the spec under way) passed to `emit`, and exit status 130 or 143."""
    from dataclasses import replace

    from clirace.spec import load_spec  # (the pipeline, and with it every check, is imported once a spec loaded)

    items: list[Item] = []
    seen: dict[str, History] = {}  # "h": the history of the spec under way, once the pipeline has one

    with Progress(quiet) as progress:
        try:
            for path in paths:
                seen.pop("h", None)
                if len(paths) > 1:
                    progress.say(f"{path}")
                try:
                    spec = load_spec(path, allow_outside_sandbox=opts.allow_outside_sandbox)
                    mine = replace(opts, rounds=max(opts.rounds or spec.rounds, needed)) if needed else opts
                    from clirace.cli.pipeline import run
                    result = run(spec, mine, progress=progress.say, on_history=lambda h: seen.setdefault("h", h),
                                 keep=keep)
                except errors.SpecError as exc:
                    if raise_spec_errors:
                        raise  # nothing to write it into: the error paragraph on stderr says it all
                    print(f"clirace: {exc.paragraph()}", file=sys.stderr)
                    from clirace.report._failed import Failed
                    items.append(Failed(str(path), exc))
                    continue
                if keep and result.kept:
                    print(f"clirace: sandboxes kept in {result.kept}", file=sys.stderr)
                if result.history.not_removed:
                    print(f"clirace: {removal(result.history)}", file=sys.stderr)
                items.append(result)
        except (KeyboardInterrupt, errors.Terminated) as stop:
            progress.stop()
            code = errors.EXIT_INTERRUPTED if isinstance(stop, KeyboardInterrupt) else errors.EXIT_TERMINATED
            if "h" in seen:
                from clirace.cli.pipeline import judge
                items.append(judge(seen["h"]))  # the history says it was interrupted, and the judgement what it lacks
            if items:
                emit(items)
            kept = seen["h"].kept if keep and "h" in seen else None
            how = "interrupted" if code == errors.EXIT_INTERRUPTED else "terminated"
            print(f"clirace: {how}; children ended and " + (f"sandboxes kept in {kept}." if kept else
                  removal(seen.get("h"))), file=sys.stderr)
            raise typer.Exit(code) from None
    return items


def removal(history: History | None) -> str:
    """What became of the run's folders: removed, or what could not be (an immutable file, a busy mount)."""
    left = history.not_removed if history is not None else ()
    if not left:
        return "sandboxes removed."
    return f"could not remove {len(left)} of the files and folders it made (remove them by hand): " + "; ".join(left)


class Progress:
    """A live status line on a terminal's stderr; plain lines on stderr otherwise."""

    def __init__(self, quiet: bool = False) -> None:
        self.live = sys.stderr.isatty() and not quiet
        self.quiet = quiet
        self.status: Status | None = None

    def __enter__(self) -> Progress:
        if self.live:
            from rich.console import Console
            self.status = Console(stderr=True).status("starting")
            self.status.start()
        return self

    def say(self, text: str) -> None:
        if self.quiet:
            return
        if self.status:
            self.status.update(text)
        else:
            # One write per line: experiments that run side by side report from several threads.
            sys.stderr.write(f"clirace: {text}\n")
            sys.stderr.flush()

    def stop(self) -> None:
        if self.status:
            self.status.stop()
            self.status = None

    def __exit__(self, *exc: object) -> None:
        self.stop()
