"""`path:row:col: CODE severity: message`, one per line, then a summary line."""

from __future__ import annotations

from collections import Counter

from torchrepro_lint.findings import LintResult


def render_text(result: LintResult, *, quiet: bool = False) -> str:
    lines = [f"{f.path}:{f.row}:{f.column}: {f.code} {f.severity}: {f.message}" for f in result.findings]
    if not quiet:
        lines.append(summary(result))
    return "\n".join(lines) + ("\n" if lines else "")


def summary(result: LintResult) -> str:
    files = f"{result.files_checked} file{'s' if result.files_checked != 1 else ''}"
    if not result.findings:
        return f"No reproducibility hazards found in {files}."
    counts = Counter(str(f.severity) for f in result.findings)
    levels = ", ".join(f"{counts[level]} {level}{'s' if counts[level] != 1 else ''}" for level in ("error", "warning", "note") if counts[level])
    total = len(result.findings)
    return f"Found {total} finding{'s' if total != 1 else ''} ({levels}) in {files}."
