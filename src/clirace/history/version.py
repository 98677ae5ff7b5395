"""clirace's version: one source, a leaf that imports nothing, so that any module can read it (the history
records it, the reports print it; pyproject.toml reads it from here)."""

__version__ = "0.1.0"
