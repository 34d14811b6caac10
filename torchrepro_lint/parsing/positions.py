"""Where a node is in its file, without computing positions for the whole file.

LibCST's PositionProvider regenerates the code of the entire module to place any node, which
costs about as much as parsing it (0.3 s for a large model file). A finding needs the place of
a few nodes, so we generate only the innermost statement around each one:

- CPython's tree gives that statement's first line: statement lists correspond one to one,
  except that a LibCST line `a = 1; b = 2` holds two CPython statements. The syntax gate in
  source.py compiles the whole text once and keeps only the lines of each top-level statement
  (`statement_bounds`); a statement is compiled alone, from its lines, only to go into its
  block (`_Pieces`);
- LibCST positions inside a pruned copy of the module, where each enclosing block keeps only
  the statement on the way down, give the rest. Indentation is generated as in the real file,
  so columns are exact and rows are off by a constant we read from the statement's start.

Every answer is checked (the statement's first line must read the same in the file and in the
pruned copy); anything unexpected falls back to LibCST's positions for the whole module.
"""

from __future__ import annotations

import ast
from array import array
from dataclasses import dataclass

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from torchrepro_lint.parsing.lines import line_texts, physical_lines

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
    ast.AsyncWith, ast.If, ast.Try,
) + tuple(getattr(ast, name) for name in ("Match", "TryStar") if hasattr(ast, name))  # (3.10, 3.11)

Span = tuple[int, int, int, int]


class _Unmapped(Exception):
    """The fast path cannot place this node with certainty."""


class StatementSpans:
    def __init__(
        self, text: str, module: cst.Module, syntax_tree: ast.Module | None, parents: dict | None, offsets=None, bounds=None,
        tree_lines: bool = False,
    ) -> None:
        """`offsets`: lines to add per top-level statement of `syntax_tree` (server/recompile.py);
        without a tree, `bounds` (statement_bounds) gives the top-level statements piece by piece;
        `tree_lines`: a text CPython refuses (newer syntax), placed by LibCST's lines (_TreeLines)."""
        self.text, self.module, self.parents = text, module, parents
        self.tree_lines = _TreeLines(module) if tree_lines else None
        if syntax_tree is not None:
            self.top = _Whole(syntax_tree, offsets)
        else:
            self.top = _Pieces(text, bounds, self._text_lines) if bounds is not None else None
        self._lines: list[str] | None = None
        self._pruned: dict[int, tuple[cst.CSTNode, object, int]] = {}  # id(statement) -> positions
        self._whole = None

    def span(self, node: cst.CSTNode) -> Span:
        try:
            return self._fast(node)
        except (_Unmapped, KeyError, IndexError):
            if self._whole is None:
                self._whole = code_ranges(self.module)
            return _span(self._whole[node], 0)

    def _fast(self, node: cst.CSTNode) -> Span:
        if self.top is None and self.tree_lines is None or self.parents is None:
            raise _Unmapped
        chain = [node]
        while chain[-1] in self.parents:
            chain.append(self.parents[chain[-1]])
        if chain[-1] is not self.module or len(chain) < 2:
            raise _Unmapped
        if self.tree_lines is not None:  # no CPython tree to go into a block: the top-level statement
            positions, start = self._positions_in_top(chain[-2])
            return _span(positions[node], start)
        chain.reverse()  # the module, its statement, ..., node
        blocks: list[cst.CSTNode] = []  # compound statements we went into
        cst_body, ast_body, at = self.module.body, None, 1  # (ast_body: None at the top level)
        offset = 0
        while True:
            statement = chain[at]
            index = _ast_index(cst_body, statement)
            expected = _BLOCKS.get(type(statement))
            inner = at + 2 < len(chain) and expected is not None and chain[at + 1] is statement.body
            inner = inner and type(statement.body) is cst.IndentedBlock
            if ast_body is None and not inner:  # a top-level statement: its first line is known
                compound = self.top.is_compound(index)
                if expected is not None and not compound or type(statement) is cst.SimpleStatementLine and compound:
                    raise _Unmapped
                first_line = self.top.first_line(index)
                break
            if ast_body is None:
                ast_statement, offset = self.top.statement(index)
            else:
                ast_statement = ast_body[index]
                offset = self.top.inside(ast_statement, offset)
            if expected is not None and not isinstance(ast_statement, expected):
                raise _Unmapped
            if type(statement) is cst.SimpleStatementLine and isinstance(ast_statement, _COMPOUND_AST):
                raise _Unmapped
            if inner:
                blocks.append(statement)
                cst_body, ast_body, at = statement.body.body, ast_statement.body, at + 2
                continue
            first_line = _first_line(ast_statement) + offset
            break
        positions, start = self._positions_around(statement, blocks, first_line)
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
        positions = code_ranges(pruned)
        row = positions[statement].start.line
        if line_texts(pruned.code)[row - 1] != self._text_lines()[first_line - 1]:
            raise _Unmapped
        offset = first_line - row
        self._pruned[id(statement)] = (statement, positions, offset)
        return positions, offset

    def _positions_in_top(self, statement: cst.CSTNode):
        """`_positions_around` a top-level statement, placed by where its code begins (_TreeLines)."""
        found = self._pruned.get(id(statement))
        if found is not None:
            return found[1], found[2]
        pruned = self.module.with_changes(body=[statement])
        positions = code_ranges(pruned)
        offset = self.tree_lines.code_start(statement) - (1 + len(self.module.header))  # (the header is kept)
        row = positions[statement].start.line
        if line_texts(pruned.code)[row - 1] != self._text_lines()[row + offset - 1]:
            raise _Unmapped
        self._pruned[id(statement)] = (statement, positions, offset)
        return positions, offset

    def _text_lines(self) -> list[str]:
        if self._lines is None:
            self._lines = line_texts(self.text)
        return self._lines


