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
def _simple_string_value(text: str) -> str | bytes | None:
    start = 0
    while text[start] not in "'\"":
        start += 1
    prefix = text[:start].lower()
    quote = text[start : start + 3] if text[start : start + 3] in ('"""', "'''") else text[start]
    inner = text[start + len(quote) : len(text) - len(quote)]
    if "b" not in prefix and "\r" not in inner and ("\\" not in inner or "r" in prefix):
        return inner
    try:
        return literal_eval(text)
    except (SyntaxError, ValueError):  # (`"\x1"`: LibCST reads it, in a file CPython refused as newer syntax)
        return None


def is_none(expr: cst.BaseExpression | None) -> bool:
    return isinstance(expr, cst.Name) and expr.value == "None"


def int_value(expr: cst.BaseExpression | None) -> int | None:
    """The value of an integer literal (`3`, `-1`), else None."""
    if isinstance(expr, cst.Integer):
        return int(expr.value.replace("_", ""), 0)
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Minus):
        inner = int_value(expr.expression)
        return -inner if inner is not None else None
    return None


def bool_value(expr: cst.BaseExpression | None) -> bool | None:
    if isinstance(expr, cst.Name) and expr.value in ("True", "False"):
        return expr.value == "True"
    return None


def string_value(expr: cst.BaseExpression | None) -> str | None:
    if isinstance(expr, cst.SimpleString):
        value = evaluated_string(expr)
        return value if isinstance(value, str) else None
    return None


def self_attribute(expr: cst.BaseExpression) -> str | None:
    """`self.x` -> "x" (the receiver must be a plain name; the caller checks it is `self`)."""
    if isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name) and expr.value.value == "self":
        return expr.attr.value
    return None


def method_name(call: cst.Call) -> str | None:
    return call.func.attr.value if isinstance(call.func, cst.Attribute) else None


def assign_targets(node: cst.CSTNode) -> list[cst.BaseExpression]:
    if isinstance(node, cst.Assign):
        return [t.target for t in node.targets]
    if isinstance(node, (cst.AnnAssign, cst.AugAssign, cst.NamedExpr)):
        return [node.target]
    return []


def subtree(node: cst.CSTNode, skip: tuple[type, ...] = ()):
    """`node` and its descendants in source order, not entering nested `skip` nodes."""
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        if current is not node and isinstance(current, skip):
            continue
        stack.extend(reversed(current.children))


def expression_code(module: cst.Module, node: cst.BaseExpression) -> str:
    """`module.code_for_node(node)` for a parsed expression, without LibCST's code generator
    for the common shapes (names, calls, comparisons, `and`/`or`, subscripts, operators on one
    line). The generator costs two context managers per node: 13% of lowering a large project.
    Anything else (a comment or line break inside, a lambda, a literal collection) goes to LibCST.
    """
    out: list[str] = []
    try:
        _emit(node, out)
    except _Unusual:
        return module.code_for_node(node)
    return "".join(out)


class _Unusual(Exception):
    """A node or whitespace `_emit` leaves to LibCST."""


def _space(whitespace, out: list[str]) -> None:
    if type(whitespace) is not cst.SimpleWhitespace:
        raise _Unusual  # a line break, a comment: LibCST knows the indentation rules
    if whitespace.value:
        out.append(whitespace.value)


def _emit(node, out: list[str]) -> None:
    emit = _EMITTERS.get(type(node))
    if emit is None:
        raise _Unusual
    lpar = getattr(node, "lpar", ())
    for paren in lpar:
        out.append("(")
        _space(paren.whitespace_after, out)
    emit(node, out)
    for paren in getattr(node, "rpar", ()):
        _space(paren.whitespace_before, out)
        out.append(")")


def _token(node, out: list[str]) -> None:
    out.append(node.value)


def _attribute(node: cst.Attribute, out: list[str]) -> None:
    _emit(node.value, out)
    _one_token_op(node.dot, ".", out)
    _emit(node.attr, out)


