"""The lint pipeline: discover, read, parse once, build the project model, run rules, filter."""

from __future__ import annotations

import traceback
from dataclasses import dataclass
from fnmatch import fnmatch
from pathlib import Path

from torchrepro_lint import notebooks
from torchrepro_lint.config import Config
from torchrepro_lint.context import LintContext
from torchrepro_lint.discovery import discover
from torchrepro_lint.findings import Finding, LintResult, Severity
from torchrepro_lint.project.index import ProjectIndex
from torchrepro_lint.project.known_apis import Helper
from torchrepro_lint.project.programs import find_programs
from torchrepro_lint.rules import Rule, all_rules
from torchrepro_lint.source import ParseFailure, SourceError, SourceFile, read_source

PARSE_ERROR = "TRP000"


@dataclass
class Selection:
    """Which codes are on: prefixes, the most specific match wins, `ignore` wins ties."""

    select: list[str] | None
    extend_select: list[str]
    ignore: list[str]

    def enabled(self, code: str, default_on: bool) -> bool:
        def specificity(prefixes: list[str]) -> int:
            lengths = [0 if p == "ALL" else len(p) for p in prefixes if p == "ALL" or code.startswith(p)]
            return max(lengths, default=-1)

        if self.select is None:
            chosen = 0 if default_on else -1  # the default set is as general as "ALL"
        else:
            chosen = specificity(self.select)
        chosen = max(chosen, specificity(self.extend_select))
        return chosen >= 0 and specificity(self.ignore) < chosen


def selection_from(config: Config) -> Selection:
    return Selection(
        [c.upper() for c in config.select] if config.select is not None else None,
        [c.upper() for c in config.extend_select],
        [c.upper() for c in config.ignore],
    )


def enabled_rules(config: Config) -> list[Rule]:
    selection = selection_from(config)
    return [rule for rule in all_rules() if selection.enabled(rule.code, rule.default_enabled)]


def _config_helpers(config: Config) -> dict[str, Helper]:
    helpers = {name: Helper() for name in config.seed_functions}
    for name in config.deterministic_functions:
        helpers[name] = Helper(seeds=helpers[name].seeds if name in helpers else (), claims_when="always", enables_det_mode=True)
    return helpers


def lint_paths(paths: list[Path], config: Config, *, force_exclude: bool = False) -> LintResult:
    files, errors = discover(paths, config, force_exclude)
    return lint_sources(((path, None) for path in files), config, errors)


def lint_sources(sources, config: Config, errors: list[str] | None = None, *, make_index=ProjectIndex) -> LintResult:
    """Lint (path, text-or-None) pairs; None means read the file from disk.

    `make_index(root, helpers)` builds the empty ProjectIndex to fill: an integration that lints
    one file at a time passes one that reuses modules it parsed before.
    """
    result = LintResult(errors=list(errors or []))
    project = make_index(config.root, _config_helpers(config))
    parse_failures: list[Finding] = []
    cell_maps: dict[str, notebooks.CellMap] = {}  # notebooks: module rows -> cells, by display path
    for path, text in sources:
        result.files_checked += 1
        try:
            source = load_source(path, text)
            if isinstance(source, notebooks.NotebookSource):
                cell_maps[path.as_posix()] = source.cells
                parse_failures.extend(_parse_error(path, failure) for failure in source.cells.broken)
            project.add(source)
        except SourceError as exc:
            result.errors.append(f"{path.as_posix()}: {exc}")
        except RecursionError:
            parse_failures.append(_parse_error(path, ParseFailure("file is too deeply nested to analyse")))
        except ParseFailure as exc:
            parse_failures.append(_parse_error(path, exc))

    rules = enabled_rules(config)
    selection = selection_from(config)
    findings: list[Finding] = [f for f in parse_failures if selection.enabled(PARSE_ERROR, True)]
    context = LintContext(project, find_programs(project, config.console_scripts), config)
    for rule in rules:
        try:
            findings.extend(f for f in rule.check_programs(context) if f is not None)
        except Exception:  # a rule bug must not hide every other finding
            result.errors.append(f"internal error in {rule.code}: {_last_line(traceback.format_exc())}")
        for module in project.linted_modules:
            if not rule.may_fire_in(module.source.text):
                continue
            try:
                findings.extend(f for f in rule.check_module(module, context) if f is not None)
            except Exception:
                result.errors.append(
                    f"{module.source.path.as_posix()}: internal error in {rule.code}: {_last_line(traceback.format_exc())}"
                )
    result.findings = notebooks.to_cells(_filtered(findings, project, config), cell_maps)
    return result


def load_source(path: Path, text: str | None) -> SourceFile:
    """The source to index for `path` (`text`, or read from disk): a notebook becomes its code
    cells as one module (notebooks.py). Raises SourceError for an unreadable or malformed file."""
    if notebooks.is_notebook(path):
        return notebooks.load_source(path, text)
    return SourceFile(path, text if text is not None else read_source(path))


def _parse_error(path: Path, failure: ParseFailure) -> Finding:
    row, column = failure.row, failure.column
    return Finding(PARSE_ERROR, failure.message, Severity.ERROR, path.as_posix(), row, column, row, column)


def _filtered(findings: list[Finding], project: ProjectIndex, config: Config) -> list[Finding]:
    sources = {m.source.path.as_posix(): m.source for m in project.modules.values()}
    unique: dict[tuple, Finding] = {}
    for finding in findings:
        key = (finding.code, finding.path, finding.row, finding.column)
        if key in unique:
            continue  # a statement reached by several programs is reported once
        source = sources.get(finding.path)
        if source is not None and source.is_suppressed(finding.code, finding.row):
            continue
        if _per_file_ignored(finding, config):
            continue
        unique[key] = finding
    return sorted(unique.values(), key=lambda f: f.sort_key)


def _per_file_ignored(finding: Finding, config: Config) -> bool:
    if not config.per_file_ignores:
        return False
    try:
        relative = Path(finding.path).resolve().relative_to(config.root).as_posix()
    except ValueError:
        relative = finding.path
    for pattern, codes in config.per_file_ignores.items():
        if fnmatch(relative, pattern) or fnmatch(Path(relative).name, pattern):
            if any(c.upper() == "ALL" or finding.code.startswith(c.upper()) for c in codes):
                return True
    return False


def _last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else "unknown error"
