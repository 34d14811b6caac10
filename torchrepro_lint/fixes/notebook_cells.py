"""Fixes written into a notebook: each code cell's source edited as a text, then spliced back
into the file's JSON text, so that everything else (outputs, metadata, ids, indentation, key
order, escaping, the final newline) stays byte for byte.

Findings come here with cell-relative fixes (notebooks.to_cells); a cell's source is edited
as apply.py edits a Python file, and a fix that leaves the cell unparsable is dropped.
"""

from __future__ import annotations

import json
import re

from torchrepro_lint.findings import Finding
from torchrepro_lint.fixes.apply import apply_fixes as apply_to_text
from torchrepro_lint.fixes.apply import parses
from torchrepro_lint.notebooks import ParsedNotebook, SourceSpan, lines_of, mask, normalized_cell, parse_notebook


def _cell_parses(text: str) -> bool:
    return parses(mask(text)[0])


def cell_sources(text: str) -> dict[int, str]:
    """Each code cell's source, by cell number, as fix edits count in it (see apply_fixes)."""
    return {index + 1: normalized_cell(source) for index, source, span in parse_notebook(text).code if span is not None}


def _keeps_parsing(before: str, after: str) -> bool:
    return _cell_parses(after)


def apply_fixes(text: str, findings: list[Finding], *, keep=_keeps_parsing) -> tuple[str, list[Finding]]:
    """(the notebook's new JSON text, findings whose fix was applied). `findings` have
    cell-relative fixes (see to_cells); a fix is dropped unless `keep(cell source, candidate)`
    (by default: unless the cell still parses)."""
    notebook = parse_notebook(text)
    by_cell: dict[int, list[Finding]] = {}
    for finding in findings:
        if finding.fix is not None and finding.fix.cell is not None:
            by_cell.setdefault(finding.fix.cell, []).append(finding)
    changes: list[tuple[SourceSpan, str]] = []
    applied: list[Finding] = []
    for index, source, span in notebook.code:
        group = by_cell.get(index + 1)
        if not group or span is None:
            continue
        normalized = normalized_cell(source)
        new, done = apply_to_text(normalized, group, accept=lambda candidate: keep(normalized, candidate))
        if normalized != source and new.endswith("\n"):
            new = new[:-1]  # the cell had no final newline: keep it that way
        if new != source:
            changes.append((span, _render(notebook, span, source, new)))
            applied.extend(done)
    for span, rendered in sorted(changes, key=lambda change: change[0].start, reverse=True):
        text = text[: span.start] + rendered + text[span.end :]
    return text, applied


_NON_ASCII_ESCAPE = re.compile(r"\\u(?:00[89a-fA-F]|0[1-9a-fA-F][0-9a-fA-F]|[1-9a-fA-F][0-9a-fA-F]{2})[0-9a-fA-F]")


def _render(notebook: ParsedNotebook, span: SourceSpan, old: str, new: str) -> str:
    """The JSON text of a cell's new source, in the layout of the old one: a list of lines stays a
    list (with the same indentation, unchanged lines byte for byte), a string stays a string."""
    text = notebook.text
    ascii_only = text.isascii() and _NON_ASCII_ESCAPE.search(text) is not None

    def dump(value: str) -> str:
        return json.dumps(value, ensure_ascii=ascii_only)

    if span.items is None:
        return dump(new)
    old_items = [text[start:end] for start, end in span.items]
    old_lines = [json.loads(item) for item in old_items]
    new_lines = lines_of(new)
    one_line_items = all(len(lines_of(line)) == 1 for line in old_lines)
    if len(new_lines) == len(old_lines) and one_line_items:  # edits within lines: only changed items
        out, last = [], span.start
        for (start, end), before, after in zip(span.items, old_lines, new_lines):
            out.append(text[last:start] + (text[start:end] if before == after else dump(after)))
            last = end
        return "".join(out) + text[last : span.end]
    if not span.items:
        opening, separator, closing = "[", ", ", "]"
    else:
        opening = text[span.start : span.items[0][0]]
        closing = text[span.items[-1][1] : span.end]
        separator = text[span.items[0][1] : span.items[1][0]] if len(span.items) > 1 else "," + opening[1:]
    raw = {}
    for item, line in zip(old_items, old_lines):
        raw.setdefault(line, item)  # an unchanged line keeps its exact JSON spelling
    if not new_lines:
        return "[]"
    return opening + separator.join(raw.get(line) or dump(line) for line in new_lines) + closing
