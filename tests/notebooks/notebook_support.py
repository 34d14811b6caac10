"""Notebooks for the tests, written as nbformat 4 writes them (or in other layouts on request)."""

from __future__ import annotations

import json
from pathlib import Path


def notebook(*cells, indent: int | None = 1, source_as_list: bool = True, language: str = "python", outputs=None) -> str:
    """The JSON text of a notebook. A cell is a string (a code cell) or (cell_type, source).

    `outputs` maps a cell's position (0-based) to its outputs, so tests can check they survive.
    """
    document = {
        "cells": [],
        "metadata": {
            "kernelspec": {"display_name": "Python 3", "language": language, "name": "python3"},
            "language_info": {"name": language, "version": "3.11.7"},
        },
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    for position, cell in enumerate(cells):
        kind, source = cell if isinstance(cell, tuple) else ("code", cell)
        entry = {"cell_type": kind, "id": f"cell-{position:02d}", "metadata": {}, "source": source.splitlines(True) if source_as_list else source}
        if kind == "code":
            entry["execution_count"] = position + 1
            entry["outputs"] = (outputs or {}).get(position, [])
        document["cells"].append(entry)
    return json.dumps(document, indent=indent, sort_keys=True, ensure_ascii=False) + "\n"


def write_notebook(path: Path, *cells, **options) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(notebook(*cells, **options), encoding="utf-8", newline="")
    return path


def write_pyproject(root: Path) -> None:
    (root / "pyproject.toml").write_text('[project]\nname = "fixture"\n\n[tool.torchrepro-lint]\n', encoding="utf-8")


def cell_sources(path: Path) -> list[str]:
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    return ["".join(c["source"]) if isinstance(c["source"], list) else c["source"] for c in cells]
