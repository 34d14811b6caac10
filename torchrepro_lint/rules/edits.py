"""Building the fixes rules attach to findings, from the CST: replace a node, add a line after a
statement, add an import.

Every helper returns Edit objects (1-based rows and columns) or None when the code's shape
is one we do not rewrite (a one-line `if x: stmt` suite, say): no fix beats a wrong fix.
Applying them to files is the fixes package's work.
"""

from __future__ import annotations

import libcst as cst

from torchrepro_lint.analysis.names import LOCAL
from torchrepro_lint.findings import Edit, Fix
from torchrepro_lint.project.modules import ProjectModule

# Conventional local names for modules a fix may need to import.
CONVENTIONAL = {"numpy": ("np", "import numpy as np"), "random": ("random", "import random"),
                "torch": ("torch", "import torch"), "os": ("os", "import os")}


def replace(module: ProjectModule, node: cst.CSTNode, text: str) -> Edit | None:
    row, column, end_row, end_column = module.source.span(node)
    if module.source.holds_blank(row, end_row):
        return None  # `text` was generated from a tree that holds a constant table as a blank
    return Edit(text, (row, column), (end_row, end_column))


def statement_line(module: ProjectModule, node: cst.CSTNode) -> cst.SimpleStatementLine | None:
    """The whole line holding `node`, when it is a line of its own in an indented block."""
    line = node if isinstance(node, cst.SimpleStatementLine) else module.index.enclosing(node, cst.SimpleStatementLine)
    if line is None or len(line.body) != 1:
        return None
    if not isinstance(module.index.parents.get(line), (cst.IndentedBlock, cst.Module)):
        return None
    return line


def indentation(module: ProjectModule, line: cst.CSTNode) -> str:
    row = module.source.span(line)[0]
    text = module.source.lines[row - 1]
    return text[: len(text) - len(text.lstrip())]


def insert_after(module: ProjectModule, node: cst.CSTNode, code: str) -> Edit | None:
    """A new line `code` right after the statement holding `node`, at the same indentation."""
    line = statement_line(module, node)
    if line is None:
        return None
    return _insert_line(module, module.source.span(line)[2] + 1, indentation(module, line) + code)


def insert_before(module: ProjectModule, node: cst.CSTNode, code: str) -> Edit | None:
    line = statement_line(module, node)
    if line is None:
        return None
    return _insert_line(module, module.source.span(line)[0], indentation(module, line) + code)


def insert_first_in_block(module: ProjectModule, block_owner: cst.CSTNode, code: str) -> Edit | None:
    """`code` as the first statement of an `if`/`def` body (after a docstring)."""
    body = getattr(block_owner, "body", None)
    if not isinstance(body, cst.IndentedBlock) or not body.body:
        return None
    first = body.body[0]
    if _is_docstring(first) and len(body.body) > 1:
        return insert_before(module, body.body[1], code)
    return _insert_line(module, module.source.span(first)[0], indentation(module, first) + code)


def insert_after_imports(module: ProjectModule, code: str) -> Edit:
    """At module level, after the docstring, `from __future__` and the leading imports."""
    body = module.index.module.body
    row = 1
    for position, statement in enumerate(body):
        is_import = isinstance(statement, cst.SimpleStatementLine) and all(
            isinstance(s, (cst.Import, cst.ImportFrom)) for s in statement.body
        )
        if is_import or (position == 0 and _is_docstring(statement)):
            row = module.source.span(statement)[2] + 1
        else:
            break
    return _insert_line(module, row, code)


def module_name_for(module: ProjectModule, qualname: str) -> tuple[str, list[Edit]]:
    """How to spell module `qualname` here (`np` for numpy), plus the import edit if missing."""
    for name, value in module.index.scope.bindings.items():
        if value == qualname and name in module.index.scope.imported:
            return name, []
    name, statement = CONVENTIONAL.get(qualname, (qualname, f"import {qualname}"))
    return name, [_import_edit(module, statement)]


def _import_edit(module: ProjectModule, statement: str) -> Edit:
    """Insert an import after the module's last leading import (or after its docstring)."""
    return insert_after_imports(module, statement)


def _insert_line(module: ProjectModule, row: int, code: str) -> Edit:
    lines = module.source.lines
    if row > len(lines):
        # After the last line: keep the file's final newline convention.
        end = (len(lines), len(lines[-1]) + 1) if lines else (1, 1)
        prefix = "" if module.source.text.endswith(("\n", "\r")) or not lines else "\n"
        if module.source.text.endswith(("\n", "\r")):
            return Edit(code + "\n", (len(lines) + 1, 1), (len(lines) + 1, 1))
        return Edit(prefix + code, end, end)
    return Edit(code + "\n", (row, 1), (row, 1))


def _is_docstring(statement: cst.CSTNode) -> bool:
    return (
        isinstance(statement, cst.SimpleStatementLine)
        and len(statement.body) == 1
        and isinstance(statement.body[0], cst.Expr)
        and isinstance(statement.body[0].value, (cst.SimpleString, cst.ConcatenatedString))
    )


def make_fix(applicability: str, message: str, edits) -> Fix | None:
    """A Fix from edits, or None when any edit could not be built."""
    edits = list(edits)
    if not edits or any(edit is None for edit in edits):
        return None
    return Fix(applicability, message, tuple(edits))


def is_local(qualname: str | None) -> bool:
    return bool(qualname) and qualname.startswith(LOCAL)


def add_keywords(module: ProjectModule, call: cst.Call, keywords: list[tuple[str, str]]) -> Edit | None:
    """The call rewritten with `name=code` keywords appended (`f(x, a=1)`), formatting kept."""
    if any(a.star for a in call.args):
        return None
    tight = cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace(""))
    extra = [cst.Arg(keyword=cst.Name(name), value=cst.parse_expression(code), equal=tight) for name, code in keywords]
    args = list(call.args)
    if args and args[-1].comma is cst.MaybeSentinel.DEFAULT:
        args[-1] = args[-1].with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
    return replace(module, call, module.index.module.code_for_node(call.with_changes(args=[*args, *extra])))

