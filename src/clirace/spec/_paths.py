"""How a path is shown in every output and error message: relative to the working directory when both are in
the same tree (a spec found through [tool.clirace] from a subdirectory shows as ../clirace.yaml, as the user
would type it), absolute when the only ancestor they share is / (a spec in /tmp seen from a checkout)."""
from __future__ import annotations

import os


def shown_path(path) -> str:
    if not path:
        return ""
    absolute = os.path.abspath(path)
    try:
        cwd = os.getcwd()
    except OSError:  # the working directory was removed: nothing to be relative to
        return absolute
    if os.path.commonpath([absolute, cwd]) == os.sep:
        return absolute
    return os.path.relpath(absolute, cwd)
