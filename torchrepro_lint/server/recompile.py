"""CPython's verdict on an edited buffer, compiling only the statements the edit touched.

The language server compiles every new text of a buffer (LibCST accepts some code CPython
refuses, and CPython's tree places findings: parsing/positions.py). A whole compile of timm's
train.py takes 10-15 ms; an edit usually touches one top-level statement. The statements before
the edit and after it are unchanged text, each a complete top-level statement, so the text
compiles exactly when the lines between them do: those lines are compiled alone. Where they do
not (an `else:` typed after an unchanged `if`), the whole text is compiled, for CPython's own
message and position.

Inside one top-level statement the same holds for a body (`_Inner`): an edit inside `main()`
compiles the touched statements of the innermost body holding it (6 ms for all of train.py's
`main()`, about 1 ms now), and anything unexpected compiles the top-level statement instead.

The tree given back reuses the previous tree's statements after the edit without renumbering
them (that would walk them all): `offsets` says by how many lines each top-level statement's
line numbers are behind the text, and `nested` the same for statements inside them that an edit
moved, on top of their block's.
"""

from __future__ import annotations

import ast
import copy
from dataclasses import dataclass, field
from pathlib import Path

from torchrepro_lint.parsing.positions import LineOffsets
from torchrepro_lint.parsing.reparse import edit_span
from torchrepro_lint.parsing.source import ParseFailure, SourceFile


@dataclass(frozen=True)
class Compiled:
    text: str
    tree: ast.Module | None  # None: CPython refused the text and LibCST read it (`module`)
    offsets: tuple[int, ...]  # lines to add to each top-level statement's line numbers
    # Statements inside top-level ones that an edit moved: id -> (statement, lines to add on
    # top of what the statement around it gets); the placing code adds them on the way down
    nested: dict = field(default_factory=dict)
    # Where `tree` is None, newer syntax than the running Python's (source.newer_syntax): LibCST's
    # tree of the text, parsed to say so, which the engine takes instead of parsing it again
    module: object = None

    def line_offsets(self) -> LineOffsets:
        return LineOffsets(self.offsets, self.nested)


def compile_text(path: Path, text: str, previous: Compiled | None = None) -> Compiled | ParseFailure:
    """`text` compiled (from `previous`, the buffer's last text that compiled, where it helps),
    or the ParseFailure saying why it does not compile. A text CPython refuses and LibCST
    reads (newer syntax than the running Python's) compiles, without CPython's tree: it is
    linted as the command line lints it, LibCST's tree placing its findings."""
    if previous is not None and previous.tree is not None:
        found = _recompiled(path, previous, text)
        if found is not None:
            return found
    source = SourceFile(path, text)
    try:
        tree = source._compile()
    except ParseFailure as failure:
        return failure
    if tree is None:
        return Compiled(text, None, (), module=source.module)
    return Compiled(text, tree, (0,) * len(tree.body))


def _recompiled(path: Path, previous: Compiled, text: str) -> Compiled | None:
    _, new, (same_start, changed_end, delta) = edit_span(previous.text, text)
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
    if after == kept + 1:  # one top-level statement: only the touched statements of its innermost body
        inner = _Inner(path, previous.nested, new, same_start, changed_end, delta).statement(body[kept], offsets[kept])
        if inner is not None:
            statement, nested = inner
            statements = [*body[:kept], statement, *body[after:]]
            shifted = (*offsets[:kept], offsets[kept], *(offset + delta for offset in offsets[after:]))
            return Compiled(text, ast.Module(body=statements, type_ignores=[]), shifted, nested)
    try:  # (behind `begin` empty lines, its line numbers are the text's: no renumbering walk)
        tree = compile("\n" * begin + middle, str(path), "exec", flags=ast.PyCF_ONLY_AST, dont_inherit=True)
    except (SyntaxError, RecursionError, MemoryError, ValueError):
        return None
    statements = [*body[:kept], *tree.body, *body[after:]]
    shifted = (*offsets[:kept], *(0,) * len(tree.body), *(offset + delta for offset in offsets[after:]))
    return Compiled(text, ast.Module(body=statements, type_ignores=[]), shifted, _without(previous.nested, body[kept:after]))


# Statements whose `body` the edit may be looked for in (CPython's classes)
_BODIES = (
    ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.For, ast.AsyncFor, ast.While, ast.With, ast.AsyncWith,
    ast.If, ast.Try,
) + ((ast.TryStar,) if hasattr(ast, "TryStar") else ())


