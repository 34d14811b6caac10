"""`check --add-noqa`: a `# noqa: CODES` comment on every reported line, written where the
linter reads it (SourceFile.is_suppressed: the finding's row, a physical line, or the last
line of the multi-line string that row is in), so the next run reports nothing. Each comment
is an Edit applied by the fix machinery, in Python files and notebook cells alike; an edit
that would change the code (a line that continues with a backslash) is left out and reported
instead."""

from __future__ import annotations

import ast
from dataclasses import dataclass, field, replace
from pathlib import Path

import libcst as cst

from torchrepro_lint import notebooks
from torchrepro_lint.findings import Edit, Finding, Fix
from torchrepro_lint.fixes import apply, notebook_cells
from torchrepro_lint.parsing.lines import physical_lines
from torchrepro_lint.parsing.positions import string_last_rows_of
from torchrepro_lint.parsing.source import (
    ALL_CODES, NOQA_COMMENT, UNSUPPRESSIBLE, newer_syntax, noqa_codes, string_last_rows, suppresses,
)


@dataclass
class NoqaOutcome:
    text: str  # the new text of the file (unchanged when nothing was added)
    added: list[Finding] = field(default_factory=list)  # findings now silenced by a new code
    left: list[Finding] = field(default_factory=list)  # findings no comment could be added for


def comment_edit(line: str, codes: list[str], row: int) -> Edit | None:
    """The edit that makes `line` (without its ending) silence every code in `codes`, or None
    when it does already. An existing `# noqa: X1` gets the missing codes appended (other tools'
    codes kept); otherwise `  # noqa: CODES` goes at the end of the line."""
    match = NOQA_COMMENT.search(line)
    existing = noqa_codes(match) if match else None
    if existing == ALL_CODES:
        return None  # a bare `# noqa` silences everything: kept as is
    missing = sorted({code for code in codes if not (existing and suppresses(code, existing))})
    if not missing:
        return None
    if match:
        end = match.end("codes") + 1
        return Edit(", " + ", ".join(missing), (row, end), (row, end))
    content = line.rstrip(" \t")
    return Edit(
        ("  " if content else "") + "# noqa: " + ", ".join(missing), (row, len(content) + 1), (row, len(line) + 1)
    )


def edit_for_row(text: str, row: int, code: str) -> Edit | None:
    """The comment that silences `code` on `row` of a Python `text` (the editor's "add noqa"
    action), or None where it is silenced already or no comment can be added without changing
    the code."""
    row = _string_last_rows(text).get(row, row)
    line = _line(physical_lines(text), row)
    if line is None or (row == 1 and line.startswith("#!")) or code in UNSUPPRESSIBLE:
        return None
    edit = comment_edit(line, [code], row)
    if edit is None or _code_of(apply.edit_text(text, edit)) != _code_of(text):
        return None
    return edit


def _line(text_lines: list[str], row: int) -> str | None:
    if not 1 <= row <= len(text_lines):
        return None
    return text_lines[row - 1].rstrip("\r\n")


def _code_of(text: str) -> str | None:
    """What a comment cannot change: the syntax tree (a `#` inside a string changes a constant;
    one after a backslash continuation does not parse). Of a text CPython refuses and LibCST
    reads (newer syntax than the running Python's), LibCST's code without its comments."""
    try:
        return ast.dump(ast.parse(text))
    except SyntaxError as error:
        tree = newer_syntax(text, error)
        return None if tree is None else tree.visit(_WithoutComments()).code
    except (ValueError, RecursionError, MemoryError):
        return None


def _string_last_rows(text: str) -> dict[int, int]:
    """source.string_last_rows; of a text CPython refuses and LibCST reads (newer syntax than the
    running Python's), from LibCST's tree, as SourceFile.is_suppressed reads it."""
    try:
        compile(text, "<noqa>", "exec", flags=ast.PyCF_ONLY_AST, dont_inherit=True)
    except SyntaxError as error:
        tree = newer_syntax(text, error)
        if tree is not None:
            return string_last_rows_of(tree)
    except (ValueError, RecursionError, MemoryError):
        pass
    return string_last_rows(text)


class _WithoutComments(cst.CSTTransformer):
    """Every comment left out, with the spaces before it (where a noqa comment goes)."""

    def leave_TrailingWhitespace(self, original, updated):
        return updated.with_changes(whitespace=cst.SimpleWhitespace(""), comment=None)

    def leave_EmptyLine(self, original, updated):
        return updated.with_changes(whitespace=cst.SimpleWhitespace(""), comment=None)


