"""Literal values in the syntax tree: `True`, `None`, strings, numbers, `-1`.

`literal_value(expr)` is the value an expression spells out, or a default where it spells
none; the lowering reads conditions, arguments and assigned values with it.
"""

from __future__ import annotations

import libcst as cst

from torchrepro_lint.analysis.syntax import evaluated_string


MISSING = object()  # literal_value's default where None is a literal the caller must tell apart


def literal_value(expr: cst.BaseExpression | None, default=None):
    if isinstance(expr, cst.Name) and expr.value in ("True", "False", "None"):
        return {"True": True, "False": False, "None": None}[expr.value]
    if isinstance(expr, (cst.SimpleString, cst.ConcatenatedString)):
        value = evaluated_string(expr)
        return value if isinstance(value, str) else default
    if isinstance(expr, cst.Integer):
        try:
            return int(expr.value, 0)
        except ValueError:
            return default
    if isinstance(expr, cst.Float):
        return float(expr.value)
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Minus):
        inner = literal_value(expr.expression, default)
        return -inner if isinstance(inner, (int, float)) and not isinstance(inner, bool) else default
    return default


def is_none(expr: cst.BaseExpression | None) -> bool:
    return isinstance(expr, cst.Name) and expr.value == "None"


def is_false(expr: cst.BaseExpression | None) -> bool:
    return literal_value(expr, MISSING) in (False, 0)
