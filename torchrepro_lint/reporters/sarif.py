"""SARIF 2.1.0, for GitHub code scanning and other SARIF viewers.

One run. The driver lists every enabled rule, in code order, with its documentation page as
help; each result points at its rule by `ruleIndex` and at its file by a URI relative to the
project root (`uriBaseId: %SRCROOT%`), so the file is the same wherever the run happened.
Nothing in the output depends on the machine or the time: no absolute paths, no timestamps.
Notebooks: a region cannot name a cell, so it covers the lines of the .ipynb file that store the
reported code, the message starts with `cell N, line R:`, and the result carries no fix.
"""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import quote

from torchrepro_lint import HOMEPAGE, __version__, rule_url
from torchrepro_lint.config import Config
from torchrepro_lint.findings import Edit, Finding, LintResult, Severity

SCHEMA_URI = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
SRCROOT = "%SRCROOT%"
LEVELS = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.NOTE: "note"}


def rule_descriptor(rule) -> dict:
    from torchrepro_lint.rules.pages import render_page

    page = render_page(rule)
    return {
        "id": rule.code,
        "name": rule.name,
        "shortDescription": {"text": rule.summary},
        "fullDescription": {"text": rule.why},
        "help": {"text": page, "markdown": page},
        "helpUri": rule_url(rule.code),
        "defaultConfiguration": {"level": LEVELS[Severity(rule.severity)]},
        "properties": {"tags": list(rule.tags), "precision": rule.precision},
    }


def artifact_location(path: str, root: Path) -> dict:
    """A URI relative to the project root, or an absolute file URI for a file outside it."""
    resolved = Path(path).resolve()
    try:
        relative = resolved.relative_to(root.resolve())
    except ValueError:
        return {"uri": resolved.as_uri()}
    return {"uri": quote(relative.as_posix(), safe="/"), "uriBaseId": SRCROOT}


def _region(start: tuple[int, int], end: tuple[int, int]) -> dict:
    """1-based lines and columns (in code points); the end column is the one after the region."""
    start_line, start_column = max(start[0], 1), max(start[1], 1)
    end_line, end_column = max(end[0], start_line), max(end[1], 1)
    if end_line == start_line:
        end_column = max(end_column, start_column)
    return {"startLine": start_line, "startColumn": start_column, "endLine": end_line, "endColumn": end_column}


def _replacement(edit: Edit) -> dict:
    return {"deletedRegion": _region(edit.start, edit.end), "insertedContent": {"text": edit.content}}


def result_object(finding: Finding, rule_index: int | None, root: Path) -> dict:
    location = artifact_location(finding.path, root)
    notebook = finding.cell is not None and finding.file_rows is not None
    if notebook:
        # Regions index the .ipynb file's JSON text, which has no cells: point at the lines that
        # store the reported code (whole lines: JSON quoting moves columns) and name the cell.
        region = {"startLine": finding.file_rows[0], "endLine": max(finding.file_rows)}
        message = f"cell {finding.cell}, line {finding.row}: {finding.message}"
    else:
        region = _region((finding.row, finding.column), (finding.end_row, finding.end_column))
        message = finding.message
    result = {
        "ruleId": finding.code,
        **({"ruleIndex": rule_index} if rule_index is not None else {}),
        "level": LEVELS[Severity(finding.severity)],
        "message": {"text": message},
        "locations": [{"physicalLocation": {"artifactLocation": location, "region": region}}],
    }
    if notebook:
        result["properties"] = {"cell": finding.cell, "cellLine": finding.row, "cellColumn": finding.column}
    elif finding.fix is not None and finding.fix.edits:  # a notebook's edits are in cells, not in the file
        result["fixes"] = [
            {
                "description": {"text": finding.fix.message or f"{finding.fix.applicability} fix"},
                "artifactChanges": [
                    {"artifactLocation": dict(location), "replacements": [_replacement(e) for e in finding.fix.edits]}
                ],
            }
        ]
    return result


def build_sarif(result: LintResult, config: Config | None = None) -> dict:
    from torchrepro_lint.pipeline.engine import enabled_rules
    from torchrepro_lint.rules import rule_by_code

    config = config if config is not None else Config(root=Path.cwd().resolve())
    rules = list(enabled_rules(config))
    index = {rule.code: i for i, rule in enumerate(rules)}
    for finding in result.findings:  # a finding of a rule not in the list (not expected): add the rule
        if finding.code not in index:
            rule = rule_by_code(finding.code)
            if rule is not None:
                index[finding.code] = len(rules)
                rules.append(rule)
    results = [result_object(f, index.get(f.code), config.root) for f in result.findings]
    driver = {
        "name": "torchrepro-lint",
        "version": __version__,
        "semanticVersion": __version__,
        "informationUri": HOMEPAGE,
        "rules": [rule_descriptor(rule) for rule in rules],
    }
    return {
        "$schema": SCHEMA_URI,
        "version": "2.1.0",
        "runs": [{"tool": {"driver": driver}, "columnKind": "unicodeCodePoints", "results": results}],
    }


def render_sarif(result: LintResult, *, quiet: bool = False, unsafe_fixes: bool = False, config: Config | None = None) -> str:
    return json.dumps(build_sarif(result, config), indent=2, ensure_ascii=False) + "\n"
