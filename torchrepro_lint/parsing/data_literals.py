"""Large tables of constants, which LibCST reads as blanks of the same shape.

A table of numbers costs LibCST about 1.3 KB of memory per character of source: torch's
`sparse/_triton_ops_meta.py` (500 KB, nearly all tuning tables) takes 640 MB to parse, a
language server editing any module of torch went over 1 GiB when a finding needed that tree.
Nothing in a table of constants seeds, draws, picks a device or runs an op, so LibCST is given
the text with each such table's inside replaced by spaces, its line breaks kept: every other
node keeps its row and column, and the tree of `{ ... }` is an empty dict of the same span.

What is blanked: a dict, list or parenthesized tuple display of at least BLANKED_SIZE
characters, holding only constants (numbers, strings, bytes, None, booleans, signs, nested
displays of them), written directly in the value of an assignment or inside displays there, at
module level or in a class body (not in a function: see _BLOCKS).
Never a set (TRP602 reads the order of sets of strings), never `__all__` (star imports read
it), never an argument of a call. A table holds no ref of the IR (refs go to calls, effects,
definitions, guards and imports), so a tree of the same text parsed without blanks (an editor's
buffer, where an edit inside a table parsed its statement again: parsing/reparse.py) gives the
same refs. The original text stays the file's text: noqa comments,
fixes and positions all use it; `SourceFile.holds_blank` lets a fix refuse to rewrite a span
that holds a blank (its generated code would lose the table).
"""

from __future__ import annotations

import ast
from bisect import bisect_right

from torchrepro_lint.parsing.lines import line_starts

BLANKED_SIZE = 16_384  # characters: below this, a table's tree costs less than 20 MB

Blank = tuple[int, int]  # character offsets of a display's inside (after its opening bracket, before its closing one)

_CLOSING = {"{": "}", "[": "]", "(": ")"}
# What holds statements, and where: class bodies and the blocks of module-level and class-level
# statements (`if`, `try`, `with`, ...), not function bodies, which are most of a large module's
# statements (walking them was most of the cost) and hold tables only rarely.
_BLOCKS = {
    getattr(ast, name): fields for name, fields in (
        ("ClassDef", ("body",)), ("If", ("body", "orelse")), ("For", ("body", "orelse")),
        ("AsyncFor", ("body", "orelse")), ("While", ("body", "orelse")), ("With", ("body",)),
        ("AsyncWith", ("body",)), ("Try", ("body", "handlers", "orelse", "finalbody")),
        ("TryStar", ("body", "handlers", "orelse", "finalbody")), ("ExceptHandler", ("body",)),
        ("Match", ("cases",)), ("match_case", ("body",)),
    ) if hasattr(ast, name)
}
_DISPLAYS = (ast.Dict, ast.List, ast.Tuple)


def blanks(text: str, tree: ast.Module | None = None) -> tuple[Blank, ...]:
    """The insides of the text's large constant tables; `tree`: CPython's, if at hand."""
    if len(text) < BLANKED_SIZE:
        return ()
    if tree is None:
        try:
            tree = compile(text, "<text>", "exec", flags=ast.PyCF_ONLY_AST, dont_inherit=True)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return ()
    starts: list[int] | None = None  # character offset of each line (built on the first candidate)
    found: list[Blank] = []
    for value in _assigned_values(tree.body):
        if value.end_lineno is None:
            continue
        if value.end_lineno == value.lineno and value.end_col_offset - value.col_offset < BLANKED_SIZE:
            continue  # (one line, shorter in bytes than the size in characters)
        if starts is None:
            starts = line_starts(text)
        found.extend(_large_tables(value, text, starts))
    return tuple(sorted(found))


def blanked_text(text: str, spans: tuple[Blank, ...]) -> str:
    """`text` with each span's characters but line breaks turned into spaces."""
    if not spans:
        return text
    pieces, at = [], 0
    for start, end in spans:
        pieces.append(text[at:start])
        pieces.append("".join(c if c in "\r\n" else " " for c in text[start:end]))
        at = end
    pieces.append(text[at:])
    return "".join(pieces)


def rows_of(text: str, spans: tuple[Blank, ...]) -> tuple[tuple[int, int], ...]:
    """The first and last 1-based row of each span."""
    if not spans:
        return ()
    starts = line_starts(text)
    return tuple((_row(starts, start), _row(starts, end)) for start, end in spans)


def _assigned_values(body: list[ast.stmt]) -> list[ast.expr]:
    """The displays assigned in these statements and in the blocks inside them (_BLOCKS)."""
    values, pending = [], list(body)
    while pending:
        statement = pending.pop()
        kind = type(statement)
        if kind is ast.Assign or kind is ast.AnnAssign:
            value = statement.value
            targets = statement.targets if kind is ast.Assign else (statement.target,)
            if isinstance(value, _DISPLAYS) and not any(_is_all(t) for t in targets):
                values.append(value)
            continue
        fields = _BLOCKS.get(kind)
        if fields is not None:
            for name in fields:
                pending.extend(getattr(statement, name))
    return values


def _is_all(target: ast.expr) -> bool:
    return isinstance(target, ast.Name) and target.id == "__all__"


def _large_tables(value: ast.expr, text: str, starts: list[int]):
    """The outermost large constant displays in `value`, going down through displays only."""
    if not isinstance(value, (ast.Dict, ast.List, ast.Tuple)):
        return
    start = _offset(text, starts, value.lineno, value.col_offset)
    end = _offset(text, starts, value.end_lineno, value.end_col_offset)
    if start is None or end is None or end - start < BLANKED_SIZE:
        return
    opening = text[start]
    if opening not in _CLOSING or text[end - 1] != _CLOSING[opening]:
        return  # a tuple without parentheses, or positions we cannot trust
    if _constant(value):
        yield (start + 1, end - 1)
        return
    children = value.elts if not isinstance(value, ast.Dict) else [v for pair in zip(value.keys, value.values) for v in pair]
    for child in children:
        if child is not None:
            yield from _large_tables(child, text, starts)


def _constant(node: ast.expr) -> bool:
    # Iterative: a table may hold a hundred thousand numbers
    pending = [node]
    while pending:
        node = pending.pop()
        if isinstance(node, ast.Constant):
            continue
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            pending.append(node.operand)
        elif isinstance(node, ast.Dict):
            if any(key is None for key in node.keys):  # `**other`
                return False
            pending.extend(node.keys)
            pending.extend(node.values)
        elif isinstance(node, (ast.List, ast.Tuple)):
            pending.extend(node.elts)
        else:
            return False
    return True


def _offset(text: str, starts: list[int], row: int, byte_column: int) -> int | None:
    """The character offset of CPython's (1-based row, UTF-8 byte column)."""
    if not 1 <= row < len(starts):
        return None
    line = text[starts[row - 1] : starts[row]]
    if line.isascii():
        return starts[row - 1] + byte_column
    return starts[row - 1] + len(line.encode("utf-8")[:byte_column].decode("utf-8", errors="replace"))


def _row(starts: list[int], offset: int) -> int:
    return bisect_right(starts, offset)
