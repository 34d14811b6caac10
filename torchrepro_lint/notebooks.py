"""Jupyter notebooks (`.ipynb`, nbformat 4) linted as the program they are: code cells, top to bottom.

The seam with the rest of the linter is small:

- `load_source(path, text)` turns a notebook into a `NotebookSource`: a SourceFile whose text is
  the code cells joined in notebook order (one module), with IPython syntax masked line for line,
  and whose `cells` (a CellMap) says which rows came from which cell. Markdown and raw cells are
  left out; a cell that does not parse on its own is blanked and listed in `cells.broken`.
- `to_cells(findings, cell_maps)` rewrites positions (and `file.ipynb:12` references in messages)
  from rows of that module to rows of a cell, as ruff does: `Finding.cell` is the cell's number,
  1-based over all cells as Jupyter lists them (markdown included), and rows count from the
  cell's first line.
- fixes go back into the file's JSON text through `parse_notebook`, which says where each cell's
  `source` value is (fixes/notebook_cells.py writes them).

Masking, line for line so that rows and (but for `%time`) columns do not move:

- a whole-cell magic (`%%bash`, `%%writefile`, `%%html`, ...) blanks the cell: it is not Python;
  `%%time`, `%%timeit`, `%%capture`, `%%prun`, `%%memit` run their body as Python, so only their
  first line is masked;
- line magics, shell escapes and help (`%matplotlib inline`, `!pip install x`, `files = !ls`,
  `?torch.manual_seed`, `torch.manual_seed??`) become a comment of the same length (`#matplotlib
  inline`) at the top level, or `pass` / `0` inside a block, where a comment would leave it empty;
- `%time stmt` and `%timeit stmt` keep `stmt` (it runs), moved left over the magic: findings on
  that line get their columns moved back.

Only lines that start a statement are looked at: a `% 3` continuing a bracketed expression, or a
line of a triple-quoted string, is Python. Nothing here imports Jupyter.
"""

from __future__ import annotations

import ast
import bisect
import json
import re
import warnings
from dataclasses import dataclass, field, replace
from functools import cached_property
from json.decoder import scanstring
from pathlib import Path

from torchrepro_lint.findings import Edit, Finding, Fix
from torchrepro_lint.parsing.source import ParseFailure, SourceError, SourceFile, newer_syntax, read_source

NOTEBOOK_SUFFIX = ".ipynb"

# Cell magics whose body IPython runs as Python in the kernel; any other cell magic is not Python.
PYTHON_CELL_MAGICS = frozenset({"time", "timeit", "capture", "prun", "memit"})


def is_notebook(path: Path) -> bool:
    return path.suffix == NOTEBOOK_SUFFIX


# -- cells and the map from module rows back to them ------------------------------------------
@dataclass(frozen=True)
class CodeCell:
    number: int  # 1-based over all cells, as Jupyter (and ruff) count them
    first_row: int  # the row of its first line in the joined module
    rows: int  # how many lines it has there
    file_rows: tuple[int, ...]  # per cell row, the line of the .ipynb file that stores it
    shifts: dict = field(default_factory=dict)  # cell row -> (indent width, columns removed)


@dataclass
class CellMap:
    cells: list[CodeCell]  # code cells with at least one line, in notebook order
    broken: list[ParseFailure] = field(default_factory=list)  # cells left out, at module rows

    @cached_property
    def _first_rows(self) -> list[int]:
        return [cell.first_row for cell in self.cells]

    def cell_at(self, row: int) -> CodeCell | None:
        if not self.cells:
            return None
        return self.cells[max(bisect.bisect_right(self._first_rows, row) - 1, 0)]

    def locate(self, row: int, column: int) -> tuple[CodeCell, int, int] | None:
        """(cell, row in it, column in its original text) of a module position."""
        cell = self.cell_at(row)
        if cell is None:
            return None
        cell_row = row - cell.first_row + 1
        indent, removed = cell.shifts.get(cell_row, (0, 0))
        return cell, cell_row, column + removed if column > indent else column

    def locate_end(self, row: int, column: int, start: CodeCell) -> tuple[CodeCell, int, int] | None:
        """Like locate, for the end of a range: column 1 of a cell's first row, when the range
        began in the cell before, is the end of that earlier cell (a whole last line)."""
        found = self.locate(row, column)
        if found is not None and found[0] is not start and column == 1 and found[1] == 1:
            position = self.cells.index(found[0])
            if position > 0 and self.cells[position - 1] is start:
                return start, start.rows + 1, 1
        return found

    def file_row(self, cell: CodeCell, row: int) -> int:
        return cell.file_rows[min(max(row, 1), len(cell.file_rows)) - 1]


