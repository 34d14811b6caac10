"""Small questions about CST nodes that many modules ask."""

from __future__ import annotations

from ast import literal_eval
from functools import lru_cache

import libcst as cst


def arg(call: cst.Call, position: int | None, keyword: str | None) -> cst.BaseExpression | None:
    """The argument bound to a parameter, by keyword or by position (before any *args)."""
    if keyword is not None:
        for a in call.args:
            if a.keyword is not None and a.keyword.value == keyword:
                return a.value
    if position is None:
        return None
    positional = []
    for a in call.args:
        if a.keyword is not None:
            break
        if a.star:
            return None
        positional.append(a.value)
    return positional[position] if position < len(positional) else None


def evaluated_string(node: cst.SimpleString | cst.ConcatenatedString) -> str | bytes | None:
    """`node.evaluated_value`, without `ast.literal_eval` for the common literal.

    LibCST evaluates every string with `literal_eval` (a compile per call: 0.6 s of a 14 s run
    on a 315-file repository). A literal with no escape to decode is its own text between the
    quotes; anything else (escapes, bytes, `\\r`) still goes to `literal_eval`."""
    if isinstance(node, cst.SimpleString):
        return _simple_string_value(node.value)
    if isinstance(node.left, cst.FormattedString) or isinstance(node.right, cst.FormattedString):
        return None  # as LibCST: an f-string cannot be evaluated
    left, right = evaluated_string(node.left), evaluated_string(node.right)
    if isinstance(left, str) and isinstance(right, str) or isinstance(left, bytes) and isinstance(right, bytes):
        return left + right
    return None


@lru_cache(maxsize=16384)
def _simple_string_value(text: str) -> str | bytes:
    start = 0
    while text[start] not in "'\"":
        start += 1
    prefix = text[:start].lower()
    quote = text[start : start + 3] if text[start : start + 3] in ('"""', "'''") else text[start]
    inner = text[start + len(quote) : len(text) - len(quote)]
    if "b" not in prefix and "\r" not in inner and ("\\" not in inner or "r" in prefix):
        return inner
    return literal_eval(text)
