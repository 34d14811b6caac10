"""CPython's verdict on an edited buffer, compiling only the top-level statements the edit touched.

The language server compiles every new text of a buffer (LibCST accepts some code CPython
refuses, and CPython's tree places findings: pipeline/positions.py). A whole compile of timm's
train.py takes 10-15 ms; an edit usually touches one top-level statement. The statements before
the edit and after it are unchanged text, each a complete top-level statement, so the text
compiles exactly when the lines between them do: those lines are compiled alone. Where they do
not (an `else:` typed after an unchanged `if`), the whole text is compiled, for CPython's own
message and position.

The tree given back reuses the previous tree's statements after the edit without renumbering
them (that would walk them all): `offsets` says by how many lines each top-level statement's
line numbers are behind the text.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

from torchrepro_lint.pipeline.reparse import edited_lines
from torchrepro_lint.pipeline.source import ParseFailure, SourceFile, physical_lines


@dataclass(frozen=True)
class Compiled:
    text: str
    tree: ast.Module
    offsets: tuple[int, ...]  # lines to add to each top-level statement's line numbers


def compile_text(path: Path, text: str, previous: Compiled | None = None) -> Compiled | ParseFailure:
    """`text` compiled (from `previous`, the buffer's last text that compiled, where it helps),
    or the ParseFailure saying why it does not compile."""
    if previous is not None:
        found = _recompiled(path, previous, text)
        if found is not None:
            return found
    try:
        tree = SourceFile(path, text)._compile()
    except ParseFailure as failure:
        return failure
    return Compiled(text, tree, (0,) * len(tree.body))


def _recompiled(path: Path, previous: Compiled, text: str) -> Compiled | None:
    new = physical_lines(text)
    same_start, changed_end, delta = edited_lines(physical_lines(previous.text), new)
    body, offsets = previous.tree.body, previous.offsets
    kept = 0  # statements wholly before the edit (their last line unchanged)
    while kept < len(body) and body[kept].end_lineno + offsets[kept] <= same_start:
        kept += 1
    after = kept  # the first statement wholly after it
    while after < len(body) and _first_line(body[after]) + offsets[after] - 1 < changed_end:
        after += 1
    begin = body[kept - 1].end_lineno + offsets[kept - 1] if kept else 0
    if kept < len(body) and _first_line(body[kept]) + offsets[kept] <= begin:
        return None  # the next statement starts on the kept one's last line (`a = 1; b = \`)
    if 0 < after < len(body) and body[after - 1].end_lineno + offsets[after - 1] >= _first_line(body[after]) + offsets[after]:
        return None  # likewise at the other end
    end = _first_line(body[after]) + offsets[after] - 1 + delta if after < len(body) else len(new)
    middle = "".join(new[begin:end])
    if "__future__" in middle or "barry_as_FLUFL" in text or begin < 2 < len(new) and ("coding" in new[0] or "coding" in new[1]):
        return None  # (where a statement stands, the one future import that changes parsing, an encoding: whole)
    try:  # (behind `begin` empty lines, its line numbers are the text's: no renumbering walk)
        tree = compile("\n" * begin + middle, str(path), "exec", flags=ast.PyCF_ONLY_AST, dont_inherit=True)
    except (SyntaxError, RecursionError, MemoryError, ValueError):
        return None
    statements = [*body[:kept], *tree.body, *body[after:]]
    shifted = (*offsets[:kept], *(0,) * len(tree.body), *(offset + delta for offset in offsets[after:]))
    return Compiled(text, ast.Module(body=statements, type_ignores=[]), shifted)


def _first_line(statement: ast.stmt) -> int:
    decorators = getattr(statement, "decorator_list", None)
    return min(d.lineno for d in decorators) if decorators else statement.lineno
