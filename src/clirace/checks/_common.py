"""Helpers shared by checks: evidence, summarising rounds, and turning records into a verdict."""
from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

from clirace.checks._observed import describe
from clirace.checks._served import describe as served
from clirace.checks.findings import (
    FAIL,
    NOT_APPLICABLE,
    NOT_TESTED,
    PASS,
    UNKNOWN,
    Evidence,
    Finding,
    Verdict,
)
from clirace.checks.lockerror import succeeded
from clirace.errors import Undecided
from clirace.history import OUTPUT_CAP, History, Invocation, Rendezvous, Trial, WorkloadRound
from clirace.history.vocab import Outcome

R = TypeVar("R", bound=Trial)


def evidence(trial: Trial, labels: Iterable[str] = (), expected: object = "", found: object = "") -> Evidence:
    labels = list(labels)
    invocations = []
    for label in labels:
        inv = trial.invocation(label)
        if inv is not None:
            invocations.append({"label": label, "command": inv.command(), "outcome": inv.ending(),
                                "printed": inv.printed()})
    meeting = trial.rendezvous if isinstance(trial, WorkloadRound) else None
    how = (" at a rendezvous" if meeting else " amplified" if isinstance(trial, WorkloadRound) and trial.amplified
           else "")
    return Evidence(trial=f"{trial.KIND}: {trial.name} (round {trial.round + 1}{how})", invocations=invocations,
                    expected=one_line(expected), found=one_line(found),
                    observed="; ".join(filter(None, [_met(meeting, labels) if meeting else "",
                                                     served(trial, labels) or ("" if meeting else describe(trial))])))


def _met(meeting: Rendezvous, labels: Iterable[str]) -> str:
    """What a rendezvous round did to the invocations named, from its stop log: where each was held and in
    what order they went on. For a lost update it is the interleaving itself: each had read the state before
    any of them wrote, and each wrote back its own read after the one before it had ended."""
    order = sorted(meeting.arrived, key=lambda label: meeting.arrived[label])
    shown = [label for label in order if label in set(labels)] or order
    stops = "; ".join(f"{label} stopped at {one_line(meeting.stopped_at.get(label, '?'), 120)}" for label in shown[:4])
    more = f" (and {len(shown) - 4} more)" if len(shown) > 4 else ""
    gone = f"; {', '.join(meeting.exited_before)} ended without reaching it" if meeting.exited_before else ""
    return (f"each of {len(meeting.arrived)} invocations was stopped just after {meeting.aimed} ({stops}{more}{gone}); "
            f"released after {meeting.released_after if meeting.released_after is not None else '?'} s "
            f"({meeting.why_released}), one at a time in arrival order ({', '.join(order)}), each once the one "
            "before had ended")


def cut_short(inv: Invocation, streams: str) -> str:
    """The undecided summary for output the history kept only the start of, with no answer in that start."""
    return (f"could not decide: {inv.label} ({inv.ending()}) printed more than the {OUTPUT_CAP // 1024} KiB of each "
            f"stream kept ({streams}), and no LOCK_HELD error in what was kept: the rest may have held one")


def records(trials: Iterable[Trial]) -> tuple[str, ...]:
    """The records a verdict read, named as the evidence names trials ("KIND: NAME (round N)")."""
    return tuple(f"{t.KIND}: {t.name} (round {t.round + 1})" for t in trials)


def one_line(value: object, limit: int = 200) -> str:
    text = " ".join(str(value).split())
    return text[:limit] + ("…" if len(text) > limit else "")


FLAKY = "flaky"  # the one word for an outcome the clock decided whose two runs disagreed (Verdict.rates["flaky"])


def flaky(check_id: str, first: str, second: str, hint: str, findings: Sequence[Finding] = ()) -> Verdict:
    """The verdict when an outcome the clock decided was run twice and the runs disagree (`first`, `second`: what
    each showed): undecided, with the word in the data as well as in the summary."""
    return Verdict(check_id, UNKNOWN, f"{FLAKY}: {flaky_words(first, second)}", list(findings), hint=hint,
                   rates={FLAKY: True})


def flaky_words(first: str, second: str) -> str:
    return (f"{first} in a first run, and {second} in a second; an outcome decided by the clock is reported only "
            "when two runs agree")


UNPLANNED = "the run planned no experiment for it: the spec gives no way to exercise it"


def not_run_verdict(check_id: str, history: History, experiment: str, unplanned: str = UNPLANNED,
                    hint: str = "") -> Verdict | None:
    """The not-tested verdict when the experiment did not run (a record says why) or was never planned (the
    plan, written before anything ran, has nothing for this check: `unplanned` says why), else None."""
    skipped = history.not_run(experiment)
    if skipped is None:
        if history.plan is not None and not any(check_id in p.checks for p in history.plan):
            return Verdict(check_id, NOT_TESTED, unplanned, hint=hint)
        return None
    if skipped.error:
        return Verdict(check_id, UNKNOWN, f"could not decide: {skipped.error}", hint=skipped.hint)
    return Verdict(check_id, NOT_TESTED, skipped.why, hint=skipped.hint)


