"""JSON in the shape of ruff's `--output-format json`, so tools that read ruff's can read ours."""

from __future__ import annotations

import json

from torchrepro_lint import rule_url
from torchrepro_lint.config import Config
from torchrepro_lint.findings import Finding, LintResult


def finding_to_dict(finding: Finding) -> dict:
    fix = None
    if finding.fix is not None:
        fix = {
            "applicability": finding.fix.applicability,
            "message": finding.fix.message,
            "edits": [
                {
                    "content": edit.content,
                    "location": {"row": edit.start[0], "column": edit.start[1]},
                    "end_location": {"row": edit.end[0], "column": edit.end[1]},
                    # notebooks: rows count in this cell, which may not be the finding's
                    **({"cell": finding.fix.cell} if finding.fix.cell is not None else {}),
                }
                for edit in finding.fix.edits
            ],
        }
    return {
        "cell": finding.cell,  # notebooks: rows, columns and edits count in this cell (ruff's field)
        "code": finding.code,
        "message": finding.message,
        "severity": str(finding.severity),
        "filename": finding.path,
        "location": {"row": finding.row, "column": finding.column},
        "end_location": {"row": finding.end_row, "column": finding.end_column},
        "fix": fix,
        "url": rule_url(finding.code),
        "noqa_row": finding.row,
    }


def render_json(result: LintResult, *, quiet: bool = False, unsafe_fixes: bool = False, config: Config | None = None) -> str:
    return json.dumps([finding_to_dict(f) for f in result.findings], indent=2) + "\n"