def _plan(text: str, findings: list[Finding]) -> tuple[list[Finding], list[Finding]]:
    """(one carrier finding per comment row, whose fix is that row's comment; findings left out).

    A finding's comment goes on its row, or on the last row of the multi-line string its row
    is part of: where SourceFile.is_suppressed reads it. The carrier has the comment's row."""
    lines = physical_lines(text)
    last_rows = _string_last_rows(text) if "\n" in text else {}
    by_row: dict[int, list[Finding]] = {}
    left = []
    for finding in findings:
        if finding.code in UNSUPPRESSIBLE or _line(lines, finding.row) is None:
            left.append(finding)
        else:
            by_row.setdefault(last_rows.get(finding.row, finding.row), []).append(finding)
    carriers = []
    for row, group in sorted(by_row.items()):
        line = _line(lines, row)
        if row == 1 and line.startswith("#!"):
            left.extend(group)  # a comment after a shebang would become the interpreter's arguments
            continue
        edit = comment_edit(line, [f.code for f in group], row)
        if edit is not None:
            fix = Fix("safe", "add noqa", (edit,), cell=group[0].cell)
            carriers.append(replace(group[0], fix=fix, row=row, code="+".join(sorted({f.code for f in group}))))
    return carriers, left


def _applied(text: str, carriers: list[Finding], keeps_code) -> tuple[str, list[Finding]]:
    """All the comments when the code stays the same with all of them (one parse), else those
    that keep it, one at a time."""
    everything, _ = apply.apply_fixes(text, carriers, accept=lambda candidate: True)
    if keeps_code(everything):
        return everything, carriers
    return apply.apply_fixes(text, carriers, accept=keeps_code)


def _outcome(findings: list[Finding], carriers: list[Finding], done: list[Finding], left: list[Finding], texts):
    """Which findings a comment now silences; `texts(cell)` is the text the finding's rows count in."""
    done_rows = {(c.cell, c.row) for c in done}
    outcome = NoqaOutcome("", left=list(left))
    planned_rows = {(c.cell, c.row) for c in carriers}
    last_rows = {}
    for finding in findings:
        if finding in left:
            continue
        if finding.cell not in last_rows:
            last_rows[finding.cell] = _string_last_rows(texts(finding.cell))
        key = (finding.cell, last_rows[finding.cell].get(finding.row, finding.row))
        if key in done_rows:
            outcome.added.append(finding)
        elif key in planned_rows:
            outcome.left.append(finding)
    return outcome


def add_to_text(text: str, findings: list[Finding]) -> NoqaOutcome:
    """Comments for `findings` (all in this Python file's `text`)."""
    carriers, left = _plan(text, findings)
    if not carriers:
        return NoqaOutcome(text, left=left)
    original = _code_of(text)
    new, done = _applied(text, carriers, lambda candidate: _code_of(candidate) == original)
    return replace(_outcome(findings, carriers, done, left, lambda cell: text), text=new)


def add_to_notebook(text: str, findings: list[Finding]) -> NoqaOutcome:
    """Comments for `findings` (cell-relative, see notebooks.to_cells) in the notebook's JSON
    `text`; each cell is written back as --fix writes it (notebook_cells.apply_fixes)."""
    sources = notebook_cells.cell_sources(text)
    carriers, left = [], []
    by_cell: dict[int, list[Finding]] = {}
    for finding in findings:
        if finding.cell in sources:
            by_cell.setdefault(finding.cell, []).append(finding)
        else:
            left.append(finding)  # not in a code cell (not expected)
    for cell, group in by_cell.items():
        planned, unplanned = _plan(sources[cell], group)
        carriers += planned
        left += unplanned
    if not carriers:
        return NoqaOutcome(text, left=left)

    def keeps_code(before: str, after: str) -> bool:
        return _code_of(notebooks.mask(after)[0]) == _code_of(notebooks.mask(before)[0])

    new, done = notebook_cells.apply_fixes(text, carriers, keep=keeps_code)
    return replace(_outcome(findings, carriers, done, left, sources.__getitem__), text=new)


def add_noqa(path: Path, text: str, findings: list[Finding]) -> NoqaOutcome:
    if notebooks.is_notebook(path):
        return add_to_notebook(text, findings)
    return add_to_text(text, findings)
