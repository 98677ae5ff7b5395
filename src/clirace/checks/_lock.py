"""What the lock-conflict trial shows: whether it can be judged, what the contender did while the lock was held,
and whether it got past the lock. Shared by lock-excludes, lock-error-structured, lock-released-on-exit and
lock-wait-timeout (for a tool that never waits).

Time is judged against the tool itself: the contender had the prompt plus its own time alone (its `window`)
to answer, then was followed a little longer with the lock still held. An outcome the clock decided (it
outlived its window) was run twice; two runs that disagree are flaky, and decide nothing. So was an answer too
close to its window to tell ('close': after the prompt plus its fastest run alone, within the prompt plus its
slowest), which agrees with either; the other run decides, and two close answers decide nothing that needs the
clock."""
from __future__ import annotations

from clirace.checks._common import finding, flaky, not_run_verdict, one_line
from clirace.checks._effects import Lost, changes_lost, effects_lost
from clirace.checks.findings import NOT_TESTED, UNKNOWN, Finding, Verdict
from clirace.checks.lockerror import succeeded
from clirace.checks.reference import lock_undecided
from clirace.checks.timing import describe
from clirace.history import History, LockConflict, LockRelease, LockTrial, LockWait, Trial
from clirace.history.vocab import EventKind
from clirace.run.services.ops import lock_call, waits_for_lock

NO_LOCK = ("the spec has no lock section", "Add lock.contender and lock.hold.")
STATES = {"reached": "opened the state the holder was reading", "waiting": "was still running when the holder let go",
          "late": "answered only after its time to answer", "exited": "answered within its time to answer",
          "asked": "asked for an answer on its stdin",
          "close": "answered too close to its time to answer to tell (within the prompt plus its slowest run alone, "
                   "after the prompt plus its fastest)"}
CLOSE_HINT = "Run the check again on a less loaded machine, or set lock.prompt well away from the tool's own wait."


def conflict_trial(history: History, check_id: str) -> LockConflict | Verdict:
    """The lock-conflict trial when it can be judged, else the not-tested or undecided verdict to return."""
    trials = history.of(LockConflict)
    if not trials:
        return not_run_verdict(check_id, history, "lock-conflict", *NO_LOCK) or Verdict(
            check_id, NOT_TESTED, NO_LOCK[0], hint=NO_LOCK[1])
    failed = next((t for t in trials if t.error), None)
    if failed is not None:
        return Verdict(check_id, UNKNOWN, f"could not decide: {failed.error}")
    # clirace records a contender in every conflict it ran; a history edited since may have lost it
    unrecorded = next((t for t in trials if t.invocation("contender") is None), None)
    if unrecorded is not None:
        return Verdict(check_id, UNKNOWN, f"could not decide: {unrecorded.KIND} {unrecorded.name} (round "
                       f"{unrecorded.round + 1}) has no record of the contender's invocation",
                       hint="Judge the history clirace saved, unedited, or run the check again.")
    why = lock_undecided(history)
    if why:
        return Verdict(check_id, UNKNOWN, f"could not decide: {why}",
                       hint="lock.contender must be a command that finishes when run alone.")
    first, *again = trials
    for other in again:
        if not _agree(_outcome(other), _outcome(first)):
            return flaky(check_id, f"the contender {_said(first)}", _said(other),
                         "Run the check again on a less loaded machine, or raise lock.prompt.")
    return deciding(trials)


def deciding(trials: list[LockConflict]) -> LockConflict:
    """The run that decides: the first whose answer was not too close to its time to answer to tell, else the
    first (whose state, 'close', the checks that need the clock judge undecided)."""
    return next((t for t in trials if contender_state(t) != "close"), trials[0])


def too_close(check_id: str, trial: LockConflict, history: History) -> Verdict:
    """The verdict of a check that needs the clock when both runs' answers were too close to their time to
    answer to tell ('close')."""
    contender = trial.invocation("contender")
    assert contender is not None
    return Verdict(check_id, UNKNOWN, f"could not decide: the contender {STATES['close']} ({contender.ending()} after "
                   f"{contender.duration:.1f} s; {window(trial):g} s to answer, {trial.close_from:g} s with its "
                   f"fastest run alone)" + again(history), hint=CLOSE_HINT)


def _outcome(trial: LockConflict) -> tuple[str, bool]:
    contender = trial.invocation("contender")
    return contender_state(trial), contender is not None and succeeded(contender)


def _agree(one: tuple[str, bool], other: tuple[str, bool]) -> bool:
    """Whether two runs' outcomes agree: a close answer agrees with an answer in time and with a late one."""
    (state, ok), (other_state, other_ok) = one, other
    timed = {"exited", "late", "close"}
    return ok == other_ok and (state == other_state or ("close" in (state, other_state) and
                                                        {state, other_state} <= timed))


