"""Stage 3, run: launching a target's processes and watching them: launch, sandboxes, safe file access, strace
observation and stops, the rendezvous, servers (services/), cgroups, the watchdog and cleanup.

May import: clirace.errors, clirace.history, clirace.spec.
"""
