"""Shared by the integration tests: the fixture project, and running tools as a user would."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

FIXTURE = Path(__file__).parent / "fixtures" / "project"
REPO = Path(__file__).resolve().parents[2]


def copy_project(destination: Path, config: str = "") -> Path:
    """The fixture project, with a pyproject.toml (so it is its own project, not this repo's)."""
    shutil.copytree(FIXTURE, destination, ignore=shutil.ignore_patterns("__pycache__"))
    (destination / "pyproject.toml").write_text(
        '[project]\nname = "fixture"\n\n[tool.torchrepro-lint]\n' + config, encoding="utf-8"
    )
    return destination


def run(args: list[str], cwd: Path, stdin: str | None = None, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(args, cwd=cwd, input=stdin, capture_output=True, text=True, encoding="utf-8", env=env)


FLAKE8_FORMAT = "%(path)s|%(row)d|%(col)d|%(code)s|%(text)s"


def flake8(cwd: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    # --isolated: no setup.cfg/tox.ini/.flake8 of the machine running the tests.
    return run([sys.executable, "-m", "flake8", "--isolated", f"--format={FLAKE8_FORMAT}", *args], cwd, stdin)


def flake8_findings(output: str) -> set[tuple[str, int, int, str, str]]:
    found = set()
    for line in output.splitlines():
        path, row, col, code, text = line.split("|", 4)
        found.add((Path(path).as_posix(), int(row), int(col), code, text))
    return found


def cli_findings(cwd: Path, *args: str) -> set[tuple[str, int, int, str, str]]:
    completed = run([sys.executable, "-m", "torchrepro_lint", "check", "--output-format", "json", *args], cwd)
    assert completed.returncode in (0, 1), completed.stderr
    return {
        (Path(item["filename"]).as_posix(), item["location"]["row"], item["location"]["column"], item["code"], item["message"])
        for item in json.loads(completed.stdout)
    }
