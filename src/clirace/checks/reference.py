"""The serial reference runs judged: is the spec right about the tool, and what does the tool do alone?

The oracle for a parallel round is what the tool does alone. So before anything runs in parallel, every
workload's invariant must hold on its serial run, the lock's contender must succeed alone and its error
command fail alone; what does not is a spec error (the spec asks for something the tool does not do), never
a finding against the tool. A serial run whose commands ended without saying whether they applied
(killed, timed out) leaves its workload undecided instead.

For the output workload the reference is also the expected result: each input ran alone twice, in two
sandboxes and in opposite orders; what differs between those two runs (timestamps, random ids, counters)
is masked, and a parallel run must produce what remains.
"""
from __future__ import annotations

import difflib
import re
from dataclasses import dataclass

from clirace.checks._common import ok_count, one_line, unknown_count
from clirace.checks._effects import effects_lost
from clirace.checks._read import claimed_item, found_values, read_counter, remaining
from clirace.checks.lockerror import succeeded
from clirace.errors import Undecided, Unparseable
from clirace.history import (
    RAN_AGAIN,
    UNANSWERED_ALONE,
    Alone,
    ClaimRound,
    CounterRound,
    History,
    Invocation,
    KeysRound,
    OutputRound,
    Trial,
    WorkloadRound,
)
from clirace.history.vocab import Failure, Outcome
from clirace.spec import placeholders
from clirace.spec.configfile import parse

RUN_LABELS = {"inc", "set", "claim", "out"}  # the invocations a round runs in parallel (the rest read or set up)
_TOKEN = re.compile(r"\w+|\s+|[^\w\s]")
MAX_COMPARED = 64 * 1024  # characters of an output that the masks are computed over
USAGE = 300  # characters shown of a lock command that fails alone: a usage message's error comes after its synopsis


@dataclass(frozen=True)
class Problem:
    """What the serial run showed: by default the spec's misfit (a spec error, exit 2 before any parallel round);
    with another `failure`, why it could not decide: the tool's (it hung or crashed alone), an interrupt, or
    clirace's own (a bug: exit 3, naming `trial`)."""
    workload: str  # the workload's name, or "lock"
    message: str
    failure: Failure = Failure.SPEC
    trial: str = ""  # the record it comes from, named in clirace's own failure
    key: tuple[str | int, ...] = ()  # where in the spec the command that failed is written, when known
    hint: str = ""  # what decides it, when it is undecided and more can be said than UNDECIDED_HINT

    @property
    def spec(self) -> bool:
        return self.failure is Failure.SPEC


def serial(history: History, kind: type[WorkloadRound], workload: str) -> list[WorkloadRound]:
    """The workload's reference passes that count (a superseded one, run again, does not)."""
    return [t for t in history.of(kind) if t.serial and not t.superseded and t.workload == workload]


def unanswered(trial: Trial) -> Invocation | None:
    """The first invocation of a reference pass that gave no answer (Trial.unanswered); None when every one
    answered, or the pass was the spec's error or ended by an interrupt or by clirace (which no second pass would
    mend)."""
    if trial.failure not in (None, Failure.TOOL):
        return None
    return trial.unanswered()


def problems(history: History) -> list[Problem]:
    """Every problem the reference runs show, in the order of the spec."""
    found: list[Problem] = []
    for trial in history.trials:
        if isinstance(trial, WorkloadRound) and trial.serial and not trial.superseded:
            mine = [_with_first_pass(history, trial, p) for p in _workload_problems(history, trial)]
        elif isinstance(trial, Alone):
            mine = _alone_problems(trial)
        else:
            continue
        # The sandbox's random path reads as {sandbox}, as in all evidence: the message is the same every run.
        found.extend(Problem(p.workload, p.message.replace(trial.sandbox, "{sandbox}") if trial.sandbox else p.message,
                             p.failure, f"{trial.KIND}: {trial.name} (round {trial.round + 1})", p.key, p.hint)
                     for p in mine)
    unique: dict[str, Problem] = {}
    for problem in found:
        unique.setdefault(problem.message, problem)
    return list(unique.values())


UNDECIDED_HINT = "Make the workload's commands finish when run alone (see tool.timeout)."
TWICE_HINT = ("A reference pass in which every command answers decides it; this one gave no answer twice, each time "
              "in a fresh sandbox: make the workload's commands finish when run alone, or raise tool.timeout if this "
              "machine is too loaded for it.")


