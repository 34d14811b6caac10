"""Shared test helpers: lint a small project written into a temporary directory."""

from __future__ import annotations

import re
from pathlib import Path

import os

import pytest
from hypothesis import settings

from torchrepro_lint.config import load_config
from torchrepro_lint.pipeline.engine import lint_paths
from torchrepro_lint.findings import LintResult

# CI runs the suite once: the property tests draw the same examples every run, so a failure
# they could find only by chance cannot refuse a submission at random. To look for new
# counterexamples, run with TORCHREPRO_HYPOTHESIS=explore (random examples, as Hypothesis's default).
settings.register_profile("repeatable", derandomize=True, database=None)
settings.register_profile("explore", derandomize=False)
settings.load_profile("explore" if os.environ.get("TORCHREPRO_HYPOTHESIS") == "explore" else "repeatable")

MARK = re.compile(r"#\s*<--\s*((?:TRP\d{3}\s*,?\s*)+)")


def _toml_value(value) -> str:
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_toml_value(k)} = {_toml_value(v)}" for k, v in value.items()) + "}"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def write_project(root: Path, files: dict[str, str], config: dict | None = None) -> Path:
    lines = ["[project]", 'name = "fixture"', "", "[tool.torchrepro-lint]"]
    lines += [f"{key} = {_toml_value(value)}" for key, value in (config or {}).items()]
    (root / "pyproject.toml").write_text("\n".join(lines) + "\n", encoding="utf-8")
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


def lint_project(root: Path, files: dict[str, str], config: dict | None = None) -> LintResult:
    write_project(root, files, config)
    return lint_paths([root], load_config([root]))


def marked_lines(files: dict[str, str]) -> set[tuple[str, int, str]]:
    """{(file name, row, code)} for every `# <-- TRPxxx` marker."""
    marks = set()
    for name, text in files.items():
        for row, line in enumerate(text.splitlines(), start=1):
            match = MARK.search(line)
            if match:
                for code in re.findall(r"TRP\d{3}", match.group(1)):
                    marks.add((name, row, code))
    return marks


def reported(result: LintResult, root: Path, code: str | None = None) -> set[tuple[str, int, str]]:
    out = set()
    for finding in result.findings:
        if code is None or finding.code == code:
            name = Path(finding.path).resolve().relative_to(root.resolve()).as_posix()
            out.add((name, finding.row, finding.code))
    return out


@pytest.fixture
def lint(tmp_path):
    """lint({"train.py": "..."}, config={...}) -> LintResult for a project in tmp_path."""

    def run(files: dict[str, str] | str, config: dict | None = None) -> LintResult:
        if isinstance(files, str):
            files = {"example.py": files}
        return lint_project(tmp_path, files, config)

    run.root = tmp_path
    return run


def check_json(capsys, root: Path, *options: str):
    """`torchrepro-lint check --output-format json --statistics OPTIONS ROOT` in this process:
    (exit code, findings, statistics, stderr)."""
    import json

    from torchrepro_lint.cli import main

    code = main(["check", "--output-format", "json", "--statistics", *options, str(root)])
    out, err = capsys.readouterr()
    stats = json.loads(err.split("torchrepro-lint statistics: ", 1)[1].splitlines()[0])
    return code, json.loads(out), stats, err