@dataclass
class NotebookSource(SourceFile):
    """A notebook as the linter sees it: `text` is the joined, masked code; `cells` maps it back."""

    cells: CellMap = field(default_factory=lambda: CellMap([]))


# -- reading: JSON with the offsets of every cell's source -------------------------------------
@dataclass
class SourceSpan:
    """Where a code cell's `source` value sits in the file's JSON text."""

    start: int
    end: int
    items: list[tuple[int, int]] | None  # each list element's span; None for a string value


@dataclass
class ParsedNotebook:
    text: str  # the file's JSON text
    code: list[tuple[int, str, SourceSpan | None]]  # (index among all cells, source text, its span)
    python: bool  # a Python notebook (others have no code we can read)

    @cached_property
    def _newlines(self) -> list[int]:
        return [match.start() for match in re.finditer("\n", self.text)]

    def line_of(self, offset: int) -> int:
        """The 1-based line of the JSON text at `offset`."""
        return bisect.bisect_left(self._newlines, offset) + 1


_WHITESPACE = re.compile(r"[ \t\n\r]*")
_DECODER = json.JSONDecoder()


def _skip(text: str, at: int) -> int:
    return _WHITESPACE.match(text, at).end()


def _members(text: str, at: int, on_value) -> int:
    """Walk the JSON object at `at` (already validated): on_value(key, value start) returns the
    value's end. Returns the offset after the object."""
    at = _skip(text, at + 1)
    if text[at] == "}":
        return at + 1
    while True:
        key, at = scanstring(text, at + 1)
        at = _skip(text, _skip(text, at) + 1)  # past the colon
        at = _skip(text, on_value(key, at))
        if text[at] == "}":
            return at + 1
        at = _skip(text, at + 1)  # past the comma


def _items(text: str, at: int, on_item) -> int:
    at = _skip(text, at + 1)
    if text[at] == "]":
        return at + 1
    while True:
        at = _skip(text, on_item(at))
        if text[at] == "]":
            return at + 1
        at = _skip(text, at + 1)


def _value_end(text: str, at: int) -> int:
    return _DECODER.raw_decode(text, at)[1]


def _source_spans(text: str) -> list[SourceSpan | None]:
    """Per cell, the span of its `source` value in `text`."""
    spans: list[SourceSpan | None] = []

    def on_source(at: int) -> int:
        if text[at] != "[":
            end = _value_end(text, at)
            spans[-1] = SourceSpan(at, end, None)
            return end
        items: list[tuple[int, int]] = []

        def on_line(item_at: int) -> int:
            end = _value_end(text, item_at)
            items.append((item_at, end))
            return end

        end = _items(text, at, on_line)
        spans[-1] = SourceSpan(at, end, items)
        return end

    def on_member(key: str, at: int) -> int:
        return on_source(at) if key == "source" else _value_end(text, at)

    def on_cell(at: int) -> int:
        spans.append(None)
        return _members(text, at, on_member) if text[at] == "{" else _value_end(text, at)

    def on_top(key: str, at: int) -> int:
        if key == "cells" and text[at] == "[":
            spans.clear()
            return _items(text, at, on_cell)
        return _value_end(text, at)

    _members(text, _skip(text, 0), on_top)
    return spans


