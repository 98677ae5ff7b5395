"""How a path is shown in every output and error message: relative to the working directory when both are in
the same tree (a spec found through [tool.clirace] from a subdirectory shows as ../clirace.yaml, as the user
would type it), absolute when the deepest ancestor they share is / or a top-level folder such as /tmp or /home
(a spec in /tmp/x seen from a checkout in /tmp/y is not in the checkout's tree: ../x/spec.yaml would mislead)."""
from __future__ import annotations

import os


def shown_path(path: str | os.PathLike[str] | None) -> str:
    if not path:
        return ""
    absolute = os.path.abspath(path)
    try:
        cwd = os.getcwd()
    except OSError:  # the working directory was removed: nothing to be relative to
        return absolute
    if len(os.path.commonpath([absolute, cwd]).strip(os.sep).split(os.sep)) <= 1:  # "/" or "/tmp": no shared tree
        return absolute
    return os.path.relpath(absolute, cwd)