def undecided(history: History, workload: str) -> Problem | None:
    """Why the workload cannot be decided from its reference runs, if it cannot."""
    return next((p for p in problems(history) if p.workload == workload and not p.spec), None)


def undecided_kind(history: History, kind: type[WorkloadRound]) -> tuple[str, str] | None:
    """(why, hint) when a workload of this kind cannot be decided from its reference runs (or because the
    reference or workload experiment failed outside any trial)."""
    for experiment in ("reference", "workloads"):
        failed = history.not_run(experiment)
        if failed is not None and failed.error:
            return failed.error, failed.hint or UNDECIDED_HINT
    names = dict.fromkeys(t.workload for t in history.of(kind))
    problem = next((found for name in names if (found := undecided(history, name))), None)
    return (problem.message, problem.hint or UNDECIDED_HINT) if problem else None


def _with_first_pass(history: History, trial: WorkloadRound, problem: Problem) -> Problem:
    """A pass that could not decide, and ran because the pass before it gave no answer (superseded): the problem
    names that first pass's unanswered invocation too, and says what decides it."""
    if problem.spec:
        return problem
    silent = next((shown for t in history.of(type(trial)) if t.superseded and t.workload == trial.workload and
                   t.round == trial.round and (shown := _silent_in(t))), None)
    if silent is None:
        return problem
    return Problem(problem.workload, f"{problem.message}; in its first pass, which ran again for that in a fresh "
                   f"sandbox, {silent} had given no answer either", problem.failure, problem.trial, problem.key,
                   TWICE_HINT)


def ran_again(history: History, kind: type[WorkloadRound]) -> str:
    """What a verdict judged against a reference pass that ran again says of it ("" when none did): the first
    pass's unanswered invocation, which is why."""
    return next((f"; judged against {t.workload}'s second reference pass, run in a fresh sandbox because in the "
                 f"first {silent} gave no answer" for t in history.of(kind)
                 if t.serial and t.superseded and (silent := _silent_in(t))), "")


def _silent_in(first: WorkloadRound) -> str:
    """A superseded pass's unanswered invocation, shown as evidence ("" without one)."""
    silent = unanswered(first)
    if silent is None:
        return ""
    return _shown(silent).replace(first.sandbox, "{sandbox}") if first.sandbox else _shown(silent)


def _ended_unsaid(invs: list[Invocation]) -> Invocation | None:
    return next((inv for inv in invs if inv.outcome is Outcome.UNKNOWN), None)


def _printed(inv: Invocation, limit: int = 120) -> str:
    """'printed stdout: ...', or 'printed nothing' (Invocation.printed says that much itself)."""
    said = inv.printed(limit)
    return said if said == "printed nothing" else f"printed {said}"


def _shown(inv: Invocation, limit: int = 120) -> str:
    return f"{inv.command()!r} ({inv.ending()}; {inv.printed(limit)})"


def _left_running(trial: Trial, inv: Invocation) -> Problem | None:
    """A failure alone while a process an earlier command left running held on, and would not go (it held no lock
    clirace could name, and did not end within its wait): whether the tool's own lock, outliving its command,
    refused it cannot be told, so it is no spec error. (One that failed again once that process had gone failed
    for a reason of its own: the spec's.)"""
    leftover = next((left for left in trial.leftovers if left.refused == inv.label and left.still_running), None)
    if leftover is None:
        return None
    return Problem("", f"run alone, {_shown(inv)} failed while a process {leftover.left_by} had left running (pid "
                   f"{leftover.pid}: {leftover.command}) still ran after {leftover.waited:g}s: whether the tool's own "
                   "lock, outliving its command, refused it cannot be told", Failure.TOOL)


