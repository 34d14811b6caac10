"""Which files to lint: walk the given paths, skipping hidden, virtualenv, build and excluded dirs."""

from __future__ import annotations

import os
import re
from fnmatch import translate
from functools import lru_cache
from pathlib import Path

from torchrepro_lint.config import Config

PYTHON_SUFFIXES = (".py", ".pyi")
LINTED_SUFFIXES = (*PYTHON_SUFFIXES, ".ipynb")  # notebooks: see notebooks.py


@lru_cache(maxsize=16)
def _matcher(patterns: tuple[str, ...]):
    """One regex for every exclude pattern (a pattern matches the relative path or any part)."""
    if not patterns:
        return None
    return re.compile("|".join(f"(?:{translate(p.rstrip('/'))})" for p in patterns))


def is_excluded(path: Path, config: Config, resolved: Path | None = None) -> bool:
    matcher = _matcher((*config.exclude, *config.extend_exclude))
    if matcher is None:
        return False
    try:
        relative = (resolved or path.resolve()).relative_to(config.root).as_posix()
    except ValueError:
        relative = path.as_posix()
    return bool(matcher.match(relative)) or any(matcher.match(part) for part in relative.split("/"))


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
                real = base.resolve()  # once per directory: resolving every file is the slow part
                subdirs[:] = sorted(
                    d for d in subdirs if not d.startswith(".") and not _is_virtualenv(base / d)
                    and not is_excluded(base / d, config, real / d)
                )
                for name in sorted(names):
                    path = base / name
                    if name.endswith(LINTED_SUFFIXES) and not is_excluded(path, config, real / name):
                        files[path] = None
    return sorted(files, key=lambda p: p.as_posix()), errors


def _is_virtualenv(directory: Path) -> bool:
    return (directory / "pyvenv.cfg").is_file()
