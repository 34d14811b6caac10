from __future__ import annotations

from torchrepro_lint.findings import Severity
from torchrepro_lint.rules.base import Example, Rule


class ParseError(Rule):
    """Emitted by the engine itself when LibCST cannot parse a file; this class is its documentation."""

    code = "TRP000"
    name = "parse-error"
    summary = "A file that does not parse as Python."
    why = (
        "A file that does not parse cannot be checked, so every hazard in it would go unreported. "
        "The finding carries the parser's message and position; the other files are still linted."
    )
    severity = Severity.ERROR
    fix = "Fix the syntax error (or exclude the file, e.g. a template, with `extend-exclude`)."
    decisions = (
        "Undecodable and unreadable files are not TRP000: they are reported as errors on stderr "
        "and make the run exit with status 2, because nothing about their content is known. "
        "In a notebook, each code cell is parsed on its own first: a cell that does not parse is "
        "a TRP000 at that cell (`cell 4 does not parse (...)`), and the notebook is linted with "
        "that cell left out, so the other cells' hazards are still reported. A `.ipynb` file that "
        "is not valid JSON or not nbformat 4 is an error on stderr (exit status 2)."
    )
    hazards = (
        Example(
            '''import torch

def train(:  # <-- TRP000
    pass
''',
            "A syntax error",
        ),
    )
    traps = (
        Example(
            '''match = {"case": 1}
print(match["case"])
''',
            "Soft keywords used as names parse fine",
        ),
    )