W = TypeVar("W", bound=WorkloadRound)


def parallel_rounds(history: History, kind: type[W]) -> list[W]:
    """A workload's parallel rounds (its serial reference runs are judged in checks/reference.py)."""
    return [t for t in history.of(kind) if not t.serial]


def verdict_over_rounds(check_id: str, trials: Sequence[R], judge_one: Callable[[R], list[Finding]],
                        describe_pass: Callable[[list[R]], str], tally: Callable[[list[Finding]], str] | None = None,
                        prefix: str | None = None, undecided: tuple[str, str] | None = None,
                        blind: dict[str, tuple[str, ...]] | None = None, ran_again: str = "") -> Verdict:
    """Judge each trial with `judge_one(trial) -> list[Finding]`; any finding fails, errors make it unknown.

    The summary says in how many rounds it failed, so a race seen once in five rounds reads as such.
    `prefix` names the parallel invocations (e.g. "inc-"): if none of them ever exited 0 there is nothing
    to judge, and the verdict is unknown rather than a vacuous pass. Only rounds that raced count in the
    detection bound (`could_not_race`): a round where nothing could be lost is empty evidence, as Elle's
    empty graph is. `blind` maps a finding code to the codes a round holding it did not examine (a config that
    did not parse was never looked into for lost keys): the verdict lists them as not examined. `ran_again`
    (reference.ran_again) ends a pass's summary: why its reference pass ran twice.
    """
    if not trials:
        return Verdict(check_id, NOT_APPLICABLE, "no such workload in the spec")
    if undecided:  # without a working reference run, what the parallel rounds did cannot be judged: (why, hint)
        return Verdict(check_id, UNKNOWN, f"could not decide: {undecided[0]}", hint=undecided[1])
    findings: list[Finding] = []
    failed_rounds: list[R] = []
    errors: list[str] = []
    judged: list[R] = []
    unexamined: dict[str, str] = {}
    hint = "Fix the spec or the tool so that the trial can run (see the error)."
    for trial in trials:
        if trial.error:
            errors.append(trial.error)
            continue
        try:
            mine = judge_one(trial)
        except Undecided as exc:
            errors.append(exc.args[0])
            hint = exc.args[1]
            continue
        judged.append(trial)
        if any(not f.advisory for f in mine):
            failed_rounds.append(trial)
        findings.extend(mine)
        for f in mine:
            for code in (blind or {}).get(f.code, ()):
                unexamined.setdefault(code, f"{f.code} in round {trial.round + 1}: {one_line(f.message(), 160)}")
    racing = [t for t in judged if not could_not_race(t, prefix)]

    def amplified(t: Trial) -> bool:
        return isinstance(t, WorkloadRound) and t.amplified and t.rendezvous is None

    def met(t: Trial) -> bool:
        return isinstance(t, WorkloadRound) and t.rendezvous is not None

    n_amplified, n_met = sum(1 for t in judged if amplified(t)), sum(1 for t in judged if met(t))
    rates = {"rounds": len(judged), "failed_rounds": len(failed_rounds), "amplified_rounds": n_amplified,
             "failed_amplified_rounds": sum(1 for t in failed_rounds if amplified(t)),
             "rendezvous_rounds": n_met, "failed_rendezvous_rounds": sum(1 for t in failed_rounds if met(t)),
             "racing_rounds": len(racing),
             "bound": detection_bound(len(racing), sum(1 for t in failed_rounds if t in racing))}
    how = ", ".join([f"{n_amplified} of them amplified" if n_amplified else "none amplified"]
                    + ([f"{n_met} at a rendezvous inside the race window"] if n_met else [])
                    + ([_not_raced(judged, racing, prefix)] if len(racing) < len(judged) else []))
    if failed_rounds:
        first = next(f for f in findings if not f.advisory)
        what = tally(findings) if tally else first.message()
        summary = f"{what} in {len(failed_rounds)} of {len(judged)} rounds ({how})"
        if 0 < len(failed_rounds) < len(judged):
            numbers = [str(t.round + 1) for t in failed_rounds]
            which = (f"round {numbers[0]}" if len(numbers) == 1 else
                     f"rounds {', '.join(numbers[:-1])} and {numbers[-1]}")
            summary += f"; non-deterministic: {which} failed, the others passed"
        return Verdict(check_id, FAIL, summary, findings, rates=rates, unexamined=unexamined)
    if errors:
        return Verdict(check_id, UNKNOWN, f"could not decide: {errors[0]}", findings, hint=hint, rates=rates)
    if prefix and judged and not any(ok_count(t, prefix) for t in judged):
        sample = judged[0].labelled(prefix)[0]
        return Verdict(check_id, UNKNOWN, f"no parallel invocation exited 0 in any round, so the invariant was never "
                       f"exercised (e.g. {sample.label}: {sample.ending()}; {sample.printed(100)})", findings,
                       hint="Check the workload's run command: it must succeed when run alone.", rates=rates)
    return Verdict(check_id, PASS, f"{describe_pass(judged)} ({how}){_refusals(judged, prefix)}{_bound_text(rates)}"
                   f"{ran_again}",
                   findings, rates=rates, unexamined=unexamined, read=records(judged))


