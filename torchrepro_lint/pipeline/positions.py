"""Where a node is in its file, without computing positions for the whole file.

LibCST's PositionProvider regenerates the code of the entire module to place any node, which
costs about as much as parsing it (0.3 s for a large model file). A finding needs the place of
a few nodes, so we generate only the innermost statement around each one:

- CPython's tree (already built by the syntax gate in source.py) gives that statement's first
  line: statement lists correspond one to one, except that a LibCST line `a = 1; b = 2` holds
  two CPython statements;
- LibCST positions inside a pruned copy of the module, where each enclosing block keeps only
  the statement on the way down, give the rest. Indentation is generated as in the real file,
  so columns are exact and rows are off by a constant we read from the statement's start.

Every answer is checked (the statement's first line must read the same in the file and in the
pruned copy); anything unexpected falls back to LibCST's positions for the whole module.
"""

from __future__ import annotations

import ast
import re

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

# LibCST compound statements whose indented body we follow, and the CPython types they match.
_BLOCKS: dict[type, tuple[type, ...]] = {
    cst.FunctionDef: (ast.FunctionDef, ast.AsyncFunctionDef),
    cst.ClassDef: (ast.ClassDef,),
    cst.For: (ast.For, ast.AsyncFor),
    cst.While: (ast.While,),
    cst.With: (ast.With, ast.AsyncWith),
    cst.If: (ast.If,),
    cst.Try: (ast.Try,),
}
_COMPOUND_AST = (
    ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.For, ast.AsyncFor, ast.While, ast.With,
    ast.AsyncWith, ast.If, ast.Try, ast.Match,
) + ((ast.TryStar,) if hasattr(ast, "TryStar") else ())

Span = tuple[int, int, int, int]


class _Unmapped(Exception):
    """The fast path cannot place this node with certainty."""


class StatementSpans:
    def __init__(self, text: str, module: cst.Module, syntax_tree: ast.Module | None, parents: dict | None, offsets=None) -> None:
        self.text, self.module, self.tree, self.parents = text, module, syntax_tree, parents
        self.offsets = offsets  # lines to add per top-level statement of `syntax_tree` (recompile.py)
        self._lines: list[str] | None = None
        self._pruned: dict[int, tuple[cst.CSTNode, object, int]] = {}  # id(statement) -> positions
        self._whole = None

    def span(self, node: cst.CSTNode) -> Span:
        try:
            return self._fast(node)
        except (_Unmapped, KeyError, IndexError):
            if self._whole is None:
                self._whole = MetadataWrapper(self.module, unsafe_skip_copy=True).resolve(PositionProvider)
            return _span(self._whole[node], 0)

    def _fast(self, node: cst.CSTNode) -> Span:
        if self.tree is None or self.parents is None:
            raise _Unmapped
        chain = [node]
        while chain[-1] in self.parents:
            chain.append(self.parents[chain[-1]])
        if chain[-1] is not self.module or len(chain) < 2:
            raise _Unmapped
        chain.reverse()  # the module, its statement, ..., node
        blocks: list[cst.CSTNode] = []  # compound statements we went into
        cst_body, ast_body, at = self.module.body, self.tree.body, 1
        offset = 0
        while True:
            statement = chain[at]
            index = _ast_index(cst_body, statement)
            ast_statement = ast_body[index]
            if at == 1 and self.offsets is not None:
                offset = self.offsets[index]
            expected = _BLOCKS.get(type(statement))
            if expected is not None and not isinstance(ast_statement, expected):
                raise _Unmapped
            if type(statement) is cst.SimpleStatementLine and isinstance(ast_statement, _COMPOUND_AST):
                raise _Unmapped
            inner = at + 2 < len(chain) and expected is not None and chain[at + 1] is statement.body
            if inner and type(statement.body) is cst.IndentedBlock:
                blocks.append(statement)
                cst_body, ast_body, at = statement.body.body, ast_statement.body, at + 2
                continue
            break
        positions, start = self._positions_around(statement, blocks, _first_line(ast_statement) + offset)
        return _span(positions[node], start)

    def _positions_around(self, statement: cst.CSTNode, blocks: list[cst.CSTNode], first_line: int):
        """Positions in the pruned module, and the row offset that makes them the file's."""
        found = self._pruned.get(id(statement))
        if found is not None:
            return found[1], found[2]
        child = statement
        for block in reversed(blocks):
            child = block.with_changes(body=block.body.with_changes(body=[child]))
        pruned = self.module.with_changes(body=[child])
        positions = MetadataWrapper(pruned, unsafe_skip_copy=True).resolve(PositionProvider)
        row = positions[statement].start.line
        if self._lines is None:
            self._lines = _physical_lines(self.text)
        if _physical_lines(pruned.code)[row - 1] != self._lines[first_line - 1]:
            raise _Unmapped
        offset = first_line - row
        self._pruned[id(statement)] = (statement, positions, offset)
        return positions, offset


def _ast_index(cst_body, statement) -> int:
    """Index in CPython's statement list of a statement from LibCST's list."""
    index = 0
    for item in cst_body:
        if item is statement:
            return index
        index += len(item.body) if type(item) is cst.SimpleStatementLine else 1
    raise _Unmapped


def _first_line(statement: ast.stmt) -> int:
    decorators = getattr(statement, "decorator_list", None)
    return min(d.lineno for d in decorators) if decorators else statement.lineno


def _physical_lines(text: str) -> list[str]:
    # Python's own line breaks; str.splitlines also breaks at form feeds and other separators.
    return re.split(r"\r\n|\r|\n", text)


def _span(rng, offset: int) -> Span:
    return (rng.start.line + offset, rng.start.column + 1, rng.end.line + offset, rng.end.column + 1)
