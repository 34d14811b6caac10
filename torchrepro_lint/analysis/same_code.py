"""Whether two LibCST trees of a module hold the same code, apart from the comments and blank
lines between statements; and which node of one is which node of the other.

The language server lowers an edited buffer to IR again on every edit. When the edit only
touched comments or blank lines (`# TODO` typed above a statement, a line broken between two
functions), the IR is the previous one: lowering reads no comment, and the expression texts it
keeps (`expression_code`) are compared here as they are, whitespace and comments inside them
included. Unchanged statements are the same objects after an incremental reparse
(parsing/reparse.py), so only the path down to the edit is compared.
"""

from __future__ import annotations

import dataclasses

import libcst as cst

# Trivia that sits between statements, never inside an expression: blank lines and comment
# lines before a statement or decorator, the end of a statement's line (its comment), the end
# of a block's first line and the lines after its last statement, a module's first and last lines.
_BETWEEN_STATEMENTS = frozenset({"leading_lines", "lines_after_decorators", "trailing_whitespace"})
_BLOCK_EDGES = frozenset({"header", "footer"})
_FIELDS: dict[type, tuple[str, ...]] = {}


def code_lines_differ(old_lines, new_lines) -> bool:
    """Whether the edited lines (`old_lines` became `new_lines`) surely change code: their
    code, each line stripped of whitespace and of a comment that no quote comes before, is not
    the same. False where it cannot tell (a `#` after a quote may be inside a string), and
    where only comments, blank lines or indentation changed: node_pairs decides those.
    A code edit inside a long function (timm's train.py `main`) was compared node by node
    down to the edit, 1-2 ms, only to find the code different."""
    old, new = _code_of(old_lines), _code_of(new_lines)
    return old is not None and new is not None and old != new


def _code_of(lines) -> list[str] | None:
    out = []
    for line in lines:
        cut = line.find("#")
        if cut >= 0:
            if "'" in line[:cut] or '"' in line[:cut]:
                return None
            line = line[:cut]
        line = line.strip()
        if line:
            out.append(line)
    return out


def node_pairs(old: cst.Module, new: cst.Module) -> dict[int, cst.CSTNode] | None:
    """id(old node) -> new node for every node where the two modules' code is the same apart
    from trivia between statements (identical subtrees are not entered: their nodes are
    themselves); None where the code differs."""
    pairs: dict[int, cst.CSTNode] = {}
    return pairs if _same(old, new, pairs) else None


def _fields(cls: type) -> tuple[str, ...]:
    found = _FIELDS.get(cls)
    if found is None:
        edges = _BLOCK_EDGES if cls in (cst.Module, cst.IndentedBlock) else frozenset()
        found = _FIELDS[cls] = tuple(
            f.name for f in dataclasses.fields(cls) if f.name not in _BETWEEN_STATEMENTS and f.name not in edges
        )
    return found


def _same(old, new, pairs: dict) -> bool:
    if old is new:
        return True
    if type(old) is not type(new):
        return False
    if isinstance(old, cst.CSTNode):
        pairs[id(old)] = new
        return all(_same(getattr(old, name), getattr(new, name), pairs) for name in _fields(type(old)))
    if isinstance(old, (list, tuple)):
        return len(old) == len(new) and all(_same(a, b, pairs) for a, b in zip(old, new))
    return old == new
