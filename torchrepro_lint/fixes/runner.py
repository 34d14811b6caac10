"""The fix loop: lint, apply the selected fixes in memory, re-lint until nothing changes, then
write changed files atomically. The whole project is re-linted each round because fixes in one
file change program facts in others (a seed added in train.py silences TRP102 there)."""

from __future__ import annotations

import difflib
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from torchrepro_lint import notebooks
from torchrepro_lint.config import Config
from torchrepro_lint.pipeline.discovery import discover
from torchrepro_lint.pipeline.engine import lint_sources
from torchrepro_lint.findings import Finding, LintResult
from torchrepro_lint.fixes import notebook_cells
from torchrepro_lint.fixes.apply import apply_fixes
from torchrepro_lint.pipeline.progress import NO_PROGRESS
from torchrepro_lint.parsing.source import SourceError, read_source

MAX_ROUNDS = 10


@dataclass
class FixOutcome:
    result: LintResult  # what remains after fixing
    originals: dict[Path, str] = field(default_factory=dict)
    fixed: dict[Path, str] = field(default_factory=dict)  # only files whose text changed
    applied: list[Finding] = field(default_factory=list)

    def diff(self) -> str:
        chunks = []
        for path, new in self.fixed.items():
            name = path.as_posix()
            chunks.extend(
                difflib.unified_diff(
                    self.originals[path].splitlines(keepends=True), new.splitlines(keepends=True), f"a/{name}", f"b/{name}"
                )
            )
        return "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in chunks)


def wanted(finding: Finding, unsafe: bool) -> bool:
    return finding.fix is not None and (finding.fix.applicability == "safe" or unsafe)


def fix_sources(
    sources: dict[Path, str], config: Config, unsafe: bool, errors: list[str] | None = None, progress=NO_PROGRESS
) -> FixOutcome:
    """Fix in memory. `sources` maps each path to its text; nothing is written here. `progress`
    (progress.py) shows each round's lint."""
    texts = dict(sources)
    applied: list[Finding] = []
    for _ in range(MAX_ROUNDS):
        result = lint_sources(list(texts.items()), config, errors, progress=progress)
        by_path: dict[str, list[Finding]] = {}
        for finding in result.findings:
            if wanted(finding, unsafe):
                by_path.setdefault(finding.path, []).append(finding)
        changed = False
        for path in texts:
            findings = by_path.get(path.as_posix())
            if not findings:
                continue
            apply = notebook_cells.apply_fixes if notebooks.is_notebook(path) else apply_fixes
            new, done = apply(texts[path], findings)
            if new != texts[path]:
                texts[path] = new
                applied.extend(done)
                changed = True
        if not changed:
            break
    else:
        result = lint_sources(list(texts.items()), config, errors, progress=progress)
    fixed = {path: text for path, text in texts.items() if text != sources[path]}
    return FixOutcome(result, dict(sources), fixed, applied)


def fix_paths(paths: list[Path], config: Config, unsafe: bool, force_exclude: bool = False, progress=NO_PROGRESS) -> FixOutcome:
    files, errors = discover(paths, config, force_exclude)
    sources: dict[Path, str] = {}
    for path in files:
        try:
            sources[path] = read_source(path)
        except SourceError as exc:
            errors.append(f"{path.as_posix()}: {exc}")
    outcome = fix_sources(sources, config, unsafe, errors, progress)
    return outcome


def write_atomically(path: Path, text: str, encoding: str = "utf-8") -> None:
    """Write via a temporary file in the same directory and rename over, keeping the mode:
    an interrupted run leaves either the old file or the new one, never half of each."""
    mode = path.stat().st_mode & 0o7777 if path.exists() else None
    descriptor, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(descriptor, "w", encoding=encoding, newline="") as handle:
            handle.write(text)
        if mode is not None:
            os.chmod(temporary, mode)
        os.replace(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.unlink(temporary)
        raise