def could_not_race(trial: Trial, prefix: str | None) -> str:
    """Why a round could not race, "" when it could: fewer than two of its parallel invocations (`prefix`)
    succeeded with their runs overlapping in time (one success alone loses nothing); or a rendezvous where fewer
    than two invocations met, counting those proved blocked on the tool's lock (released at its cap with one
    arrival, the others ended without reaching it)."""
    meeting = trial.rendezvous if isinstance(trial, WorkloadRound) else None
    if meeting is not None and len(meeting.arrived) + len(meeting.blocked) < 2:
        return (f"{len(meeting.arrived)} invocation(s) reached the rendezvous, released after "
                f"{meeting.why_released or '?'}")
    if prefix:
        done = sorted((inv for inv in trial.labelled(prefix) if succeeded(inv)), key=lambda inv: inv.started)
        if not any(later.started < earlier.ended for earlier, later in zip(done, done[1:], strict=False)):
            return f"{len(done)} invocation(s) exited 0" + (", none of them while another ran" if len(done) > 1 else "")
    return ""


def _not_raced(judged: Sequence[Trial], racing: Sequence[Trial], prefix: str | None) -> str:
    """How many rounds could not race, and why the first could not, for the summary."""
    first = next(t for t in judged if t not in racing)
    return (f"{len(judged) - len(racing)} of {len(judged)} rounds could not race and count in no bound (round "
            f"{first.round + 1}: {could_not_race(first, prefix)})")


CONFIDENCE = 0.99


def detection_bound(rounds: int, failed_rounds: int, confidence: float = CONFIDENCE) -> float | None:
    """For a pass (no failure in `rounds` rounds): the smallest per-round failure rate p that would have shown
    at least once with probability >= `confidence`: 1 - (1-p)**n >= c, so p = 1 - (1-c)**(1/n). None when it
    says nothing (a round failed, or none ran)."""
    if rounds < 0 or failed_rounds < 0 or failed_rounds > rounds:
        raise ValueError(f"need 0 <= failed_rounds <= rounds, got {failed_rounds} of {rounds}")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be between 0 and 1 exclusive, got {confidence}")
    if rounds == 0 or failed_rounds:
        return None
    return -math.expm1(math.log1p(-confidence) / rounds)  # exact for c near 1 or large n


def _bound_text(rates: dict[str, Any]) -> str:
    bound = rates.get("bound")
    if bound is None:
        return ""
    return (f"; a race losing an update in at least {bound:.0%} of rounds would have shown with probability "
            f">= {CONFIDENCE:.0%}")


def _refusals(trials: Sequence[Trial], prefix: str | None) -> str:
    """How many parallel invocations were refused or failed, with one of them: a pass on 3 increments out of 24 is
    weaker evidence than a pass on 24, and says so. Invocations whose outcome is unknown are counted apart."""
    if not prefix:
        return ""
    runs = [inv for t in trials for inv in t.labelled(prefix)]
    unknown = [inv for inv in runs if inv.outcome is Outcome.UNKNOWN]
    refused = [inv for inv in runs if not succeeded(inv) and inv.outcome is not Outcome.UNKNOWN]
    out = ""
    if refused:
        sample = refused[0]
        out += (f"; {len(refused)} of {len(runs)} invocations were refused or failed (e.g. {sample.label}: "
                f"{sample.ending()}; {sample.printed(100)})")
    if unknown:
        out += (f"; {len(unknown)} of {len(runs)} ended without saying whether they applied (e.g. "
                f"{unknown[0].label}: {unknown[0].ending()}), counted as either")
    return out


def ok_count(trial: Trial, prefix: str) -> int:
    return sum(1 for inv in trial.labelled(prefix) if succeeded(inv))


def unknown_count(trial: Trial, prefix: str) -> int:
    return sum(1 for inv in trial.labelled(prefix) if inv.outcome is Outcome.UNKNOWN)


def finding(code: str, trial: Trial, labels: Iterable[str] = (), expected: object = "", found: object = "", /,
            **args: Any) -> Finding:
    """A finding with its evidence; `args` fill the rule's message template (positional-only above so that
    templates may use the names labels, expected and found too)."""
    return Finding(code, args, evidence(trial, labels, expected, found))


def read_back(trial: Trial, label: str) -> Invocation:
    """An invocation that reads state back for the check; Undecided when it is missing or failed."""
    inv = trial.invocation(label)
    if inv is None:
        raise Undecided(f"the trial has no {label} invocation", "This history is incomplete; run the check again.")
    return inv
