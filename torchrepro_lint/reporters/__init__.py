"""Output formats. Each reporter turns a LintResult into text for stdout."""

from torchrepro_lint.reporters.json_format import render_json
from torchrepro_lint.reporters.text import render_text

REPORTERS = {"text": render_text, "json": render_json}

__all__ = ["REPORTERS", "render_json", "render_text"]
