"""Which project a file belongs to, as the flake8 plugin and the language server find it: the
nearest directory above it with a pyproject.toml or a VCS root. Imports nothing of the linter:
the language server asks it before it has imported the rest (server/app.py)."""

from __future__ import annotations

from pathlib import Path

VCS_MARKERS = (".git", ".hg", ".svn")


def find_project(path: Path) -> tuple[Path | None, Path | None]:
    """(root, pyproject.toml or None) of an absolute file path: the nearest directory above it
    that holds a pyproject.toml or is a VCS root; (None, None) when there is none."""
    for directory in path.parents:
        pyproject = directory / "pyproject.toml"
        if pyproject.is_file():
            return directory, pyproject
        if any((directory / marker).exists() for marker in VCS_MARKERS):
            return directory, None
    return None, None


def session_key(path: Path) -> Path:
    """The language server's key for the project of a file: its root, or the file alone."""
    root, _ = find_project(path)
    return root if root is not None else path
