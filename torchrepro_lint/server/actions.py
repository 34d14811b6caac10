"""Code actions for the findings under the cursor: the finding's own fix, "fix all safe fixes in
this file", and "add `# noqa: CODE`" on the line where the suppression is read.

Fixes are the ones `--fix` applies (fixes/apply.py): a safe fix is a `quickfix`, preferred; an
unsafe one (it changes behaviour: inserting a seed, say) is offered too, with "(unsafe)" in its
title. The fix-all action applies every safe fix of the file in one round, as one edit of the
whole buffer, with `apply_fixes`, which drops a fix whose result would not parse.

`code_actions` decides which actions there are; the edits come from the document: `PythonFile`
here, a notebook cell in notebook_sync.py (its edits are the CLI's notebook fixes).
"""

from __future__ import annotations

from typing import Protocol

from lsprotocol import types

from torchrepro_lint.findings import Edit, Finding
from torchrepro_lint.parsing.lines import line_texts
from torchrepro_lint.server.convert import text_edit, to_range

FIX_ALL = "source.fixAll.torchrepro-lint"


class EditableDocument(Protocol):
    """Where an action's edits go: each method gives None when there is nothing to do."""

    def fix_edit(self, finding: Finding) -> types.WorkspaceEdit | None: ...

    def noqa_edit(self, finding: Finding) -> types.WorkspaceEdit | None: ...

    def fix_all_edit(self, findings: list[Finding]) -> types.WorkspaceEdit | None: ...


class PythonFile:
    """A Python file's buffer: fix edits apply to it as they are."""

    def __init__(self, uri: str, text: str, encoding: str) -> None:
        self.uri, self.text, self.encoding = uri, text, encoding
        self.lines = line_texts(text)

    def fix_edit(self, finding: Finding) -> types.WorkspaceEdit | None:
        if finding.fix.cell is not None:
            return None
        return types.WorkspaceEdit(changes={self.uri: [text_edit(self.lines, e, self.encoding) for e in finding.fix.edits]})

    def noqa_edit(self, finding: Finding) -> types.WorkspaceEdit | None:
        edit = noqa_edit(self.text, finding.row, finding.code)
        if edit is None:
            return None
        return types.WorkspaceEdit(changes={self.uri: [text_edit(self.lines, edit, self.encoding)]})

    def fix_all_edit(self, findings: list[Finding]) -> types.WorkspaceEdit | None:
        fixed = fix_all(self.text, findings)
        if fixed is None:
            return None
        lines = self.lines
        whole = to_range(lines, (1, 1), (len(lines), len(lines[-1]) + 1), self.encoding)
        return types.WorkspaceEdit(changes={self.uri: [types.TextEdit(range=whole, new_text=fixed)]})


def _wanted(kind: str, only: list[str] | None) -> bool:
    # LSP kinds are hierarchical: asking for "source.fixAll" includes "source.fixAll.torchrepro-lint".
    return not only or any(kind == k or kind.startswith(k + ".") for k in only)


def _overlaps(finding: Finding, first_row: int, last_row: int) -> bool:
    return finding.row <= last_row and max(finding.end_row, finding.row) >= first_row


def code_actions(
    document: EditableDocument,
    findings: list[Finding],
    rows: tuple[int, int],
    only: list[str] | None = None,
    diagnostics_for=None,
) -> list[types.CodeAction]:
    """The actions for the findings on 1-based `rows` (first, last) of `document`, whose
    findings are `findings`. `diagnostics_for(finding)` gives the diagnostic an action
    resolves, if the caller wants it."""
    actions: list[types.CodeAction] = []
    under_cursor = [f for f in findings if _overlaps(f, *rows)]
    if _wanted(types.CodeActionKind.QuickFix, only):
        for finding in under_cursor:
            diagnostics = [diagnostics_for(finding)] if diagnostics_for else None
            edit = document.fix_edit(finding) if finding.fix is not None and finding.fix.edits else None
            if edit is not None:
                safe = finding.fix.applicability == "safe"
                title = f"{finding.fix.message} ({finding.code})" + ("" if safe else " (unsafe)")
                actions.append(
                    types.CodeAction(
                        title=title, kind=types.CodeActionKind.QuickFix, diagnostics=diagnostics, is_preferred=safe, edit=edit
                    )
                )
        for finding in under_cursor:
            edit = document.noqa_edit(finding)
            if edit is not None:
                actions.append(
                    types.CodeAction(
                        title=f"Add `# noqa: {finding.code}`",
                        kind=types.CodeActionKind.QuickFix,
                        diagnostics=[diagnostics_for(finding)] if diagnostics_for else None,
                        edit=edit,
                    )
                )
    if _wanted(FIX_ALL, only):
        edit = document.fix_all_edit(findings)
        if edit is not None:
            actions.append(types.CodeAction(title="Fix all safe torchrepro-lint findings", kind=FIX_ALL, edit=edit))
    return actions


def safe_fixes(findings: list[Finding]) -> list[Finding]:
    return [f for f in findings if f.fix is not None and f.fix.applicability == "safe" and f.fix.edits]


def fix_all(text: str, findings: list[Finding]) -> str | None:
    """The text with every safe fix of its findings applied, or None when there is none."""
    from torchrepro_lint.fixes.apply import apply_fixes

    safe = [f for f in safe_fixes(findings) if f.fix.cell is None]
    if not safe:
        return None
    fixed, applied = apply_fixes(text, safe)
    return fixed if applied and fixed != text else None


def noqa_edit(text: str, row: int, code: str) -> Edit | None:
    """The edit that suppresses `code` on `row`, written as `check --add-noqa` writes it."""
    from torchrepro_lint.fixes.noqa import edit_for_row  # (LibCST: not at the server's start)

    return edit_for_row(text, row, code)