def parse_notebook(text: str) -> ParsedNotebook:
    """Raises SourceError for anything that is not an nbformat 4 notebook."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        where = f"line {exc.lineno}, column {exc.colno}"
        raise SourceError(f"not a valid notebook: invalid JSON: {exc.msg} ({where})") from None
    except RecursionError:
        raise SourceError("not a valid notebook: JSON nested too deeply") from None
    if not isinstance(data, dict):
        raise SourceError("not a valid notebook: the JSON document is not an object")
    if data.get("nbformat") != 4:
        found = data.get("nbformat")
        version = "no `nbformat` field" if found is None else f"nbformat {json.dumps(found)}"
        raise SourceError(f"not an nbformat 4 notebook ({version}); re-save it with Jupyter to convert it")
    cells = data.get("cells")
    if not isinstance(cells, list):
        raise SourceError("not a valid notebook: `cells` is missing or not a list")
    spans = _source_spans(text)
    code = []
    for index, cell in enumerate(cells):
        if not isinstance(cell, dict):
            raise SourceError(f"not a valid notebook: cell {index + 1} is not an object")
        if cell.get("cell_type") != "code":
            continue
        source = cell.get("source", "")
        if isinstance(source, list) and all(isinstance(line, str) for line in source):
            source = "".join(source)
        if not isinstance(source, str):
            raise SourceError(
                f"not a valid notebook: the source of cell {index + 1} is neither a string nor a list of strings"
            )
        code.append((index, source, spans[index] if index < len(spans) else None))
    return ParsedNotebook(text, code, _is_python(data))


def _is_python(data: dict) -> bool:
    metadata = data.get("metadata") if isinstance(data.get("metadata"), dict) else {}
    for key, field_name in (("language_info", "name"), ("kernelspec", "language")):
        section = metadata.get(key)
        if isinstance(section, dict) and isinstance(section.get(field_name), str):
            return section[field_name].lower() == "python"
    return True


# -- masking IPython syntax ----------------------------------------------------------------
_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+")
_ESCAPES = ("!", "%", "?", "/", ",", ";")  # shell, magic, help, autocall, autoquote
_ASSIGNED_ESCAPE = re.compile(r"[A-Za-z_][\w.]*(?:\s*,\s*[A-Za-z_][\w.]*)*\s*=\s*[!%]")
_HELP_END = re.compile(r"%{0,2}[A-Za-z_][\w.]*\*?\?{1,2}\s*$")
_TIMED = re.compile(r"%time(?:it)?((?:\s+-(?:[nrp]\s*\d+|[tcqo]))*)\s+(?=\S)")


def lines_of(text: str) -> list[str]:
    """Lines with their endings, broken where Python breaks them (\\n, \\r\\n, \\r only)."""
    return _LINE.findall(text)


def _ending(line: str) -> str:
    return line[len(line.rstrip("\r\n")) :]


def _blank(lines: list[str]) -> str:
    """As many empty lines as `lines`."""
    return "".join(_ending(line) or "\n" for line in lines)


def mask(source: str) -> tuple[str, dict]:
    """(the cell's text with IPython syntax masked, {row: (indent width, columns removed)})."""
    lines = lines_of(source)
    first = next((i for i, line in enumerate(lines) if line.strip()), None)
    if first is not None and lines[first].lstrip().startswith("%%"):
        name = re.match(r"\s*%%(\w*)", lines[first]).group(1)
        if name not in PYTHON_CELL_MAGICS:
            return _blank(lines), {}  # not Python: a blank cell
    out: list[str] = []
    shifts: dict[int, tuple[int, int]] = {}
    quote: str | None = None  # the open string's delimiter
    depth = 0  # open brackets
    continued = False  # the previous line ended with a backslash
    magic_continues = False
    for row, line in enumerate(lines, start=1):
        body, ending = line.rstrip("\r\n"), _ending(line)
        if magic_continues:  # `!pip install \` goes on on this line
            out.append(ending)
            magic_continues = body.endswith("\\")
            continue
        if quote is None and depth == 0 and not continued:
            masked = _mask_statement(body)
            if masked is not None:
                text, shift = masked
                out.append(text + ending)
                if shift:
                    shifts[row] = shift
                    quote, depth, continued = _scan(text, None, 0)
                else:
                    magic_continues = body.endswith("\\")
                continue
        quote, depth, continued = _scan(body, quote, depth)
        out.append(line)
    return "".join(out), shifts


def _mask_statement(body: str) -> tuple[str, tuple[int, int] | None] | None:
    """The masked line for a line that starts a statement, or None when it is plain Python."""
    stripped = body.lstrip()
    indent = body[: len(body) - len(stripped)]
    timed = _TIMED.match(stripped)
    if timed is not None and not stripped.startswith("%%") and not stripped[timed.end() :].startswith(_ESCAPES):
        return indent + stripped[timed.end() :], (len(indent), timed.end())
    escaped = stripped.startswith(_ESCAPES) or _ASSIGNED_ESCAPE.match(stripped) or (
        _HELP_END.match(stripped) and not stripped.startswith("#")
    )
    if not escaped:
        return None
    if not indent:
        return "#" + stripped[1:], None  # a comment of the same length
    return indent + ("pass" if len(stripped) >= 4 else "0"), None  # a block must keep a statement


def _scan(body: str, quote: str | None, depth: int) -> tuple[str | None, int, bool]:
    """Carry (open string, bracket depth) over one line; also whether it ends with a backslash
    continuation. Good enough for where statements start; the parser checks the rest."""
    at, size = 0, len(body)
    while at < size:
        char = body[at]
        if quote is not None:
            if char == "\\":
                at += 2
                continue
            if body.startswith(quote, at):
                at += len(quote)
                quote = None
                continue
            at += 1
            continue
        if char == "#":
            return None, depth, False
        if char in "\"'":
            quote = char * 3 if body.startswith(char * 3, at) else char
            at += len(quote)
            continue
        if char in "([{":
            depth += 1
        elif char in ")]}":
            depth = max(depth - 1, 0)
        at += 1
    ends_with_backslash = body.endswith("\\") and not body.endswith("\\\\")
    if quote is not None and len(quote) == 1 and not ends_with_backslash:
        quote = None  # an unterminated one-line string: the parser will say so
    return quote, depth, quote is None and ends_with_backslash


# -- loading -------------------------------------------------------------------------------
def normalized_cell(text: str) -> str:
    """A cell's text as a block of the module: ending with a newline unless empty."""
    return text if not text or text.endswith(("\n", "\r")) else text + "\n"


def _file_rows(notebook: ParsedNotebook, source: str, span: SourceSpan | None) -> tuple[int, ...]:
    if span is None:
        return (1,) * len(lines_of(source))
    if span.items is None:
        return (notebook.line_of(span.start),) * len(lines_of(source))
    rows: list[int] = []
    for start, end in span.items:
        piece = json.loads(notebook.text[start:end])
        rows.extend([notebook.line_of(start)] * len(lines_of(piece)))
    return tuple(rows)


def _parse_failure(text: str) -> ParseFailure | None:
    try:
        with warnings.catch_warnings():  # `"\d"` in a cell is the parser's business, not ours
            warnings.simplefilter("ignore")
            compile(text, "<cell>", "exec", flags=ast.PyCF_ONLY_AST, dont_inherit=True)
    except SyntaxError as error:
        if newer_syntax(text, error) is not None:
            return None  # newer syntax than the running Python's, which LibCST reads: checked
        return ParseFailure(error.msg, error.lineno or 1, max(error.offset or 1, 1))
    except (RecursionError, MemoryError, ValueError):
        return ParseFailure("too deeply nested to parse")
    return None


def load_source(path: Path, text: str | None = None) -> NotebookSource:
    """The notebook at `path` (its JSON `text`, or read from disk) as one module. Raises
    SourceError for a file that is not an nbformat 4 notebook."""
    notebook = parse_notebook(text if text is not None else read_source(path))
    chunks: list[str] = []
    cells: list[CodeCell] = []
    broken: list[ParseFailure] = []
    row = 1
    for index, source, span in notebook.code if notebook.python else ():
        masked, shifts = mask(source)
        masked = normalized_cell(masked)
        rows = len(lines_of(masked))
        if rows == 0:
            continue
        failure = _parse_failure(masked)
        if failure is not None:
            line = min(max(failure.row, 1), rows)
            message = (
                f"cell {index + 1} does not parse ({failure.message}); "
                "the rest of the notebook was checked without it"
            )
            broken.append(ParseFailure(message, row + line - 1, failure.column))
            masked = _blank(lines_of(masked))
        cells.append(CodeCell(index + 1, row, rows, _file_rows(notebook, source, span), shifts))
        chunks.append(masked)
        row += rows
    return NotebookSource(path, "".join(chunks), cells=CellMap(cells, broken))


# -- positions back to cells ----------------------------------------------------------------
_REFERENCE = r"(?<![\w/.-]){path}:(\d+)(?![\d:])"
_OWN_LINE = re.compile(r"(?<=[(\s])line (\d+)(?=\))")


def to_cells(findings: list[Finding], cell_maps: dict[str, CellMap]) -> list[Finding]:
    """Findings with rows in notebooks made cell-relative (and `cell` set); references such as
    `analysis.ipynb:14` in any message become `analysis.ipynb:cell 3:2`."""
    if not cell_maps:
        return findings
    references = [(re.compile(_REFERENCE.format(path=re.escape(p))), p, m) for p, m in cell_maps.items()]
    mapped = []
    for finding in findings:
        message = _cell_references(finding.message, references)
        cells = cell_maps.get(finding.path)
        start = cells.locate(finding.row, finding.column) if cells is not None else None
        if start is None:
            mapped.append(finding if message == finding.message else replace(finding, message=message))
            continue
        # `(line 14)` in a message about its own file (TRP501, TRP601) -> `(cell 3, line 2)`
        message = _OWN_LINE.sub(lambda m: _cell_row(cells, int(m.group(1)), ", line "), message)
        cell, row, column = start
        end = cells.locate_end(finding.end_row, finding.end_column, cell)
        end_row, end_column = (end[1], end[2]) if end is not None and end[0] is cell else (row, column)
        file_rows = (cells.file_row(cell, row), cells.file_row(cell, end_row))
        fix = _fix_in_cell(finding.fix, cells, cell)
        mapped.append(replace(
            finding, message=message, row=row, column=column, end_row=end_row, end_column=end_column,
            fix=fix, cell=cell.number, file_rows=file_rows,
        ))
    return mapped


def _cell_references(message: str, references) -> str:
    """`nb.ipynb:14` (context.describe, line_of) -> `nb.ipynb:cell 3:2`, for every notebook."""
    if NOTEBOOK_SUFFIX + ":" not in message:
        return message
    for pattern, path, cells in references:
        if path in message:
            message = pattern.sub(lambda m, p=path, c=cells: f"{p}:{_cell_row(c, int(m.group(1)))}", message)
    return message


def _cell_row(cells: CellMap, row: int, separator: str = ":") -> str:
    """`cell 3:2` (or `cell 3, line 2`) for a module row."""
    found = cells.locate(row, 1)
    if found is None:
        return str(row) if separator == ":" else f"line {row}"
    return f"cell {found[0].number}{separator}{found[1]}"


def _fix_in_cell(fix: Fix | None, cells: CellMap, home: CodeCell) -> Fix | None:
    """The fix with edits relative to the one cell they fall in (`Fix.cell`; a seed inserted
    after the imports may land in another cell than the finding), or None when they fall in
    several: a fix that spans cells is not offered in notebooks. A line inserted between the
    finding's cell and the next one goes at the end of the finding's cell."""
    if fix is None or not fix.edits:
        return fix
    edits, cell = [], None
    for edit in fix.edits:
        if edit.end == edit.start:
            start = end = cells.locate_end(*edit.start, home)
        else:
            start = cells.locate(*edit.start)
            end = cells.locate_end(*edit.end, start[0]) if start is not None else None
        if start is None:
            return None
        cell = cell or start[0]
        if end is None or start[0] is not cell or end[0] is not cell:
            return None
        edits.append(Edit(edit.content, start[1:], end[1:]))
    return replace(fix, edits=tuple(edits), cell=cell.number)
