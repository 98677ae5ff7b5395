"""Where a kill landed, read from the kill log (checks.atomic_config.kill_landing): a SIGKILL ends the whole
thread group, and every thread writes `+++ killed by SIGKILL +++`; the call it landed on is the one the kill
cut short, in whichever thread made it, not the first thread strace reports killed."""
from clirace.checks.atomic_config import kill_landing
from clirace.history import KillPoint, WriterKilled

TEMP = "/sb/home/.config/t/.config.json.123"


def landing(log: str):
    return kill_landing(WriterKilled(point=KillPoint("write", 1, "write #1"), kill_log=log))


def test_the_thread_the_kill_cut_short_is_where_it_landed_though_other_threads_die_first():
    # A Go writer: its goroutine wrote from thread 61; the runtime's other threads are reported killed first.
    log = (f'61 write(7<{TEMP}>, "{{}}", 2 <unfinished ...>\n'
           "63 +++ killed by SIGKILL +++\n"
           "62 +++ killed by SIGKILL +++\n"
           "61 <... write resumed>)              = ?\n"
           "61 +++ killed by SIGKILL +++\n")
    assert landing(log)[:2] == ("write", (TEMP,))


def test_a_thread_whose_last_call_ended_is_not_where_the_kill_landed():
    log = ('70 write(5<pipe:[9]>, "*", 1) = 1\n'
           f'71 write(7<{TEMP}>, "{{}}", 2) = ?\n'
           "70 +++ killed by SIGKILL +++\n"
           "71 +++ killed by SIGKILL +++\n")
    assert landing(log)[:2] == ("write", (TEMP,))


def test_a_log_with_no_kill_says_so_and_one_with_no_call_is_unknown():
    assert landing('70 write(5<pipe:[9]>, "*", 1) = 1\n') is None
    assert landing("70 +++ killed by SIGKILL +++\n") == ("", (), 0)