def statement_bounds(tree: ast.Module) -> array:
    """The first and last line of each top-level statement of CPython's tree, and whether it is
    compound, three numbers each: what placing a node needs of the tree outside the statement
    around it. A few numbers per statement, where the tree takes 30-80 times the text."""
    out = array("i")
    for statement in tree.body:
        out.extend((_first_line(statement), statement.end_lineno, isinstance(statement, _COMPOUND_AST)))
    return out


@dataclass(frozen=True)
class LineOffsets:
    """Lines to add to the line numbers of a tree compiled in part (server/recompile.py): per
    top-level statement, and for statements inside them that an edit moved, by id (with the
    statement), on top of what the statement around them gets. Only `body` chains are kept
    exact: placing goes down a statement's body alone."""

    top: tuple[int, ...]
    nested: dict

    def inside(self, statement: ast.stmt) -> int:
        found = self.nested.get(id(statement))
        return found[1] if found is not None and found[0] is statement else 0


class _Whole:
    """CPython's tree of the whole text (and lines to add per statement, if any)."""

    def __init__(self, tree: ast.Module, offsets: LineOffsets | tuple | None) -> None:
        self.body = tree.body
        self.offsets = offsets.top if isinstance(offsets, LineOffsets) else offsets
        self.nested = offsets if isinstance(offsets, LineOffsets) and offsets.nested else None

    def statement(self, index: int) -> tuple[ast.stmt, int]:
        return self.body[index], self.offsets[index] if self.offsets is not None else 0

    def inside(self, statement: ast.stmt, offset: int) -> int:
        """The lines to add to a statement inside a top-level one, given its block's."""
        return offset + self.nested.inside(statement) if self.nested is not None else offset

    def first_line(self, index: int) -> int:
        statement, offset = self.statement(index)
        return _first_line(statement) + offset

    def is_compound(self, index: int) -> bool:
        return isinstance(self.body[index], _COMPOUND_AST)


class _TreeLines:
    """Where each top-level statement's code begins (its leading blank lines and comments
    included), from LibCST's tree, for a text CPython refuses (newer syntax than the running
    Python's: source.py), where no CPython tree places statements: the code of the statements
    before the one asked for is generated once and its lines counted (a fifth of a parse at
    most). A node is then placed in its whole top-level statement."""

    def __init__(self, module: cst.Module) -> None:
        self.module = module
        self._starts: list[int] = [1 + len(module.header)]  # of the statements counted so far, and the next

    def code_start(self, statement: cst.CSTNode) -> int:
        body = self.module.body
        index = next((i for i, s in enumerate(body) if s is statement), None)
        if index is None:
            raise _Unmapped
        while len(self._starts) <= index:
            counted = body[len(self._starts) - 1]
            self._starts.append(self._starts[-1] + len(physical_lines(self.module.code_for_node(counted))))
        return self._starts[index]


