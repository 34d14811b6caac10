"""`path:row:col: CODE severity: message`, one per line, then a summary line.

In a notebook the position is `path:cell N:row:col`, with rows counted in the cell (as ruff does)."""

from __future__ import annotations

from collections import Counter

from torchrepro_lint.config import Config
from torchrepro_lint.findings import LintResult


def render_text(result: LintResult, *, quiet: bool = False, unsafe_fixes: bool = False, config: Config | None = None) -> str:
    lines = []
    for f in result.findings:
        marker = " [*]" if _fixable(f, unsafe_fixes) else ""
        lines.append(f"{f.location}: {f.code}{marker} {f.severity}: {f.message}")
    if not quiet:
        lines.append(summary(result, unsafe_fixes, config))
    return "\n".join(lines) + ("\n" if lines else "")


def _fixable(finding, unsafe_fixes: bool) -> bool:
    return finding.fix is not None and (finding.fix.applicability == "safe" or unsafe_fixes)


def summary(result: LintResult, unsafe_fixes: bool = False, config: Config | None = None) -> str:
    files = f"{result.files_checked} file{'s' if result.files_checked != 1 else ''}"
    if not result.findings:
        return f"No reproducibility hazards found in {files}."
    counts = Counter(str(f.severity) for f in result.findings)
    levels = ", ".join(f"{counts[level]} {level}{'s' if counts[level] != 1 else ''}" for level in ("error", "warning", "note") if counts[level])
    total = len(result.findings)
    line = f"Found {total} finding{'s' if total != 1 else ''} ({levels}) in {files}."
    fixable = sum(_fixable(f, unsafe_fixes) for f in result.findings)
    hidden = sum(f.fix is not None for f in result.findings) - fixable
    if fixable:
        line += f" [*] {fixable} fixable with --fix{' --unsafe-fixes' if unsafe_fixes else ''}."
    if hidden:
        line += f" {hidden} more with --unsafe-fixes."
    passing = sum(not config.fails(f.severity) for f in result.findings) if config is not None else 0
    if passing:
        line += f" {passing} below --fail-on {config.fail_on}: reported, not failing."
    return line
