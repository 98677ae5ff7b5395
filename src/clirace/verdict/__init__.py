"""Stage 7, verdict: the verdicts scored against the rubric, the CI gate, a run compared with a baseline.

May import: clirace.errors, clirace.history, clirace.checks.
"""