def _said(trial: LockConflict) -> str:
    contender = trial.invocation("contender")
    ending = f" ({contender.ending()} after {contender.duration:.1f} s)" if contender else ""
    return STATES[contender_state(trial)] + ending


def window(trial: LockConflict) -> float:
    """How long the contender had to answer: the prompt plus its time alone (older histories: the prompt)."""
    return trial.window or trial.prompt


def contender_state(trial: LockConflict) -> str:
    """What the contender did while the lock was held: 'reached' the parked state; 'asked' for an answer on its
    stdin (a pipe nobody wrote to); 'waiting', still running when clirace let the holder go (after its window and
    the follow), or seen in its lock call on the parked file and stopped then; 'late', it answered while the lock
    was still held but after its window; 'close', within its window but too close to it to tell (`close_from`);
    or 'exited' within its window."""
    contender = trial.invocation("contender")
    if trial.event(EventKind.REACHED_STATE, "contender"):
        return "reached"
    if trial.event(EventKind.ASKED, "contender"):
        return "asked"
    if trial.event(EventKind.BLOCKED_ON_LOCK, "contender"):
        return "waiting"
    released = trial.event(EventKind.RELEASED, "holder")
    if contender is not None and released is not None and released.at <= contender.ended:
        return "waiting"
    if contender is not None and trial.window and contender.duration > trial.window:
        return "late"
    if contender is not None and trial.close_from and contender.duration > trial.close_from:
        return "close"
    return "exited"


def waited(trial: LockConflict) -> tuple[str, str]:
    """What shows that a contender still running when the holder let go was blocked on the held lock ("" when
    nothing does), and what the record shows of it. Only alive is no proof, a slow tool is alive too; nor is idle
    (its CPU share), a sleep or a network call is idle too: the proof is its lock call or its place among the
    kernel's waiters, a retry loop on the locked file (timing.blocked_on_lock), the parked pipe held open in its
    lock call, or its lock commands a server made wait or refused again and again. Older histories, which did
    not watch it, count it as waiting, as they were judged then."""
    if trial.watched is None and not trial.window:
        return "not watched", "not watched"
    seen = trial.event(EventKind.BLOCKED_ON_LOCK, "contender")
    proof = (seen.detail if seen is not None else trial.watched.blocked if trial.watched else "") \
        or server_lock_wait(trial)
    return (proof.replace(trial.sandbox, "{sandbox}") if trial.sandbox else proof), \
        describe(trial.watched) if trial.watched else "not watched"


def blocked_while_waiting(trial: LockWait) -> str:
    """What shows the lock-wait contender blocked on the held lock while it waited ("" when nothing does): what
    clirace saw as it waited (scenarios/lock.py Waiting: its lock call, its place among the kernel's waiters, a
    retry loop on the locked file, the parked state it waited to lock, PostgreSQL's lock wait), or its lock
    commands a server made wait or refused again and again. An answer alone is no proof: a tool that sleeps its
    wait and then prints LOCK_HELD answers the same."""
    proof = (trial.watched.blocked if trial.watched else "") or server_lock_wait(trial)
    return proof.replace(trial.sandbox, "{sandbox}") if trial.sandbox else proof


def server_lock_wait(trial: Trial) -> str:
    """How the trial's servers saw a client other than clirace's holder wait for the held lock, "" when they did
    not: a blocking lock statement (pg_advisory_lock, SELECT ... FOR UPDATE), which PostgreSQL makes wait, or a
    lock asked for again and again (SET ... NX, pg_try_advisory_lock): a retry loop. clirace's holder is the first
    client to ask for a lock."""
    asked: dict[str, list[tuple[str, bool]]] = {}  # client -> each lock call, and whether the server makes it wait
    for op in trial.server_ops:
        if lock_call(op.service, op.words, op.sql):
            said = " ".join(op.words) if op.words else one_line(op.sql, 80)
            asked.setdefault(op.client, []).append((said, waits_for_lock(op.service, op.words, op.sql)))
    for client, calls in list(asked.items())[1:]:
        blocking = [said for said, waits in calls if waits]
        if blocking:
            return f"the server made client {client} wait in {blocking[0]!r} for the lock clirace held"
        if len(calls) >= 2:
            return f"client {client} asked the server for the lock {len(calls)} times ({calls[0][0]!r}): retrying it"
    return ""


def again(history: History) -> str:
    """The words for the other run, which agreed with the deciding one, for the evidence ("" without one)."""
    trials = history.of(LockConflict)
    if len(trials) < 2:
        return ""
    decided = deciding(trials)
    other = next(t for t in trials if t is not decided)
    if contender_state(other) == contender_state(decided):
        return f"; the same in {'a second' if other.round else 'the first'} run ({_said(other)})"
    return f"; in the {'second' if other.round else 'first'} run the contender {_said(other)}"


