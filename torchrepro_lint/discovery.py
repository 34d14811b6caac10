"""Which files to lint: walk the given paths, skipping hidden, virtualenv, build and excluded dirs."""

from __future__ import annotations

import os
from fnmatch import fnmatch
from pathlib import Path

from torchrepro_lint.config import Config

PYTHON_SUFFIXES = (".py", ".pyi")
LINTED_SUFFIXES = (*PYTHON_SUFFIXES, ".ipynb")  # notebooks: see notebooks.py


def is_excluded(path: Path, config: Config) -> bool:
    patterns = [*config.exclude, *config.extend_exclude]
    try:
        relative = path.resolve().relative_to(config.root).as_posix()
    except ValueError:
        relative = path.as_posix()
    parts = relative.split("/")
    for pattern in patterns:
        pattern = pattern.rstrip("/")
        if fnmatch(relative, pattern) or any(fnmatch(part, pattern) for part in parts):
            return True
    return False


def discover(paths: list[Path], config: Config, force_exclude: bool = False) -> tuple[list[Path], list[str]]:
    """(files to lint, sorted and unique; one error line per missing path)."""
    files: dict[Path, None] = {}
    errors: list[str] = []
    for given in paths:
        if not given.exists():
            errors.append(f"{given}: no such file or directory")
        elif given.is_file():
            # Files named explicitly are linted (as ruff does) unless --force-exclude.
            if not (force_exclude and is_excluded(given, config)):
                files[given] = None
        else:
            for directory, subdirs, names in os.walk(given):
                base = Path(directory)
                subdirs[:] = sorted(
                    d for d in subdirs if not d.startswith(".") and not _is_virtualenv(base / d)
                    and not is_excluded(base / d, config)
                )
                for name in sorted(names):
                    path = base / name
                    if name.endswith(LINTED_SUFFIXES) and not is_excluded(path, config):
                        files[path] = None
    return sorted(files, key=lambda p: p.as_posix()), errors


def _is_virtualenv(directory: Path) -> bool:
    return (directory / "pyvenv.cfg").is_file()
