"""Hover on a finding: the rule's summary, why it matters and how to fix it, from the rule's own
metadata (the same fields its generated page in rules/ is made of), and a link to that page."""

from __future__ import annotations

from lsprotocol import types

from torchrepro_lint import rule_url
from torchrepro_lint.findings import Finding


def rule_markdown(code: str) -> str | None:
    from torchrepro_lint.rules import rule_by_code  # (every rule and LibCST: not at the server's start)

    rule = rule_by_code(code)
    if rule is None:
        return None
    fix = rule.fix + (f" Fix safety: **{rule.fix_safety}**." if rule.fix_safety else "")
    return "\n\n".join(
        [
            f"**{rule.code}** `{rule.name}` ({rule.severity})",
            rule.summary,
            f"**Why it matters.** {rule.why}",
            f"**How to fix.** {fix}",
            f"Suppress with `# noqa: {rule.code}` on the reported line. [Rule page]({rule_url(rule.code)})",
        ]
    )


def covers(finding: Finding, row: int, column: int) -> bool:
    """Whether the 1-based (row, column) lies in the finding's range (its end included, so a
    zero-width TRP000 and the character just after a name still hover)."""
    start, end = (finding.row, finding.column), (finding.end_row, finding.end_column)
    return start <= (row, column) <= max(start, end)


def hover(findings: list[Finding], row: int, column: int) -> types.Hover | None:
    codes = list(dict.fromkeys(f.code for f in findings if covers(f, row, column)))
    parts = [text for text in (rule_markdown(code) for code in codes) if text]
    if not parts:
        return None
    return types.Hover(contents=types.MarkupContent(kind=types.MarkupKind.Markdown, value="\n\n---\n\n".join(parts)))
