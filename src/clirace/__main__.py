from clirace.cli import main

main()
