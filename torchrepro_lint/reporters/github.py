"""GitHub Actions workflow commands: each finding becomes an annotation on the pull request.

`::warning file=train.py,line=3,col=1,endLine=3,endColumn=9,title=TRP101 (missing-seed)::message`
Levels map error -> error, warning -> warning, note -> notice. A range over several lines gets
no col/endColumn (GitHub would misplace them). Values are escaped as the runner unescapes them.
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
    properties = [("file", _file(finding.path)), ("line", str(finding.row))]
    if finding.end_row == finding.row:
        properties += [("col", str(finding.column)), ("endLine", str(finding.end_row)), ("endColumn", str(finding.end_column))]
    else:
        properties += [("endLine", str(finding.end_row))]
    properties.append(("title", title))
    rendered = ",".join(f"{key}={escape_property(value)}" for key, value in properties)
    return f"::{COMMANDS[Severity(finding.severity)]} {rendered}::{escape_data(finding.message)}"


def render_github(result: LintResult, *, quiet: bool = False, unsafe_fixes: bool = False, config: Config | None = None) -> str:
    return "".join(annotation(f) + "\n" for f in result.findings)
