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
    not_reported = (
        "Soft keywords used as names (`match = {\"case\": 1}`, a variable called `type`) parse fine; "
        "such a file is linted as usual.",
        "Syntax newer than the Python that runs torchrepro-lint (3.12's `type` aliases and generics "
        "`class Pipeline[T]:`, PEP 701 f-strings, 3.14's `except A, B:`; `match` under 3.9) is not "
        "an error: LibCST, whose grammar follows the newest Python, reads it, and the file is linted "
        "like any other. pre-commit builds its hook with the default `python3` and CI images lag "
        "behind the project's Python.",
    )
    where_reported = (
        "At the position the parser gives, with its message (`file does not parse: invalid syntax`): "
        "CPython's, where neither CPython nor LibCST accepts the code.",
        "In a notebook, each code cell is parsed on its own: a cell that does not parse is a TRP000 at "
        "that cell (`cell 4 does not parse (...)`).",
    )
    decisions = (
        "The verdict is the union of the two parsers, not a `target-version` setting: LibCST's "
        "native parser reads every Python version's syntax whatever version it is told, and no "
        "finding or fix depends on the version the project targets. What no Python accepts and "
        "LibCST lets through (over 200 nested parentheses, a string escape that does not decode) is "
        "still TRP000.",
        "Undecodable and unreadable files are not TRP000: they are reported as errors on stderr and "
        "make the run exit with status 2, because nothing about their content is known.",
        "A `.ipynb` file that is not valid JSON or not nbformat 4 is an error on stderr (exit status 2), "
        "not a TRP000.",
        "A notebook with a cell that does not parse is linted with that cell left out, so the other "
        "cells' hazards are still reported.",
    )
    reference = (
        ("Python's full grammar specification", "https://docs.python.org/3/reference/grammar.html"),
        ("SyntaxError", "https://docs.python.org/3/library/exceptions.html#SyntaxError"),
    )
    hazards = (
        Example(
            '''import torch

def train(:  # <-- TRP000
    pass
''',
            "A syntax error",
            fixed='''import torch

def train():
    pass
''',
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