class _Inner:
    """The touched statements of the innermost body holding an edit, compiled alone behind an
    `if 1:` that gives them their indentation (CPython's parser reads a statement the same in
    any block; it is the compiler, not run here, that checks `return` or `await` against the
    function around them). The statements on the way down are copies with the new body; those
    after the edit in each body are moved by the edit's lines (`nested`)."""

    def __init__(self, path: Path, nested: dict, new: list[str], same_start: int, changed_end: int, delta: int) -> None:
        self.path, self.nested, self.new = path, nested, new
        self.same_start, self.changed_end, self.delta = same_start, changed_end, delta

    def extra(self, statement: ast.stmt) -> int:
        found = self.nested.get(id(statement))
        return found[1] if found is not None and found[0] is statement else 0

    def statement(self, top: ast.stmt, offset: int):
        """(the top-level statement's copy, the new nested offsets), or None: compile it whole."""
        chain = []  # (statement, its offset, its body's offsets, kept, after)
        node, node_offset = top, offset
        while isinstance(node, _BODIES) and node.body:
            body = node.body
            offsets = [node_offset + self.extra(s) for s in body]
            first, last = _first_line(body[0]) + offsets[0], body[-1].end_lineno + offsets[-1]
            if not (first - 1 <= self.same_start < last and self.changed_end <= last):
                break  # the edit touches the statement's own lines, or lines after its body
            kept = 0
            while kept < len(body) and body[kept].end_lineno + offsets[kept] <= self.same_start:
                kept += 1
            after = kept
            while after < len(body) and _first_line(body[after]) + offsets[after] - 1 < self.changed_end:
                after += 1
            chain.append((node, node_offset, offsets, kept, after))
            if after != kept + 1:
                break
            node, node_offset = body[kept], offsets[kept]
        if not chain:
            return None
        node, node_offset, offsets, kept, after = chain[-1]
        body = node.body
        if 0 < kept < len(body) and body[kept - 1].end_lineno + offsets[kept - 1] >= _first_line(body[kept]) + offsets[kept]:
            return None  # a statement sharing a line with the one before (`a = 1; b = \`)
        if 0 < after < len(body) and body[after - 1].end_lineno + offsets[after - 1] >= _first_line(body[after]) + offsets[after]:
            return None
        begin = body[kept - 1].end_lineno + offsets[kept - 1] if kept else _first_line(body[0]) + offsets[0] - 1
        end = _first_line(body[after]) + offsets[after] - 1 + self.delta if after < len(body) else body[-1].end_lineno + offsets[-1] + self.delta
        fragment = "".join(self.new[begin:end])
        if begin < 1 or not fragment.strip() or "__future__" in fragment:
            return None
        try:  # (the wrapper on line `begin`: the fragment's line numbers are the text's)
            tree = compile("\n" * (begin - 1) + "if 1:\n" + fragment, str(self.path), "exec", flags=ast.PyCF_ONLY_AST, dont_inherit=True)
        except (SyntaxError, RecursionError, MemoryError, ValueError):
            return None
        if len(tree.body) != 1 or not isinstance(tree.body[0], ast.If) or tree.body[0].lineno != begin:
            return None  # a line left the block (less indented): compile the top-level statement
        column = body[kept].col_offset if kept < len(body) else body[-1].col_offset
        if any(statement.col_offset != column for statement in tree.body[0].body):
            return None  # more indented: the lines belong to a statement before (a loop's body)
        nested = _without(self.nested, body[kept:after])
        replaced = [*body[:kept], *tree.body[0].body, *body[after:]]
        for statement in tree.body[0].body:  # compiled with the text's own line numbers
            nested[id(statement)] = (statement, -node_offset)
        for depth in range(len(chain) - 1, -1, -1):
            node, node_offset, offsets, kept, after = chain[depth]
            if depth < len(chain) - 1:
                replaced = [*node.body[:kept], replaced_node, *node.body[kept + 1 :]]
            for statement in node.body[after:] if depth == len(chain) - 1 else node.body[kept + 1 :]:
                nested[id(statement)] = (statement, self.extra(statement) + self.delta)
            replaced_node = copy.copy(node)
            replaced_node.body = replaced
            replaced_node.end_lineno = node.end_lineno + self.delta
            nested.pop(id(node), None)
            if depth > 0:  # (the copy sits where the node was: the same lines to add)
                nested[id(replaced_node)] = (replaced_node, self.extra(node))
        return replaced_node, nested


def _without(nested: dict, replaced) -> dict:
    """A copy of `nested` without the entries of the statements in `replaced` and inside them."""
    if not nested:
        return {}
    out = dict(nested)
    pending = list(replaced)
    while pending:
        statement = pending.pop()
        out.pop(id(statement), None)
        for name in ("body", "orelse", "finalbody", "handlers"):
            pending.extend(s for s in getattr(statement, name, ()) if isinstance(s, (ast.stmt, ast.excepthandler)))
    return out


def statement_lines(compiled: Compiled) -> list[tuple[str, int, int]]:
    """Each statement down `body` chains, in order, with its first and last line in the text:
    for the checks that a tree compiled in part is the whole one (tests, reparse_fuzz.py)."""
    offsets = compiled.line_offsets()
    out: list[tuple[str, int, int]] = []
    pending = [(statement, compiled.offsets[i]) for i, statement in enumerate(compiled.tree.body)]
    pending.reverse()
    while pending:
        statement, offset = pending.pop()
        out.append((type(statement).__name__, _first_line(statement) + offset, statement.end_lineno + offset))
        body = getattr(statement, "body", None)
        if isinstance(body, list):
            pending.extend(reversed([(inner, offset + offsets.inside(inner)) for inner in body]))
    return out


def _first_line(statement: ast.stmt) -> int:
    decorators = getattr(statement, "decorator_list", None)
    return min(d.lineno for d in decorators) if decorators else statement.lineno
