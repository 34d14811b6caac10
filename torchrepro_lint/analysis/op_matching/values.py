"""What a call passes and what an expression may hold: the argument bound to a parameter, the
Python values an expression can take (literals, local constants, both arms of `a if c else b`),
how many values a tuple/list display holds, and a value tested against an ``arg`` / ``ctor_arg``
predicate of the catalogue."""

from __future__ import annotations

import libcst as cst

from torchrepro_lint.analysis.dataflow.core import flow
from torchrepro_lint.analysis.module_index import ModuleIndex
from torchrepro_lint.analysis.syntax import evaluated_string
from torchrepro_lint.catalog import Predicate

UNKNOWN = object()
ABSENT = object()


class Values:
    """Possible Python values of an expression (a frozenset), or None when unknown."""

    def __init__(self, index: ModuleIndex) -> None:
        self.index = index
        self.flow = flow(index)

    def of(self, expr: cst.BaseExpression, depth: int = 0) -> frozenset | None:
        if depth > 8:
            return None
        if isinstance(expr, (cst.SimpleString, cst.ConcatenatedString)):
            value = evaluated_string(expr)
            return frozenset({value}) if isinstance(value, str) else None
        if isinstance(expr, cst.Integer):
            return frozenset({int(expr.value.replace("_", ""), 0)})
        if isinstance(expr, cst.Float):
            try:
                return frozenset({float(expr.value.replace("_", ""))})
            except ValueError:
                return None
        if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Minus):
            inner = self.of(expr.expression, depth + 1)
            if inner is None or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in inner):
                return None
            return frozenset(-v for v in inner)
        if isinstance(expr, cst.Name):
            if expr.value in ("True", "False"):
                return frozenset({expr.value == "True"})
            if expr.value == "None":
                return frozenset({None})
            return self._name(expr, depth)
        if isinstance(expr, (cst.Tuple, cst.List)):
            if any(isinstance(e, cst.StarredElement) for e in expr.elements):
                return None
            parts = [self.of(e.value, depth + 1) for e in expr.elements]
            if any(p is None or len(p) != 1 for p in parts):
                return None
            return frozenset({tuple(next(iter(p)) for p in parts)})
        if isinstance(expr, cst.BinaryOperation):
            left, right = self.of(expr.left, depth + 1), self.of(expr.right, depth + 1)
            if left is None or right is None or len(left) != 1 or len(right) != 1:
                return None
            a, b = next(iter(left)), next(iter(right))
            if isinstance(expr.operator, cst.Multiply):
                if isinstance(a, tuple) and isinstance(b, int) and not isinstance(b, bool):
                    return frozenset({a * b})
                if isinstance(b, tuple) and isinstance(a, int) and not isinstance(a, bool):
                    return frozenset({b * a})
            if isinstance(expr.operator, cst.Add) and isinstance(a, tuple) and isinstance(b, tuple):
                return frozenset({a + b})
            return None
        if isinstance(expr, cst.IfExp):
            body, orelse = self.of(expr.body, depth + 1), self.of(expr.orelse, depth + 1)
            return body | orelse if body is not None and orelse is not None else None
        return None

    def _name(self, name: cst.Name, depth: int) -> frozenset | None:
        """Every value assigned to the name before this use in its function (branches are not
        told apart, so `mode = "a"` then `if c: mode = "b"` gives {"a", "b"}); module constants."""
        fl = self.flow
        if fl.parameter(name) is not None:
            return None
        owner = fl.owner(name)
        here = fl.pos(name)
        bindings = [(s, v) for s, v in fl.bindings(name.value, owner) if fl.pos(s) < here and not fl.inside(name, s)]
        if not bindings:
            if owner is fl.index.module or fl.bindings(name.value, owner):
                return None
            bindings = fl.bindings(name.value, fl.index.module)  # a module-level constant
            if not bindings:
                return None
        out: set = set()
        for _, value in bindings:
            found = self.of(value, depth + 1) if value is not None else None
            if found is None:
                return None
            out |= found
        return frozenset(out)


