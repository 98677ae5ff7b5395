from clirace.cli import run

run()
