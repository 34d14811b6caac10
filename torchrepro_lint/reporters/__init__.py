"""Output formats. Each reporter turns a LintResult into text: `reporter(result, *, quiet, config)`.

`config` is the run's configuration (its root and which rules are enabled), for formats that
describe the run as well as its findings (SARIF).
"""

from torchrepro_lint.reporters.github import render_github
from torchrepro_lint.reporters.json_format import render_json
from torchrepro_lint.reporters.sarif import render_sarif
from torchrepro_lint.reporters.text import render_text

REPORTERS = {"text": render_text, "json": render_json, "sarif": render_sarif, "github": render_github}

__all__ = ["REPORTERS", "render_github", "render_json", "render_sarif", "render_text"]