def _same(a, b) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    return a == b


def argument(call: cst.Call, position: int | None, keyword: str | None):
    """The expression passed for a parameter (by keyword, else position); ``ABSENT`` when the call
    does not pass it; ``UNKNOWN`` when ``*args`` / ``**kwargs`` may."""
    for a in call.args:
        if a.keyword is not None and keyword is not None and a.keyword.value == keyword:
            return a.value
    positional = []
    star = False
    for a in call.args:
        if a.keyword is not None or a.star == "**":
            continue
        if a.star == "*":
            star = True
            break
        positional.append(a.value)
    if position is not None and position < len(positional):
        return positional[position]
    if star and position is not None:
        return UNKNOWN
    if any(a.star == "**" for a in call.args):
        return UNKNOWN
    return ABSENT


def display_length(fl, expr: cst.BaseExpression, depth: int = 0) -> int | None:
    """How many values a tuple/list display holds (names, `+` of displays, a display times an
    integer literal (`[k // 2] * 4`), `tuple(...)` / `list(...)` of one, through names every
    binding of which before the use is such a display); None when not fixed by the code."""
    if depth > 6:
        return None
    if isinstance(expr, (cst.Tuple, cst.List)):
        if any(isinstance(e, cst.StarredElement) for e in expr.elements):
            return None
        return len(expr.elements)
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Add):
        left, right = display_length(fl, expr.left, depth + 1), display_length(fl, expr.right, depth + 1)
        return left + right if left is not None and right is not None else None
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Multiply):
        for display, times in ((expr.left, expr.right), (expr.right, expr.left)):
            if isinstance(times, cst.Integer):
                length = display_length(fl, display, depth + 1)
                if length is not None:
                    return length * int(times.value.replace("_", ""), 0)
        return None
    if (
        isinstance(expr, cst.Call) and len(expr.args) == 1 and not expr.args[0].star and expr.args[0].keyword is None
        and fl.index.resolve(expr.func, expr) in ("builtins.tuple", "builtins.list")
    ):  # fmt: skip
        return display_length(fl, expr.args[0].value, depth + 1)
    if isinstance(expr, cst.Name) and fl.parameter(expr) is None:
        here = fl.pos(expr)
        values = [v for s, v in fl.bindings(expr.value, fl.owner(expr)) if fl.pos(s) < here and not fl.inside(expr, s)]
        if not values or any(v is None for v in values):
            return None
        lengths = {display_length(fl, v, depth + 1) for v in values}
        return lengths.pop() if len(lengths) == 1 and None not in lengths else None
    return None


def passes(p: Predicate, value) -> bool | None:
    """Whether `value` passes the predicate's test; None when the test cannot tell."""
    test, wanted = p.test, p.value
    if test == "equals":
        return _same(value, wanted)
    if test == "not_equals":
        return not _same(value, wanted)
    if test == "in":
        return any(_same(value, w) for w in wanted)
    if test == "len":
        return len(value) == wanted if isinstance(value, tuple) else None
    if test in ("all_ones", "not_all_ones"):
        ones = _all_ones(value)
        if ones is None:
            return None
        return ones if test == "all_ones" else not ones
    return None


def _all_ones(value) -> bool | None:
    items = value if isinstance(value, tuple) else (value,)
    if any(isinstance(v, int) and not isinstance(v, bool) and v != 1 for v in items):
        return False
    if all(isinstance(v, int) and not isinstance(v, bool) and v == 1 for v in items):
        return True
    return None  # None elements keep the input's size


def possible_values(index: ModuleIndex, expr) -> frozenset | None:
    """The Python values `expr` may have (literals, local constants, both arms of `a if c else b`)."""
    if not isinstance(expr, cst.BaseExpression):
        return None
    return Values(index).of(expr)
