"""Sets whose iteration order is used (TRP602 for strings, TRP603 for parameters): the
set-valued expressions of a module (`set_sources`) and where `OrderFlow` says their order goes.
"""

from __future__ import annotations

import libcst as cst

from torchrepro_lint.analysis.dataflow.core import flow
from torchrepro_lint.analysis.dataflow.elements import SET_CALLS, SET_OPERATORS, Elements
from torchrepro_lint.analysis.dataflow.order_flow import HAZARD, UNKNOWN, OrderFlow, Verdict
from torchrepro_lint.analysis.module_index import ModuleIndex
from torchrepro_lint.analysis.syntax import method_name

_SET_OPERATOR_TYPES = frozenset(SET_OPERATORS)  # is_set of a BinaryOperation needs one of these
_SET_PRESERVING_METHODS = frozenset({"union", "intersection", "difference", "symmetric_difference", "copy"})


def set_sources(index: ModuleIndex, elements: Elements) -> list:
    """Set-valued expressions that are not part of a bigger set expression, in source order.
    Found once per index (TRP602 and TRP603 both ask; asking every subtraction of a numeric
    module whether it is a set difference follows each operand's binding)."""
    found = index.derived.get("set_sources")
    if found is None:
        found = index.derived["set_sources"] = list(_set_sources(index, elements))
    return found


def _set_sources(index: ModuleIndex, elements: Elements):
    if not (index.nodes_of(cst.Set) or index.nodes_of(cst.SetComp) or index.calls_to(*SET_CALLS)):
        # Every set value starts as one of these (Elements.is_set bottoms out there): without
        # one, no `.copy()` or `|` is asked about, whose names would each need the dataflow.
        return
    data = flow(index)
    for node in index.nodes_of(cst.Set, cst.SetComp, cst.Call, cst.BinaryOperation):
        kind = type(node)
        # A call's site holds `index.resolve(node.func, node)`, resolved once when indexed.
        if kind is cst.Call and index.call_site(node).qualname not in ("builtins.set", "builtins.frozenset"):
            if not (method_name(node) in _SET_PRESERVING_METHODS and elements.is_set(node)):
                continue
        if kind is cst.BinaryOperation and (type(node.operator) not in _SET_OPERATOR_TYPES or not elements.is_set(node)):
            continue
        if _inside_bigger_set(index, data, elements, node):
            continue
        yield node


def _inside_bigger_set(index, data, elements: Elements, node) -> bool:
    parent = data.parents.get(node)
    if isinstance(parent, cst.BinaryOperation) and elements.is_set(parent):
        return True
    if isinstance(parent, cst.Arg):
        call = data.parents.get(parent)
        if isinstance(call, cst.Call) and index.resolve(call.func, call) in ("builtins.set", "builtins.frozenset"):
            return True
        if isinstance(call, cst.Call) and method_name(call) in _SET_PRESERVING_METHODS and elements.is_set(call):
            return True
    if isinstance(parent, cst.Attribute) and parent.value is node:
        call = data.parents.get(parent)
        if isinstance(call, cst.Call) and call.func is parent and parent.attr.value in _SET_PRESERVING_METHODS:
            return True
    return False


def ordered(verdict: Verdict) -> bool:
    """The set's order is used: an order-sensitive sink, or copied into a list that goes
    somewhere we cannot follow (its order is then the set's hash order)."""
    return verdict.kind == HAZARD or (verdict.kind == UNKNOWN and verdict.materialized)


def sink_text(verdict: Verdict) -> str:
    return verdict.sink or "the order of a list built from it"


def ordered_sets(index: ModuleIndex, elements: Elements, order: OrderFlow, kind, reported: set[int]):
    """(where to report, verdict) for each set holding `kind` whose iteration order is used,
    once per reporting node (TRP602 for strings, TRP603 for parameters)."""
    for node in set_sources(index, elements):
        if elements.of_set(node) != kind:
            continue
        verdict = order.of(node)
        if not ordered(verdict):
            continue
        at = verdict.entry if verdict.entry is not None else node
        if id(at) not in reported:
            reported.add(id(at))
            yield at, verdict
