"""Notebooks through LSP notebook document sync (LSP 3.17: `notebookDocument/didOpen`,
`didChange`, `didSave`, `didClose`). pygls keeps each notebook document and its cells' text
(its Workspace applies the notifications); this module turns them into what the linter reads
and maps the findings back to the cells. No pygls here: app.py hands over the cells.

A notebook is linted exactly as `check` lints its .ipynb file: the cells become nbformat 4 JSON,
which the session lints in place of the file, as it does a .py buffer, so notebooks.py masks and
joins the code cells, and reports a cell that does not parse as a TRP000 at that cell while the
rest is linted. While the code cells are those of the file on disk, the file's own text is used:
the analysis is then the CLI's exactly, and cell numbers count every cell of the file.

Cells as the editor sends them: a code cell in Python is linted; a markup cell is a markdown
cell, and a code cell in another language a raw one (both kept so that cell numbers in
messages count as Jupyter's do). A finding carries the number of the cell it is in
(notebooks.to_cells: rows and columns already count in that cell); `OpenNotebook.numbers`
maps that number to the cell's URI, where its diagnostic goes.

Edits are the CLI's notebook edits (notebook_cells.apply_fixes, noqa.add_to_notebook) applied to
the JSON text: each cell whose source changed gets one text edit, the part that changed. A fix
whose edits would span cells has none (notebooks.to_cells drops it), so none is offered.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from lsprotocol import types

from torchrepro_lint.findings import Finding
from torchrepro_lint.parsing.lines import line_texts
from torchrepro_lint.parsing.source import SourceError, read_source
from torchrepro_lint.server.actions import safe_fixes
from torchrepro_lint.server.convert import to_position

CODE, MARKDOWN, RAW = "code", "markdown", "raw"  # nbformat's cell types

# What the server asks the editor to sync: Jupyter notebooks, their Python cells (what is
# linted) and their markdown cells (so that cells are numbered as Jupyter numbers them).
SYNC_OPTIONS = types.NotebookDocumentSyncOptions(
    notebook_selector=[
        types.NotebookDocumentFilterWithNotebook(
            notebook=types.NotebookDocumentFilterNotebookType(notebook_type="jupyter-notebook"),
            cells=[types.NotebookCellLanguage(language="python"), types.NotebookCellLanguage(language="markdown")],
        )
    ],
    save=True,
)


@dataclass(frozen=True)
class Cell:
    uri: str
    kind: str  # CODE (Python: linted), MARKDOWN or RAW
    text: str
    version: int | None = None


def cell_kind(kind: types.NotebookCellKind, language: str | None) -> str:
    if kind == types.NotebookCellKind.Markup:
        return MARKDOWN
    return CODE if (language or "").lower() == "python" else RAW


def notebook_json(cells: list[Cell]) -> str:
    """The cells as an nbformat 4 notebook (no outputs, no metadata: a Python notebook)."""
    entries = []
    for cell in cells:
        entry = {"cell_type": cell.kind, "metadata": {}, "source": cell.text}
        if cell.kind == CODE:
            entry.update(execution_count=None, outputs=[])
        entries.append(entry)
    return json.dumps({"cells": entries, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}, indent=1) + "\n"


@dataclass
class OpenNotebook:
    """One notebook open in the editor, as the session lints it."""

    uri: str
    path: Path  # resolved
    cells: list[Cell]  # in notebook order
    text: str  # the .ipynb JSON text the session lints in place of the file
    numbers: dict[str, int]  # code cell URI -> its number in `text` (what Finding.cell counts)
    _by_number: dict[int, Cell] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        by_uri = {cell.uri: cell for cell in self.cells}
        self._by_number = {number: by_uri[uri] for uri, number in self.numbers.items()}

    @property
    def code_cells(self) -> list[Cell]:
        return [cell for cell in self.cells if cell.uri in self.numbers]

    def cell(self, uri: str) -> Cell | None:
        return next((cell for cell in self.cells if cell.uri == uri), None)

    def numbered(self, number: int) -> Cell | None:
        return self._by_number.get(number)

    def findings_in(self, cell: Cell, findings: list[Finding]) -> list[Finding]:
        number = self.numbers.get(cell.uri)
        return [f for f in findings if number is not None and f.cell == number]


def _code_sources(text: str) -> list[tuple[int, str]] | None:
    """(number, source as the linter reads it) of each code cell of a notebook's JSON text."""
    from torchrepro_lint.fixes import notebook_cells  # (LibCST: imported when a notebook opens, not at start)

    try:
        return list(notebook_cells.cell_sources(text).items())
    except SourceError:
        return None


