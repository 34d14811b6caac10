"""Code actions for the findings under the cursor: the finding's own fix, "fix all safe fixes in
this file", and "add `# noqa: CODE`" on the line where the suppression is read.

Fixes are the ones `--fix` applies (fixes/apply.py): a safe fix is a `quickfix`, preferred; an
unsafe one (it changes behaviour: inserting a seed, say) is offered too, with "(unsafe)" in its
title. The fix-all action applies every safe fix of the file in one round, as one edit of the
whole buffer, with `apply_fixes`, which drops a fix whose result would not parse.
"""

from __future__ import annotations

from lsprotocol import types

from torchrepro_lint.findings import Edit, Finding
from torchrepro_lint.server.convert import physical_lines, text_edit, to_range
from torchrepro_lint.fixes.noqa import edit_for_row

FIX_ALL = "source.fixAll.torchrepro-lint"


def _wanted(kind: str, only: list[str] | None) -> bool:
    # LSP kinds are hierarchical: asking for "source.fixAll" includes "source.fixAll.torchrepro-lint".
    return not only or any(kind == k or kind.startswith(k + ".") for k in only)


def _overlaps(finding: Finding, first_row: int, last_row: int) -> bool:
    return finding.row <= last_row and max(finding.end_row, finding.row) >= first_row


def code_actions(
    uri: str,
    text: str,
    findings: list[Finding],
    rows: tuple[int, int],
    encoding: str,
    only: list[str] | None = None,
    diagnostics_for=None,
) -> list[types.CodeAction]:
    """The actions for the findings on 1-based `rows` (first, last) of the document `uri`.
    `diagnostics_for(finding)` gives the diagnostic an action resolves, if the caller wants it."""
    lines = physical_lines(text)
    actions: list[types.CodeAction] = []
    under_cursor = [f for f in findings if _overlaps(f, *rows)]
    if _wanted(types.CodeActionKind.QuickFix, only):
        for finding in under_cursor:
            diagnostics = [diagnostics_for(finding)] if diagnostics_for else None
            if finding.fix is not None and finding.fix.edits and finding.fix.cell is None:
                safe = finding.fix.applicability == "safe"
                title = f"{finding.fix.message} ({finding.code})" + ("" if safe else " (unsafe)")
                edits = [text_edit(lines, edit, encoding) for edit in finding.fix.edits]
                actions.append(
                    types.CodeAction(
                        title=title,
                        kind=types.CodeActionKind.QuickFix,
                        diagnostics=diagnostics,
                        is_preferred=safe,
                        edit=types.WorkspaceEdit(changes={uri: edits}),
                    )
                )
        for finding in under_cursor:
            edit = noqa_edit(text, finding.row, finding.code)
            if edit is not None:
                actions.append(
                    types.CodeAction(
                        title=f"Add `# noqa: {finding.code}`",
                        kind=types.CodeActionKind.QuickFix,
                        diagnostics=[diagnostics_for(finding)] if diagnostics_for else None,
                        edit=types.WorkspaceEdit(changes={uri: [text_edit(lines, edit, encoding)]}),
                    )
                )
    if _wanted(FIX_ALL, only):
        fixed = fix_all(text, findings)
        if fixed is not None:
            whole = to_range(lines, (1, 1), (len(lines), len(lines[-1]) + 1), encoding)
            actions.append(
                types.CodeAction(
                    title="Fix all safe torchrepro-lint findings",
                    kind=FIX_ALL,
                    edit=types.WorkspaceEdit(changes={uri: [types.TextEdit(range=whole, new_text=fixed)]}),
                )
            )
    return actions


def fix_all(text: str, findings: list[Finding]) -> str | None:
    """The text with every safe fix of its findings applied, or None when there is none."""
    from torchrepro_lint.fixes.apply import apply_fixes

    safe = [f for f in findings if f.fix is not None and f.fix.applicability == "safe" and f.fix.edits and f.fix.cell is None]
    if not safe:
        return None
    fixed, applied = apply_fixes(text, safe)
    return fixed if applied and fixed != text else None


def noqa_edit(text: str, row: int, code: str) -> Edit | None:
    """The edit that suppresses `code` on `row`, written as `check --add-noqa` writes it."""
    return edit_for_row(text, row, code)
