"""The pre-commit hooks: the manifest is valid, and `pre-commit try-repo` runs them for real.

The end-to-end test lets pre-commit do what it does for users: clone this repository (a snapshot
of the working tree, committed in a temporary git repository), build a virtualenv and pip-install
the package into it, then run the hook on a temporary project. That needs the package index.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from integration_support import REPO, run

MANIFEST = REPO / ".pre-commit-hooks.yaml"

try:
    import pre_commit  # noqa: F401

    HAVE_PRE_COMMIT = True
except ImportError:
    HAVE_PRE_COMMIT = False

needs_pre_commit = pytest.mark.skipif(
    not HAVE_PRE_COMMIT, reason="pre-commit is not installed (it is in the `test` extra for Python >= 3.11)"
)

UNSEEDED = 'import torch\n\nif __name__ == "__main__":\n    print(torch.rand(3))\n'
SEEDED = 'import torch\n\nif __name__ == "__main__":\n    torch.manual_seed(0)\n    print(torch.rand(3))\n'
# TRP201's fix (cudnn.benchmark = False under determinism) is safe, so the fix hook applies it.
BENCHMARK = (
    'import torch\n\nif __name__ == "__main__":\n    torch.manual_seed(0)\n'
    "    torch.use_deterministic_algorithms(True)\n    torch.backends.cudnn.benchmark = True\n    print(torch.rand(3))\n"
)


def git(cwd: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=test", "-c", "user.email=test@example.invalid", "-c", "commit.gpgsign=false", *args],
        cwd=cwd, check=True, capture_output=True,
    )


def test_manifest_declares_both_hooks():
    yaml = pytest.importorskip("yaml")
    hooks = {hook["id"]: hook for hook in yaml.safe_load(MANIFEST.read_text(encoding="utf-8"))}
    assert set(hooks) == {"torchrepro-lint", "torchrepro-lint-fix"}
    assert hooks["torchrepro-lint"]["entry"] == "torchrepro-lint check --force-exclude"
    assert hooks["torchrepro-lint-fix"]["entry"] == "torchrepro-lint check --fix --force-exclude"
    for hook in hooks.values():
        assert hook["language"] == "python"
        assert hook["types_or"] == ["python", "pyi", "jupyter"]
        assert hook["require_serial"] is True
        assert hook["minimum_pre_commit_version"] == "2.9.2"


def test_hook_entries_are_real_cli_options(tmp_path):
    # Every flag the hooks pass must exist: an unknown one would fail every user's commit.
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n", encoding="utf-8")
    (tmp_path / "ok.py").write_text(SEEDED, encoding="utf-8")
    for args in (["--force-exclude"], ["--fix", "--force-exclude"]):
        completed = run([sys.executable, "-m", "torchrepro_lint", "check", *args, "ok.py"], tmp_path)
        assert completed.returncode == 0, completed.stderr


@needs_pre_commit
def test_validate_manifest():
    completed = run([sys.executable, "-m", "pre_commit", "validate-manifest", str(MANIFEST)], REPO)
    assert completed.returncode == 0, completed.stdout + completed.stderr


@pytest.fixture(scope="module")
def hook_repo(tmp_path_factory) -> Path:
    """This repository as pre-commit would clone it: the working tree (tracked and new files), committed."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    snapshot = tmp_path_factory.mktemp("hook-repo")
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
        cwd=REPO, check=True, capture_output=True,
    ).stdout.decode().split("\0")
    for name in filter(None, listed):
        source = REPO / name
        if source.is_file():  # tracked files deleted in the working tree are listed too
            (snapshot / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, snapshot / name)
    git(snapshot, "init", "-q")
    git(snapshot, "add", "-A")
    git(snapshot, "commit", "-q", "-m", "snapshot")
    return snapshot


@pytest.fixture(scope="module")
def pre_commit_home(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("pre-commit-home")  # shared: the hook's virtualenv is built once


def try_repo(hook_repo: Path, home: Path, project: Path, hook: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PRE_COMMIT_HOME": str(home), "PRE_COMMIT_COLOR": "never"}
    env.pop("VIRTUAL_ENV", None)
    command = [sys.executable, "-m", "pre_commit", "try-repo", str(hook_repo), hook, "--all-files"]
    return run(command, project, env=env)


def target_project(path: Path, files: dict[str, str]) -> Path:
    path.mkdir()
    (path / "pyproject.toml").write_text('[project]\nname = "target"\n', encoding="utf-8")
    for name, text in files.items():
        (path / name).write_text(text, encoding="utf-8")
    git(path, "init", "-q")
    git(path, "add", "-A")
    return path


@needs_pre_commit
def test_try_repo_fails_on_a_hazard_and_passes_on_clean_code(hook_repo, pre_commit_home, tmp_path):
    bad = target_project(tmp_path / "bad", {"train.py": UNSEEDED})
    failed = try_repo(hook_repo, pre_commit_home, bad, "torchrepro-lint")
    assert failed.returncode == 1, failed.stdout + failed.stderr
    assert "torchrepro-lint" in failed.stdout and "Failed" in failed.stdout
    assert "train.py:3:1: TRP101" in failed.stdout

    good = target_project(tmp_path / "good", {"train.py": SEEDED})
    passed = try_repo(hook_repo, pre_commit_home, good, "torchrepro-lint")
    assert passed.returncode == 0, passed.stdout + passed.stderr
    assert "Passed" in passed.stdout


@needs_pre_commit
def test_try_repo_fix_hook_rewrites_the_file(hook_repo, pre_commit_home, tmp_path):
    project = target_project(tmp_path / "fix", {"train.py": BENCHMARK})
    completed = try_repo(hook_repo, pre_commit_home, project, "torchrepro-lint-fix")
    assert completed.returncode == 1, completed.stdout + completed.stderr  # files were modified
    assert "files were modified by this hook" in completed.stdout
    assert (project / "train.py").read_text(encoding="utf-8") == BENCHMARK.replace("benchmark = True", "benchmark = False")
    again = try_repo(hook_repo, pre_commit_home, project, "torchrepro-lint-fix")
    assert again.returncode == 0, again.stdout + again.stderr


@needs_pre_commit
def test_try_repo_lints_notebooks(hook_repo, pre_commit_home, tmp_path):
    # `types_or: [..., jupyter]`: pre-commit passes .ipynb files, linted cell by cell.
    import json

    cells = [
        {"cell_type": "markdown", "id": "a", "metadata": {}, "source": ["# Noise"]},
        {"cell_type": "code", "execution_count": None, "id": "b", "metadata": {}, "outputs": [],
         "source": ["import torch\n", "print(torch.rand(3))"]},
    ]
    notebook = json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}, indent=1) + "\n"
    project = target_project(tmp_path / "nb", {"explore.ipynb": notebook})
    failed = try_repo(hook_repo, pre_commit_home, project, "torchrepro-lint")
    assert failed.returncode == 1, failed.stdout + failed.stderr
    assert "explore.ipynb:cell 2:1:1: TRP101" in failed.stdout