class OpenNotebooks:
    """The notebooks open in the editor, by resolved path."""

    def __init__(self) -> None:
        self.by_path: dict[Path, OpenNotebook] = {}
        self._disk: dict[Path, tuple] = {}  # path -> (stat, text, its code cells)

    def get(self, path: Path | None) -> OpenNotebook | None:
        return self.by_path.get(path) if path is not None else None

    def holding(self, cell_uri: str) -> tuple[OpenNotebook, Cell] | None:
        for notebook in self.by_path.values():
            cell = notebook.cell(cell_uri)
            if cell is not None:
                return notebook, cell
        return None

    def update(self, uri: str, path: Path, cells: list[Cell]) -> tuple[OpenNotebook, list[str]]:
        """The notebook with these cells, and the URIs of code cells it no longer has."""
        built = notebook_json(cells)
        code = [cell for cell in cells if cell.kind == CODE]
        text, numbers = built, {cell.uri: number for number, cell in enumerate(cells, start=1) if cell.kind == CODE}
        disk = self._disk_notebook(path)
        if disk is not None and [source for _, source in disk[1]] == [source for _, source in _code_sources(built)]:
            text, numbers = disk[0], {cell.uri: number for cell, (number, _) in zip(code, disk[1])}
        before = self.by_path.get(path)
        notebook = self.by_path[path] = OpenNotebook(uri, path, cells, text, numbers)
        gone = [uri for uri in (before.numbers if before is not None else ()) if uri not in numbers]
        return notebook, gone

    def close(self, path: Path) -> OpenNotebook | None:
        self._disk.pop(path, None)
        return self.by_path.pop(path, None)

    def _disk_notebook(self, path: Path) -> tuple[str, list[tuple[int, str]]] | None:
        """The file's text and code cells, read again only when it changed."""
        try:
            info = os.stat(path)
        except OSError:
            return None
        stat = (info.st_mtime_ns, info.st_size)
        cached = self._disk.get(path)
        if cached is None or cached[0] != stat:
            try:
                text = read_source(path)
            except SourceError:
                text = None
            sources = _code_sources(text) if text is not None else None
            cached = self._disk[path] = (stat, text, sources)
        return None if cached[2] is None else (cached[1], cached[2])


# -- edits -------------------------------------------------------------------------------------
class CellEdits:
    """A cell's actions' edits (actions.EditableDocument): the CLI's notebook edits, as text
    edits of the cells whose source they change."""

    def __init__(self, notebook: OpenNotebook, cell: Cell, encoding: str) -> None:
        from torchrepro_lint.fixes import notebook_cells  # (LibCST: not at the server's start)
        from torchrepro_lint.fixes.noqa import add_to_notebook

        self.notebook, self.cell, self.encoding = notebook, cell, encoding
        self._cells, self._add_noqa = notebook_cells, add_to_notebook

    def fix_edit(self, finding: Finding) -> types.WorkspaceEdit | None:
        if finding.fix.cell is None:
            return None
        fixed, applied = self._cells.apply_fixes(self.notebook.text, [finding])
        return self._changes(fixed) if applied else None

    def noqa_edit(self, finding: Finding) -> types.WorkspaceEdit | None:
        outcome = self._add_noqa(self.notebook.text, [finding])
        return self._changes(outcome.text) if outcome.added else None

    def fix_all_edit(self, findings: list[Finding]) -> types.WorkspaceEdit | None:
        """Every safe fix of this cell's findings whose edits are in this cell."""
        number = self.notebook.numbers.get(self.cell.uri)
        safe = [f for f in safe_fixes(findings) if f.fix.cell == number]
        if not safe:
            return None
        fixed, applied = self._cells.apply_fixes(self.notebook.text, safe)
        return self._changes(fixed) if applied else None

    def _changes(self, fixed: str) -> types.WorkspaceEdit | None:
        before, after = self._cells.cell_sources(self.notebook.text), self._cells.cell_sources(fixed)
        changes: dict[str, list[types.TextEdit]] = {}
        for number, source in after.items():
            if source == before.get(number):
                continue
            cell = self.notebook.numbered(number)
            if cell is None:
                return None  # a cell the editor did not send: no edit can reach it
            changes[cell.uri] = [replacement(cell.text, _as_cell_text(source, cell.text), self.encoding)]
        return types.WorkspaceEdit(changes=changes) if changes else None


def _as_cell_text(source: str, old: str) -> str:
    """A source as the linter reads it (ending with a newline) back in the cell's own form."""
    if not old.endswith(("\n", "\r")) and source.endswith("\n"):
        return source[:-1]
    return source


def replacement(old: str, new: str, encoding: str) -> types.TextEdit:
    """One edit that turns `old` into `new`: the part between their common start and end."""
    limit = min(len(old), len(new))
    start = 0
    while start < limit and old[start] == new[start]:
        start += 1
    end = 0
    while end < limit - start and old[-1 - end] == new[-1 - end]:
        end += 1
    old_end = len(old) - end
    # A position never falls between \r and \n (they are one line break).
    if 0 < start < len(old) and old[start - 1] == "\r" and old[start] == "\n":
        start -= 1
    if 0 < old_end < len(old) and old[old_end - 1] == "\r" and old[old_end] == "\n":
        end, old_end = end - 1, old_end + 1
    lines = line_texts(old)
    span = types.Range(start=_position(old, start, lines, encoding), end=_position(old, old_end, lines, encoding))
    return types.TextEdit(range=span, new_text=new[start : len(new) - end])


def _position(text: str, offset: int, lines: list[str], encoding: str) -> types.Position:
    before = line_texts(text[:offset])
    return to_position(lines, len(before), len(before[-1]) + 1, encoding)