def _workload_problems(history: History, trial: WorkloadRound) -> list[Problem]:
    name = trial.workload
    if trial.failure is not None:  # a setup that fails in a fresh sandbox is the spec's; the rest could not decide
        return [Problem(name, f"run alone, it could not be carried out: {trial.error}", trial.failure)]
    mine = [inv for inv in trial.invocations if not inv.label.startswith(RAN_AGAIN)]
    runs = [inv for inv in mine if inv.label.split("-")[0] in RUN_LABELS]
    others = [inv for inv in mine if inv.label.split("-")[0] not in RUN_LABELS]
    # A read, add or list that ended without saying leaves nothing to compare with. A run that did is a bound
    # (the invariants take it as one), as long as another run ended and said that it applied.
    unsaid = _ended_unsaid(others) or (None if any(succeeded(i) for i in runs) else _ended_unsaid(runs))
    if unsaid is not None:
        return [Problem(name, f"run alone, {_shown(unsaid)} ended without saying whether it did its work, so "
                        "its parallel runs cannot be judged either", Failure.TOOL)]
    failed = next((inv for inv in mine if inv.outcome is not Outcome.UNKNOWN and not succeeded(inv)), None)
    if failed is not None and (left := _left_running(trial, failed)) is not None:
        return [Problem(name, left.message, left.failure)]
    if failed is not None and not (isinstance(trial, ClaimRound) and failed.label == "list-after"):
        return [Problem(name, f"run alone, one at a time, {_shown(failed)} failed; every command of a workload "
                        "must succeed when nothing else runs")]
    try:
        if isinstance(trial, CounterRound):
            return _counter(trial)
        if isinstance(trial, KeysRound):
            return _keys(trial)
        if isinstance(trial, ClaimRound):
            return _claim(trial)
        if isinstance(trial, OutputRound):
            return _outputs(history, trial)
    except Undecided as exc:
        return [Problem(name, f"run alone: {exc.args[0]}")]
    return []


def _counter(trial: CounterRound) -> list[Problem]:
    start = trial.start if trial.start is not None else read_counter(trial, "read-before")
    final = read_counter(trial, "read-after")
    ok, unknown = ok_count(trial, "inc-"), unknown_count(trial, "inc-")
    if start + ok <= final <= start + ok + unknown:
        return []
    return [Problem(trial.workload, f"run alone, {len(trial.labelled('inc-'))} increments one after another took "
                    f"the counter from {start} to {final}; the read command (or value regex) does not show what "
                    "the run command counts")]


def _keys(trial: KeysRound) -> list[Problem]:
    values, unparseable = found_values(trial)
    if unparseable is not None:
        return [Problem(trial.workload, f"after keys written alone, the config does not parse as "
                        f"{trial.config.format if trial.config else '?'}: {unparseable.args.get('error')}")]
    out = []
    for label, (key, value) in trial.keys.items():
        held = values.get(key)
        if held is not None and value in held:
            continue
        writer = trial.invocation(label)
        if held is None and writer is not None and writer.outcome is Outcome.UNKNOWN:
            continue  # killed before it answered, it may not have written its key: no misfit of the spec's
        out.append(Problem(trial.workload, f"key {key} written alone ({_shown(trial.invocation(label))}) "  # type: ignore[arg-type]
                           f"{'holds ' + repr(one_line(held, 80)) if held is not None else 'is not found'} afterwards, "
                           f"expected {value!r}: {_where_keys_are(trial, key)}"))
        break  # one key says it; the others are alike
    return out


def _where_keys_are(trial: KeysRound, key: str) -> str:
    """What the spec's lookup found instead, so the user sees how to fix config.key or read."""
    config = trial.config
    if config is None:
        get = trial.invocation(f"get-{next(label for label, (k, _) in trial.keys.items() if k == key)[4:]}")
        return f"the read command {_printed(get) if get else 'printed nothing (it never ran)'}"
    if config.text is None:
        return f"{config.path} does not exist ({config.why_none}); is config.path the file the tool writes?"
    try:
        data = parse(config.text, config.format)
    except Unparseable as exc:
        return f"{config.path} cannot be judged ({exc})"
    lookup = placeholders.expand(config.key, {"key": key})
    top = ", ".join(map(str, list(data)[:12])) if isinstance(data, dict) else type(data).__name__
    field = "config.query" if config.query else "config.key"
    hint = "" if config.query else " (a key kept in a list needs config.query, a JMESPath expression)"
    return f"{field} {config.key!r} looks up {lookup!r} in {config.path}, whose top-level keys are: {top}{hint}"


def _claim(trial: ClaimRound) -> list[Problem]:
    claimed = []
    unknown = 0  # claims killed before they answered: each may or may not have taken an item
    for inv in trial.labelled("claim-"):
        if inv.outcome is Outcome.UNKNOWN:
            unknown += 1
            continue
        item = claimed_item(inv.stdout, trial.pattern)
        if item is None or item not in trial.items:
            what = f"the claimed regex {trial.pattern!r}" if trial.pattern else "its whole stdout"
            return [Problem(trial.workload, f"run alone, {inv.label} {_printed(inv)}; {what} does not give "
                            f"one of the queued items ({', '.join(trial.items[:3])}, ...)")]
        claimed.append(item)
    if len(set(claimed)) != len(claimed):
        return [Problem(trial.workload, f"run alone, one at a time, the claims gave {claimed}: an item twice")]
    left = remaining(trial)
    listed = trial.invocation("list-after")
    if listed is not None and (left is None or len(set(left) & set(trial.items)) > unknown):
        return [Problem(trial.workload, f"after every item was claimed alone, the list command "
                        f"{_printed(listed)}; expected the items still queued, one per line (none here)")]
    return []