def holder_gone(trial: Trial) -> bool:
    return trial.event(EventKind.HOLDER_GONE) is not None


UNHELD_HINT = ("Make lock.hold keep the lock until clirace lets it go (its {release_file}, or the parked pipe), "
               "so that the contender runs while the lock is held.")


def unheld(trial: LockConflict) -> str | None:
    """Why the contender's answer says nothing about a held lock, else None: the holder exited on its own before
    the contender had finished, so the contender may have run with the lock free. A contender seen reading the
    state a parked holder was reading ran while it held the lock, whatever the holder did later."""
    if not holder_gone(trial) or contender_state(trial) == "reached":
        return None
    return ("could not decide: the holder had exited on its own before the contender finished, so the contender "
            "may have run with the lock free; only a contender that ran while the lock was provably held is judged")


def not_excluded(trial: LockConflict) -> str | None:
    """How the contender got past a held lock ('reached' the parked state, or ran and exited 0), else None."""
    state = contender_state(trial)
    if state == "reached":
        return "opened the state file the holder was reading, without waiting for any lock"
    contender = trial.invocation("contender")
    if state in ("exited", "late", "close") and contender is not None and succeeded(contender):
        return "ran and exited 0"
    return None


def asked(trial: LockConflict) -> str:
    """What a contender that waited for an answer on its stdin had printed (its prompt), "" when it did not ask."""
    event = trial.event(EventKind.ASKED, "contender")
    if event is None:
        return ""
    return one_line(event.detail.replace(trial.sandbox, "{sandbox}") if trial.sandbox else event.detail, 160) \
        or "nothing"


# --- effects: every invocation that exited 0 left its key --------------------------------------------------------

def _when(trial: LockTrial, label: str) -> str:
    if isinstance(trial, LockConflict) and label == "contender":
        return {"exited": " while the lock was held", "late": " while the lock was held",
                "waiting": " once the holder had let go"}.get(contender_state(trial), "")
    if isinstance(trial, LockWait) and label == "contender":
        return f" while the lock was held (with {trial.option})"
    if label == "holder":
        return " as the holder, once let go" if not isinstance(trial, LockRelease) else " as the holder"
    return " with the lock free"


def _lost(trial: LockTrial, history: History) -> list[Lost]:
    return effects_lost(trial)[0] + changes_lost(trial, history)


def silent_losses(trial: LockTrial, history: History) -> list[Finding]:
    """CR209 for every invocation of the trial that exited 0 and whose key, or whose change (a contender that writes
    no key of its own), was not there afterwards."""
    out = []
    for label, key, value, found in _lost(trial, history):
        where = trial.effects_config.path if trial.effects_config is not None else f"get-{label}"
        shown = f"{key} is missing" if found is None else f"{key} holds {one_line(found, 80)!r}"
        labels = [label] + (["holder"] if label != "holder" and trial.invocation("holder") else [])
        out.append(finding("CR209", trial, labels, f"{key} holding {value}", f"{shown} ({where})",
                           label=label, when=_when(trial, label), found=shown))
    return out


def lost_labels(trial: LockTrial, history: History) -> set[str]:
    return {label for label, *_ in _lost(trial, history)}


def ran_while_held(history: History) -> list[Finding]:
    """CR201 for a contender of the lock-wait experiment that got past the held lock (reached the parked state, or
    exited 0 with its key there or unknown): the conflict experiment's own is judged by lock-excludes' check."""
    out = []
    for trial in history.of(LockWait):
        inv = trial.invocation("contender")
        if trial.error or inv is None or holder_gone(trial):
            continue
        if trial.event(EventKind.REACHED_STATE, "contender"):
            how = f"opened the state file the holder was reading, with {trial.option}"
        elif succeeded(inv) and "contender" not in lost_labels(trial, history):
            how = f"ran and exited 0 with {trial.option}"
        else:
            continue
        out.append(finding("CR201", trial, ["holder", "contender"], "a LOCK_HELD error", inv.ending(), how=how))
    return out


def lock_trials(history: History) -> list[LockTrial]:
    """The lock experiments' trials that finished (the reference runs alone aside)."""
    return [t for t in history.trials if isinstance(t, (LockConflict, LockWait, LockRelease)) and not t.error]


def effects_note(history: History) -> str:
    """What a pass of lock-excludes says about the keys read back, so that 'not read back' never reads as 'kept'."""
    read = [effects_lost(t) for t in lock_trials(history)]
    judged = sum(found for _, found, _ in read)
    why = next((w for _, _, w in read if w), "")
    said = f"; every key written by an invocation that exited 0 was there afterwards ({judged})" if judged else ""
    return said + (f" (not judged: {why})" if why else "")
