"""Findings as LSP diagnostics, and LSP positions back to ours.

Our rows and columns are 1-based and count code points; LSP's are 0-based and count code units
of the negotiated position encoding (UTF-16 unless the client offers another), so a column after
an emoji or a CJK character differs. Lines are split where Python (and LSP) split them: at
\\r\\n, \\r and \\n.
"""

from __future__ import annotations

import re
from pathlib import Path

from lsprotocol import types

from torchrepro_lint import rule_url
from torchrepro_lint.findings import Edit, Finding, Severity

SOURCE = "torchrepro-lint"
SEVERITIES = {
    Severity.ERROR: types.DiagnosticSeverity.Error,
    Severity.WARNING: types.DiagnosticSeverity.Warning,
    Severity.NOTE: types.DiagnosticSeverity.Information,
}
# "... at examples/demo/utils.py:14 ...": where a message quotes a line of another file.
_QUOTED = re.compile(r"(?P<path>[^\s`'\"(),]+\.py):(?P<row>\d+)")


def units(text: str, encoding: str) -> int:
    """Length of `text` in code units of a position encoding ("utf-16", "utf-8", "utf-32")."""
    if encoding == types.PositionEncodingKind.Utf32:
        return len(text)
    if encoding == types.PositionEncodingKind.Utf8:
        return len(text.encode("utf-8", "surrogatepass"))
    if text.isascii():
        return len(text)
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def to_position(lines: list[str], row: int, column: int, encoding: str) -> types.Position:
    """Our 1-based (row, column in code points) as an LSP position."""
    line = max(row - 1, 0)
    if line >= len(lines):
        return types.Position(line=len(lines), character=0)
    return types.Position(line=line, character=units(lines[line][: max(column - 1, 0)], encoding))


def from_position(lines: list[str], position: types.Position, encoding: str) -> tuple[int, int]:
    """An LSP position as our 1-based (row, column in code points)."""
    if position.line >= len(lines):
        return (len(lines) + 1, 1)
    line = lines[position.line]
    count = 0
    for index, character in enumerate(line):
        if count >= position.character:
            return (position.line + 1, index + 1)
        count += units(character, encoding)
    return (position.line + 1, len(line) + 1)


def to_range(lines: list[str], start: tuple[int, int], end: tuple[int, int], encoding: str) -> types.Range:
    return types.Range(start=to_position(lines, *start, encoding), end=to_position(lines, *end, encoding))


def text_edit(lines: list[str], edit: Edit, encoding: str) -> types.TextEdit:
    return types.TextEdit(range=to_range(lines, edit.start, edit.end, encoding), new_text=edit.content)


def diagnostic(finding: Finding, lines: list[str], encoding: str, cwd: Path, own: Path) -> types.Diagnostic:
    """`own`: the resolved path of the finding's file; `cwd`: what its display paths are relative to."""
    return types.Diagnostic(
        range=to_range(lines, (finding.row, finding.column), (finding.end_row, finding.end_column), encoding),
        severity=SEVERITIES[Severity(finding.severity)],
        code=finding.code,
        code_description=types.CodeDescription(href=rule_url(finding.code)),
        source=SOURCE,
        message=finding.message,
        related_information=_quoted(finding, cwd, own) or None,
    )


def _quoted(finding: Finding, cwd: Path, own: Path) -> list[types.DiagnosticRelatedInformation]:
    """The lines of other files that the message quotes, as related locations."""
    related = []
    for match in _QUOTED.finditer(finding.message):
        path = (cwd / match.group("path")).resolve()
        if path == own or not path.is_file():
            continue
        line = int(match.group("row")) - 1
        location = types.Location(
            uri=path.as_uri(), range=types.Range(start=types.Position(line, 0), end=types.Position(line, 0))
        )
        related.append(types.DiagnosticRelatedInformation(location=location, message=f"quoted by {finding.code}"))
    return related
