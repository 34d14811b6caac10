"""The keys of a `**kwargs` dict a call receives, as far as the module shows.

`dict_view(data, expr, at)` follows a literal, `dict(...)`, `.update(...)`, `d[k] = v`,
`{**a, **b}` and `a if c else b`; the `DictView` it returns has `complete` False when part of
the dict is opaque (a parameter, the result of an unknown call).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import libcst as cst

from torchrepro_lint.analysis.syntax import string_value

if TYPE_CHECKING:
    from torchrepro_lint.analysis.dataflow.core import Flow


@dataclass
class DictView:
    """The keys a dict may hold: one option per branch of `a if c else b` (merges multiply)."""

    options: list[dict[str, cst.BaseExpression]]
    complete: bool  # False: part of the dict is opaque, more keys may be there

    @property
    def keys(self) -> dict[str, cst.BaseExpression]:
        out: dict[str, cst.BaseExpression] = {}
        for option in self.options:
            out.update(option)
        return out

    def merged(self, other: DictView) -> DictView:
        options = [{**a, **b} for a in self.options for b in other.options][:16]
        return DictView(options, self.complete and other.complete)

    def either(self, other: DictView) -> DictView:
        return DictView((self.options + other.options)[:16], self.complete and other.complete)

    def set(self, key: str, value: cst.BaseExpression) -> None:
        for option in self.options:
            option[key] = value


def opaque() -> DictView:
    return DictView([{}], False)


def literal(keys: dict[str, cst.BaseExpression] | None = None) -> DictView:
    return DictView([dict(keys or {})], True)


def dict_view(data: Flow, expr: cst.BaseExpression, at: cst.CSTNode, depth: int = 0) -> DictView:
    """The keys an expression holds when it is a dict, as far as this module shows."""
    if depth > 6:
        return opaque()
    if isinstance(expr, cst.Dict):
        view = literal()
        for element in expr.elements:
            if isinstance(element, cst.DictElement):
                key = string_value(element.key)
                if key is None:
                    view.complete = False
                else:
                    view.set(key, element.value)
            else:  # **other
                view = view.merged(dict_view(data, element.value, at, depth + 1))
        return view
    if isinstance(expr, cst.Call) and data.index.resolve(expr.func, at) == "builtins.dict":
        view = literal()
        for a in expr.args:
            if a.keyword is not None:
                view.set(a.keyword.value, a.value)
            else:
                view = view.merged(dict_view(data, a.value, at, depth + 1))
        return view
    if isinstance(expr, cst.IfExp):
        return dict_view(data, expr.body, at, depth + 1).either(dict_view(data, expr.orelse, at, depth + 1))
    if isinstance(expr, cst.Name):
        value = data.reaching_value(expr)
        if value is None:
            return opaque()
        view = dict_view(data, value, value, depth + 1)
        return _dict_updates(data, expr, view, at, depth)
    return opaque()


def _dict_updates(data: Flow, name: cst.Name, view: DictView, at: cst.CSTNode, depth: int) -> DictView:
    """Add what `.update(...)`, `d[k] = v` and `d |= {...}` put into the dict before `at`."""
    owner = data.owner(name)
    limit = data.pos(data.statement(at))
    for use in data.name_uses(name.value, owner):
        if data.pos(use) >= limit:
            continue
        parent = data.parents.get(use)
        if isinstance(parent, cst.Attribute) and parent.value is use:
            call = data.parents.get(parent)
            if isinstance(call, cst.Call) and call.func is parent:
                if parent.attr.value == "update":
                    for a in call.args:
                        if a.keyword is not None:
                            view.set(a.keyword.value, a.value)
                        else:
                            view = view.merged(dict_view(data, a.value, call, depth + 1))
                elif parent.attr.value in ("setdefault",) and call.args:
                    key = string_value(call.args[0].value)
                    if key is None:
                        view.complete = False
                    elif len(call.args) > 1:
                        for option in view.options:
                            option.setdefault(key, call.args[1].value)
                elif parent.attr.value in ("pop", "clear", "popitem"):
                    view.complete = False
        elif isinstance(parent, cst.Subscript) and parent.value is use:
            target_of = data.parents.get(parent)
            if isinstance(target_of, cst.AssignTarget):
                elements = parent.slice
                key = None
                if len(elements) == 1 and isinstance(elements[0].slice, cst.Index):
                    key = string_value(elements[0].slice.value)
                if key is None:
                    view.complete = False
                else:
                    view.set(key, data.parents[target_of].value)
        elif isinstance(parent, cst.AugAssign) and parent.target is use:
            view = view.merged(dict_view(data, parent.value, parent, depth + 1))
    return view
