"""Stage 8, report: the Result rendered for a terminal, for machines (JSON) and for pull requests (Markdown)."""
from .jsonout import to_json
from .markdown import to_markdown
from .text import render_text

__all__ = ["to_json", "to_markdown", "render_text"]
