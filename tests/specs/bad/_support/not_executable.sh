#!/bin/sh
# Deliberately not executable (mode 0644): program_not_executable.yaml points at it.
exit 0