class _Pieces:
    """The top-level statements from their lines (statement_bounds), each compiled alone when a
    node inside its block is placed: placing one node in torch's largest module (1.4 MB, a
    statement 11,000 lines long) compiled all of it, a 44 MB tree held and about 100 MB more for
    a moment, in the middle of a run. Statements that share a line (`a = 1; b = 2`, or one
    ending where the next begins) are compiled together; anything unexpected compiles the
    whole text."""

    def __init__(self, text: str, bounds: array, lines) -> None:
        self.text, self.bounds, self.lines = text, bounds, lines  # lines(): the text's lines, without endings
        self._compiled: dict[int, tuple[ast.stmt, int]] = {}  # index -> (statement, lines to add)

    def first_line(self, index: int) -> int:
        return self.bounds[3 * index]

    def inside(self, statement: ast.stmt, offset: int) -> int:
        return offset

    def is_compound(self, index: int) -> bool:
        return bool(self.bounds[3 * index + 2])

    def statement(self, index: int) -> tuple[ast.stmt, int]:
        found = self._compiled.get(index)
        if found is None:
            self._compile_around(index)
            found = self._compiled[index]
        return found

    def _compile_around(self, index: int) -> None:
        first, last, count = self.first_line, lambda i: self.bounds[3 * i + 1], len(self.bounds) // 3
        if not 0 <= index < count:
            raise IndexError(index)
        low = high = index
        while low > 0 and last(low - 1) >= first(low):
            low -= 1
        while high + 1 < count and first(high + 1) <= last(high):
            high += 1
        piece = "\n".join(self.lines()[first(low) - 1 : last(high)])
        try:
            body = compile(piece, "<piece>", "exec", flags=ast.PyCF_ONLY_AST, dont_inherit=True).body
        except (SyntaxError, RecursionError, MemoryError, ValueError):
            body = []
        if len(body) == high - low + 1 and all(_first_line(s) + first(low) - 1 == first(low + i) for i, s in enumerate(body)):
            for i, statement in enumerate(body):
                self._compiled[low + i] = (statement, first(low) - 1)
        else:  # not as the whole text's compile had it: compile the whole text
            whole = compile(self.text, "<text>", "exec", flags=ast.PyCF_ONLY_AST, dont_inherit=True).body
            self._compiled = {i: (statement, 0) for i, statement in enumerate(whole)}


def code_ranges(module: cst.Module):
    """LibCST's PositionProvider ranges of every node of `module`, from one generation of its
    code. (MetadataWrapper.resolve first walks the whole tree for the providers that visit it,
    which this one does not: half the time, on the few statements a finding is placed in.)
    Through the wrapper where LibCST's provider is built otherwise."""
    try:
        provider = PositionProvider()
        provider._gen_impl(module)
        return provider._computed
    except (AttributeError, TypeError):
        return MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)


def string_last_rows_of(module: cst.Module) -> dict[int, int]:
    """source.string_last_rows from LibCST's tree, for a text CPython refuses (newer syntax than
    the running Python's, whose tokenizer reads a 3.12 f-string's replacement fields over lines
    as strings that end early): row -> the last row of the outermost multi-line string there, as
    Python 3.12's tokens have it (an f-string from its start to its end)."""
    strings, pending = [], [module]
    while pending:
        node = pending.pop()
        if isinstance(node, (cst.SimpleString, cst.FormattedString)):
            strings.append(node)  # (not gone into: an outer string's rows win, as tokens go)
        else:
            pending.extend(node.children)
    multi_line = [node for node in strings if len(line_texts(module.code_for_node(node))) > 1]
    if not multi_line:
        return {}
    ranges, last_rows = code_ranges(module), {}
    for node in multi_line:
        where = ranges[node]
        for row in range(where.start.line, where.end.line):
            last_rows[row] = where.end.line
    return last_rows


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


def _span(rng, offset: int) -> Span:
    return (rng.start.line + offset, rng.start.column + 1, rng.end.line + offset, rng.end.column + 1)
