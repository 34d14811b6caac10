"""Ops built in a branch that a function takes for one value of its parameter.

Diffusion code (and the many repositories that copied it) builds layers through helpers such
as `avg_pool_nd(dims, ...)`: `if dims == 1: nn.AvgPool1d ... elif dims == 3: nn.AvgPool3d`.
The 3-D pool has no deterministic CUDA backward, but it is built only when a caller passes
`dims=3`; in an image model nothing does. Like any other unknown, a branch that nothing is shown
to select is not a match: the op is matched only where the project calls the function with a
literal that selects the branch (or omits the argument and the default does).

Deliberately narrow: module-level functions, `if <parameter> == <literal>` (either side, an
`elif` too) and `if <parameter> in (<literals>)`, the call in the branch's body. A value that
comes from configuration (`dims=cfg.dims`) cannot be known here, so such a project is not
reported (documented on TRP401/TRP402's pages).
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from torchrepro_lint.analysis.dataflow.core import flow, named
from torchrepro_lint.analysis.literals import MISSING, literal_value
from torchrepro_lint.analysis.module_index import ModuleIndex
from torchrepro_lint.analysis.op_matching.gradients import defined_at_module_level


@dataclass(frozen=True)
class Branch:
    """`function` runs the call only when its parameter `name` (at `position`, None when
    keyword-only) is one of `values`."""

    function: str  # the module-level function's name
    name: str
    position: int | None
    default: tuple  # (the default's literal value,), () when it has none or it is not a literal
    values: frozenset


def selecting_branch(index: ModuleIndex, call: cst.Call) -> Branch | None:
    """The parameter test a call is built under, when the call is in the body of an
    `if <parameter> == <literal>` of a module-level function (the innermost such test)."""
    child: cst.CSTNode = call
    for ancestor in index.ancestors(call):
        if isinstance(ancestor, (cst.FunctionDef, cst.Lambda, cst.ClassDef)):
            return None  # no test between the call and its function
        if isinstance(ancestor, cst.If) and child is ancestor.body:
            found = _parameter_test(index, ancestor.test)
            if found is not None:
                return found
        child = ancestor
    return None


def _parameter_test(index: ModuleIndex, test: cst.BaseExpression) -> Branch | None:
    if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1:
        return None
    target = test.comparisons[0]
    left, right = test.left, target.comparator
    if isinstance(target.operator, cst.Equal):
        name, literal = (left, right) if isinstance(left, cst.Name) else (right, left)
        value = literal_value(literal, MISSING)
        values = frozenset() if value is MISSING else frozenset({value})
    elif isinstance(target.operator, cst.In) and isinstance(right, (cst.Tuple, cst.List, cst.Set)):
        name = left
        found = [literal_value(e.value, MISSING) for e in right.elements if isinstance(e, cst.Element)]
        values = frozenset(found) if found and MISSING not in found and len(found) == len(right.elements) else frozenset()
    else:
        return None
    if not values or not isinstance(name, cst.Name):
        return None
    parameter = parameter_of(index, name)
    if parameter is None:
        return None
    return Branch(parameter.function, parameter.name, parameter.position, parameter.default, values)


@dataclass(frozen=True)
class Parameter:
    """A parameter of a module-level function (a version-gated def included), as its callers
    in the project give it."""

    function: str
    name: str
    position: int | None  # None: keyword-only
    default: tuple  # (the default's literal value,), () when it has none or it is not a literal


def parameter_of(index: ModuleIndex, name: cst.Name) -> Parameter | None:
    """The parameter `name` reads, when it is one of a module-level function that never rebinds it."""
    param = flow(index).parameter(name)
    function = index.parents.get(index.parents.get(param)) if param is not None else None
    if not isinstance(function, cst.FunctionDef) or not defined_at_module_level(index, function):
        return None  # (a parameter's parents: Parameters, then its function)
    positional = [*function.params.posonly_params, *function.params.params]
    position = next((i for i, p in enumerate(positional) if p is param), None)
    if position is None and param not in function.params.kwonly_params:
        return None  # *args, **kwargs
    default = literal_value(param.default, MISSING) if param.default is not None else MISSING
    return Parameter(function.name.value, name.value, position, () if default is MISSING else (default,))


def arguments_of_calls(index: ModuleIndex, name: str) -> tuple:
    """The summary: for each call of `name` (as `name(...)` or `<expr>.name(...)`) in a module,
    (what the callee resolves to, its positional arguments, its keyword arguments, whether
    `*args`/`**kwargs` may pass more), each argument as (literal value,) or () when not literal."""
    out = []
    for node in named(index, name):
        call = index.parents.get(node)
        if not isinstance(call, cst.Call) or call.func is not node:
            continue
        positional, keywords, open_ended = [], [], False
        for arg in call.args:
            if arg.star:
                open_ended = True
                continue
            value = _literal_or_tuple(arg.value)
            spelled = () if value is MISSING else (value,)
            if arg.keyword is None:
                positional.append(spelled)
            else:
                keywords.append((arg.keyword.value, spelled))
        out.append((index.resolve(node, node), tuple(positional), tuple(keywords), open_ended))
    return tuple(out)


def _literal_or_tuple(expr: cst.BaseExpression):
    """A literal, or a tuple / list display of literals as a tuple (`(7, 7)`: an output size)."""
    if isinstance(expr, (cst.Tuple, cst.List)):
        items = tuple(literal_value(e.value, MISSING) if isinstance(e, cst.Element) else MISSING for e in expr.elements)
        return MISSING if MISSING in items else items
    return literal_value(expr, MISSING)


def selected(branch: Branch, calls) -> bool:
    """Whether one of the calls (arguments_of_calls records of the function) shows the branch
    taken: a literal among its values for the parameter, or the argument left out where the
    default is one."""
    return any(value in branch.values for value in passed(branch, calls))


def passed(parameter: Parameter | Branch, calls) -> set:
    """The literal values the calls (arguments_of_calls records of the function) give the
    parameter, its default where a call leaves it out; a call whose argument is not a literal,
    or that `*args` / `**kwargs` may give it, adds nothing."""
    out = set()
    for _, positional, keywords, open_ended in calls:
        given = dict(keywords).get(parameter.name)
        if given is None and parameter.position is not None and parameter.position < len(positional):
            given = positional[parameter.position]
        if given is None:
            if open_ended:
                continue  # *args / **kwargs may pass it: unknown
            given = parameter.default
        if given:
            out.add(given[0])
    return out