# --- the output oracle: a template per input, from its two serial runs ---------------------------------------

@dataclass(frozen=True)
class Template:
    """An output with its varying parts masked: literal chunks, anything between them (`open_start`/`open_end`
    say whether something may come before the first or after the last)."""
    chunks: tuple[str, ...]
    open_start: bool
    open_end: bool

    @property
    def stable(self) -> int:
        return sum(len(c.strip()) for c in self.chunks)

    def masked(self) -> str:
        return ("…" if self.open_start else "") + "…".join(self.chunks) + ("…" if self.open_end else "")

    def matches(self, text: str) -> bool:
        """Glob matching with only `*` wildcards: leftmost placement of each chunk is always right, and linear."""
        chunks = list(self.chunks)
        if not chunks:
            return True
        pos = 0
        if not self.open_start:
            if not text.startswith(chunks[0]):
                return False
            pos = len(chunks[0])
            chunks = chunks[1:]
        last = None if self.open_end or not chunks else chunks.pop()
        for chunk in chunks:
            at = text.find(chunk, pos)
            if at < 0:
                return False
            pos = at + len(chunk)
        if last is not None:
            return len(text) - len(last) >= pos and text.endswith(last)
        return self.open_end or pos == len(text)


def normalised(trial: Trial, text: str) -> str:
    """An output with the trial's sandbox path shown as {sandbox}: it differs in every trial."""
    return text.replace(trial.sandbox, "{sandbox}")[:MAX_COMPARED] if trial.sandbox else text[:MAX_COMPARED]


def template(a: str, b: str) -> Template:
    ta, tb = _TOKEN.findall(a), _TOKEN.findall(b)
    chunks: list[str] = []
    open_start = open_end = False
    for tag, i1, i2, _j1, _j2 in difflib.SequenceMatcher(None, ta, tb, autojunk=False).get_opcodes():
        if tag == "equal":
            chunks.append("".join(ta[i1:i2]))
        elif not chunks:
            open_start = True
        else:
            chunks.append("")  # a wildcard between two literal chunks
    if chunks and chunks[-1] == "":
        open_end = True
    literal = tuple(c for c in chunks if c)
    return Template(literal, open_start, open_end)


def templates(history: History, workload: str) -> dict[str, Template] | None:
    """label (out-N) -> the template its output must match, from the serial runs; None without them."""
    runs = sorted(serial(history, OutputRound, workload), key=lambda t: t.round)
    if len(runs) < 2 or any(t.error for t in runs):
        return None
    first, second = runs[0], runs[1]
    assert isinstance(first, OutputRound) and isinstance(second, OutputRound)
    out = {}
    for label, run in first.runs.items():
        again = second.runs.get(label)
        ran = [t.invocation(label) for t in (first, second)]
        if run.produced is None or again is None or again.produced is None or not all(i and i.ok for i in ran):
            continue  # an input whose serial runs did not both succeed has no reference: its runs are not judged
        out[label] = template(normalised(first, run.produced), normalised(second, again.produced))
    return out


def _outputs(history: History, trial: OutputRound) -> list[Problem]:
    missing = next((label for label, run in trial.runs.items()
                    if not run.produced and (inv := trial.invocation(label)) is not None and inv.ok), None)
    if missing is not None:
        return [Problem(trial.workload, f"run alone, {missing} wrote nothing to its output "
                        f"({_shown(trial.invocation(missing))})")]  # type: ignore[arg-type]
    masks = templates(history, trial.workload)
    if masks is None or trial.round != 1:
        return []
    runs = sorted(serial(history, OutputRound, trial.workload), key=lambda t: t.round)
    first = runs[0]
    assert isinstance(first, OutputRound)
    for label, mask in masks.items():
        if mask.stable == 0:
            produced = first.runs[label].produced or ""
            return [Problem(trial.workload, f"the same input run alone twice gave outputs with nothing in common "
                            f"(e.g. {one_line(produced, 60)!r} and then something else): nothing is left to compare "
                            "parallel runs with")]
        for other, run in first.runs.items():
            if other != label and mask.matches(normalised(first, run.produced or "")):
                return [Problem(trial.workload, f"run alone, {label} and {other} (different inputs) gave outputs that "
                                f"differ only where runs of the same input differ ({mask.masked()[:80]!r}): "
                                "whose result a parallel output is cannot be told")]
    return []