def _call(node: cst.Call, out: list[str]) -> None:
    _emit(node.func, out)
    _space(node.whitespace_after_func, out)
    out.append("(")
    _space(node.whitespace_before_args, out)
    for argument in node.args:
        out.append(argument.star)
        _space(argument.whitespace_after_star, out)
        if argument.keyword is not None:
            _emit(argument.keyword, out)
            if not isinstance(argument.equal, cst.AssignEqual):
                raise _Unusual  # (a built node's default ` = `)
            _one_token_op(argument.equal, "=", out)
        _emit(argument.value, out)
        _comma(argument.comma, out)
        _space(argument.whitespace_after_arg, out)
    out.append(")")


def _comma(comma, out: list[str]) -> None:
    if isinstance(comma, cst.Comma):
        _one_token_op(comma, ",", out)
    elif comma is not cst.MaybeSentinel.DEFAULT:
        raise _Unusual


def _one_token_op(op, token: str, out: list[str]) -> None:
    _space(op.whitespace_before, out)
    out.append(token)
    _space(op.whitespace_after, out)


def _operator(op, out: list[str]) -> None:
    tokens = _OPERATORS.get(type(op))
    if tokens is None:
        raise _Unusual
    _space(op.whitespace_before, out)
    if type(tokens) is tuple:  # `not in`, `is not`
        out.append(tokens[0])
        _space(op.whitespace_between, out)
        out.append(tokens[1])
    else:
        out.append(tokens)
    _space(op.whitespace_after, out)


def _comparison(node: cst.Comparison, out: list[str]) -> None:
    _emit(node.left, out)
    for target in node.comparisons:
        _operator(target.operator, out)
        _emit(target.comparator, out)


def _binary(node: cst.BinaryOperation | cst.BooleanOperation, out: list[str]) -> None:
    _emit(node.left, out)
    _operator(node.operator, out)
    _emit(node.right, out)


def _unary(node: cst.UnaryOperation, out: list[str]) -> None:
    token = _UNARY.get(type(node.operator))
    if token is None:
        raise _Unusual
    out.append(token)
    _space(node.operator.whitespace_after, out)
    _emit(node.expression, out)


def _subscript(node: cst.Subscript, out: list[str]) -> None:
    _emit(node.value, out)
    _space(node.whitespace_after_value, out)
    out.append("[")
    _space(node.lbracket.whitespace_after, out)
    for element in node.slice:
        index = element.slice
        if type(index) is not cst.Index or index.star is not None or index.whitespace_after_star is not None:
            raise _Unusual  # slices `a:b`, `*x`
        _emit(index.value, out)
        _comma(element.comma, out)
    _space(node.rbracket.whitespace_before, out)
    out.append("]")


_EMITTERS = {
    cst.Name: _token,
    cst.Integer: _token,
    cst.Float: _token,
    cst.SimpleString: _token,
    cst.Attribute: _attribute,
    cst.Call: _call,
    cst.Comparison: _comparison,
    cst.BooleanOperation: _binary,
    cst.BinaryOperation: _binary,
    cst.UnaryOperation: _unary,
    cst.Subscript: _subscript,
}
_UNARY = {cst.Not: "not", cst.Minus: "-", cst.Plus: "+", cst.BitInvert: "~"}
_OPERATORS: dict[type, str | tuple[str, str]] = {
    cst.And: "and", cst.Or: "or",
    cst.Equal: "==", cst.NotEqual: "!=", cst.LessThan: "<", cst.LessThanEqual: "<=", cst.GreaterThan: ">",
    cst.GreaterThanEqual: ">=", cst.In: "in", cst.Is: "is", cst.NotIn: ("not", "in"), cst.IsNot: ("is", "not"),
    cst.Add: "+", cst.Subtract: "-", cst.Multiply: "*", cst.Divide: "/", cst.FloorDivide: "//", cst.Modulo: "%",
    cst.Power: "**", cst.MatrixMultiply: "@", cst.LeftShift: "<<", cst.RightShift: ">>", cst.BitAnd: "&",
    cst.BitOr: "|", cst.BitXor: "^",
}


def descendants(node: cst.CSTNode):
    """`node` and every node below it, in source order (iteratively: deep code is no recursion limit)."""
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(reversed(current.children))
