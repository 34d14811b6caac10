"""GitHub Actions workflow commands: each finding becomes an annotation on the pull request.

`::warning file=train.py,line=3,col=1,endLine=3,endColumn=9,title=TRP101 (missing-seed)::message`
Levels map error -> error, warning -> warning, note -> notice. A range over several lines gets
no col/endColumn (GitHub would misplace them). Values are escaped as the runner unescapes them.
In a notebook the annotation sits on the lines of the .ipynb file (its JSON) that store the
reported code, and the message starts with `cell N, line R:`.
"""

from __future__ import annotations

import os
from pathlib import Path

from torchrepro_lint.config import Config
from torchrepro_lint.findings import Finding, LintResult, Severity

COMMANDS = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.NOTE: "notice"}


def escape_data(text: str) -> str:
    """The message after `::`: %, CR and LF are encoded."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    """A `key=value` property: also `:` and `,`, which would end the value."""
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def _file(path: str) -> str:
    """Relative to the working directory (the checkout, in a workflow) where it can be."""
    candidate = Path(path)
    if candidate.is_absolute():
        try:
            return candidate.relative_to(Path(os.getcwd())).as_posix()
        except ValueError:
            return candidate.as_posix()
    return candidate.as_posix()


def annotation(finding: Finding) -> str:
    from torchrepro_lint.rules import rule_by_code

    rule = rule_by_code(finding.code)
    title = f"{finding.code} ({rule.name})" if rule is not None else finding.code
    message = finding.message
    if finding.cell is not None and finding.file_rows is not None:
        # A notebook: GitHub shows the .ipynb file's JSON, so point at the lines that store the
        # reported code (no columns: JSON quoting moves them) and say where it is in the cell.
        properties = [("file", _file(finding.path)), ("line", str(finding.file_rows[0])), ("endLine", str(finding.file_rows[1]))]
        message = f"cell {finding.cell}, line {finding.row}: {message}"
    else:
        properties = [("file", _file(finding.path)), ("line", str(finding.row))]
        if finding.end_row == finding.row:
            properties += [("col", str(finding.column)), ("endLine", str(finding.end_row)), ("endColumn", str(finding.end_column))]
        else:
            properties += [("endLine", str(finding.end_row))]
    properties.append(("title", title))
    rendered = ",".join(f"{key}={escape_property(value)}" for key, value in properties)
    return f"::{COMMANDS[Severity(finding.severity)]} {rendered}::{escape_data(message)}"


def render_github(result: LintResult, *, quiet: bool = False, unsafe_fixes: bool = False, config: Config | None = None) -> str:
    return "".join(annotation(f) + "\n" for f in result.findings)