def _alone_problems(trial: Alone) -> list[Problem]:
    inv = trial.invocation("alone")
    if trial.failure is not None:
        return [Problem("lock", f"lock.{trial.command} could not be run alone: {trial.error}", trial.failure)]
    if inv is None:
        return [Problem("lock", f"lock.{trial.command} was not run alone (the record has no invocation)",
                        Failure.CLIRACE)]
    if inv.outcome is Outcome.UNKNOWN and trial.command in ("holder", "waiter"):
        return []  # only a refusal alone is the spec's; one that never ended alone is judged where it runs, as before
    if inv.outcome is Outcome.UNKNOWN:
        first = trial.invocation(UNANSWERED_ALONE)
        return [Problem("lock", f"lock.{trial.command} run alone on fresh state {_shown(inv)} ended without saying "
                        "whether it did its work" + (f", as its first run alone did ({_shown(first)})" if first else ""),
                        Failure.TOOL)]
    if trial.command in ("contender", "holder", "waiter") and not succeeded(inv) and \
            (left := _left_running(trial, inv)) is not None:
        return [Problem("lock", f"{_named(trial)}: {left.message}", left.failure)]
    if trial.command == "contender" and not succeeded(inv):
        return [Problem("lock", f"lock.contender fails when run alone on fresh state: {_shown(inv, USAGE)}; it must be a "
                        "mutating command that succeeds when nothing holds the lock", key=("lock", "contender"))]
    if trial.command == "waiter" and not succeeded(inv):
        return [Problem("lock", f"{_named(trial)} fails when run alone on fresh state: {_shown(inv, USAGE)}; with "
                        "nothing holding the lock it must succeed, as lock.contender does without it",
                        key=("lock", "wait_option"))]
    if trial.command == "holder" and not succeeded(inv):
        return [Problem("lock", f"{_named(trial)} fails when run alone on fresh state: {_shown(inv, USAGE)}; the holder's "
                        "command must take the lock and succeed when nothing else holds it (a hook run alone finds "
                        "its {release_file} already there and {hold_seconds} 0)", key=HOLDER_KEY)]
    lost, _found, _why = effects_lost(trial)
    if lost:
        _label, key, value, found = lost[0]
        where = trial.effects_config.path if trial.effects_config is not None else "the keys workload's read"
        return [Problem("lock", f"{_named(trial)} run alone on fresh state {_shown(inv)} wrote {key}={value}, but "
                        f"{where} {'does not find it' if found is None else f'finds {one_line(found, 60)!r}'} "
                        f"afterwards: the keys workload does not read what {_named(trial)}'s {{key}} and {{value}} "
                        "write, so the lock experiments could not read their keys back either")]
    if trial.command == "error_command" and _usage_error(inv):
        return [Problem("lock", f"lock.error_command fails when run alone with a usage error: {_shown(inv, USAGE)}; it "
                        "must take the lock and then fail, and a command the tool does not accept takes no lock",
                        key=("lock", "error_command"))]
    if trial.command == "error_command" and inv.ok:
        return [Problem("lock", f"lock.error_command succeeds when run alone: {_shown(inv)}; it must take the lock "
                        "and then fail")]
    return []


# How a command-line parser refuses a command it does not accept (argparse, click, getopt, cobra, clap): exit 2, or
# EX_USAGE (64), with a usage synopsis on stderr.
_USAGE = re.compile(r"^\s*usage:", re.IGNORECASE | re.MULTILINE)


def _usage_error(inv: Invocation) -> bool:
    return inv.exit_code in (2, 64) and bool(_USAGE.search(inv.stderr))


HOLDER_KEY = ("lock", "hold")  # the spec's lock.hold: its command, parked, a hook or hold.run


def _named(trial: Alone) -> str:
    return {"holder": "the holder's command (lock.hold)", "waiter": "lock.contender with its lock-wait option "
            "(lock.wait_option, lock.wait_env)"}.get(trial.command, f"lock.{trial.command}")


def lock_undecided(history: History) -> str | None:
    return next((p.message for p in problems(history) if p.workload == "lock" and not p.spec), None)
