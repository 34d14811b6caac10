"""Index tensors whose entries are distinct by construction.

`scatter_(dim, index, src)`, `index_copy_(dim, index, source)` and `index_put_((index,), values)`
are nondeterministic only when two writes land on one place (the catalogue's "duplicate
indices"). An index that cannot repeat a value makes every order of the writes give one result:

- a *vector* of distinct positions: `torch.arange`, `torch.randperm`, `torch.unique(x)` /
  `x.unique()` (without `dim`, `return_inverse`, `return_counts`), and the positions of a mask
  from `torch.nonzero(m)` / `m.nonzero()` / `torch.argwhere(m)` once made 1-D (`.flatten()`,
  `.view(-1)`, `.reshape(-1)`, `.squeeze()`, `[:, 0]`). Those forms are how a 1-D mask's
  positions are taken; the mask is assumed 1-D (on a 2-D mask they would mix coordinates);
- a *permutation* along one dim: `torch.argsort(x)` / `x.argsort()`, `torch.sort(x)[1]`,
  `x.sort().indices`, `_, order = x.sort()`. Its entries are distinct along the sort dim only,
  so it counts where the op's index is 1-D or the op works along that same dim.

Followed through local variables, slices (`perm[:k]`: a part of distinct values is distinct) and
value-preserving conversions (`.to(device)`, `.long()`, `.cuda()`). Parameters are unknown.
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from torchrepro_lint.analysis import tensor_evidence as te
from torchrepro_lint.analysis.dataflow.core import Flow
from torchrepro_lint.analysis.module_index import ModuleIndex
from torchrepro_lint.analysis.op_matching.calls import ApiCall
from torchrepro_lint.analysis.op_matching.values import Values, argument

VECTOR, PERMUTATION = "vector", "permutation"
_COORDINATES, _SORTED = "coordinates", "sorted"  # nonzero's (n, ndim) result; sort's (values, indices)

_VECTOR_FACTORIES = frozenset({"torch.arange", "torch.randperm"})
_NONZERO = frozenset({"torch.nonzero", "torch.argwhere"})
_MADE_1D = frozenset({"flatten", "ravel", "squeeze"})  # also `.view(-1)` / `.reshape(-1)`
_SAME_VALUES = frozenset({"to", "long", "int", "cuda", "cpu", "contiguous", "detach", "clone"})
_UNIQUE_SPLITTING = ("dim", "return_inverse", "return_counts")  # a tuple, or rows: not one vector
# method name -> (keyword, position after self) of the index (for index_put_: the tuple of indices)
INDEX_ARGUMENT = {
    "index_copy": ("index", 1), "index_copy_": ("index", 1), "scatter": ("index", 1), "scatter_": ("index", 1),
    "index_put": ("indices", 0), "index_put_": ("indices", 0),
}  # fmt: skip


@dataclass(frozen=True)
class Distinct:
    kind: str  # VECTOR | PERMUTATION (on the way there: _COORDINATES, _SORTED)
    dim: int | None = None  # PERMUTATION: the sort dim (-1 by default); None when not a literal


class DistinctIndices:
    """`of(expr)`: whether an index expression is distinct by construction, as a `Distinct`."""

    def __init__(self, index: ModuleIndex, values: Values) -> None:
        self.index = index
        self.values = values
        self.flow: Flow = values.flow

    def at(self, call: ApiCall) -> bool:
        """The call's writes go to distinct places: its index is distinct by construction
        (`index_put_` with one index tensor; a permutation where the index is 1-D or sorted
        along the scatter's own dim)."""
        method = call.api_name.rsplit(".", 1)[-1]
        spec = INDEX_ARGUMENT.get(method)
        if spec is None:
            return False
        shift = 0 if call.form == "method" else 1  # the function forms take the input first
        keyword, position = spec
        node = call.site.node
        index = argument(node, position + shift, keyword)
        if method.startswith("index_put"):  # `x.index_put_((rows,), v)`: one index tensor, dim 0
            if not (isinstance(index, (cst.Tuple, cst.List)) and len(index.elements) == 1):
                return False
            index = index.elements[0].value if isinstance(index.elements[0], cst.Element) else None
        if not isinstance(index, cst.BaseExpression):
            return False
        found = self.of(index)
        if found is None:
            return False
        if found.kind == VECTOR or method.startswith("index_copy"):
            return True  # index_copy_ takes a 1-D index: a permutation of a 1-D tensor
        if method.startswith("scatter"):
            dim_arg = argument(node, shift, "dim")
            dim = _single_int(self.values.of(dim_arg)) if isinstance(dim_arg, cst.BaseExpression) else None
            if dim is not None and dim == found.dim:
                return True
            src = argument(node, 2 + shift, "src")
            others = [index, *call.inputs(), *([src] if isinstance(src, cst.BaseExpression) else [])]
        else:
            others = [index]
        # scatter's index, input and src have one number of dims: one of them 1-D makes all 1-D
        return any(te.ndim_range(e, self.index) == (1, 1) for e in others)

    def of(self, expr: cst.BaseExpression) -> Distinct | None:
        found = self._kind(expr, 0)
        return found if found is not None and found.kind in (VECTOR, PERMUTATION) else None

    def _kind(self, expr: cst.BaseExpression, depth: int) -> Distinct | None:
        if depth > 8:
            return None
        if isinstance(expr, cst.Name):
            return self._name(expr, depth)
        if isinstance(expr, cst.Call):
            return self._call(expr, depth)
        if isinstance(expr, cst.Subscript):
            return self._subscript(expr, depth)
        if isinstance(expr, cst.Attribute) and expr.attr.value == "indices":
            inner = self._kind(expr.value, depth + 1)  # `x.sort().indices`
            return Distinct(PERMUTATION, inner.dim) if inner is not None and inner.kind == _SORTED else None
        return None

    def _name(self, name: cst.Name, depth: int) -> Distinct | None:
        if self.flow.parameter(name) is not None:
            return None
        value = self.flow.reaching_value(name)
        if value is not None:
            return self._kind(value, depth + 1)
        unpacked = self._unpacked(name)  # `_, order = torch.sort(x)`
        if unpacked is not None:
            value, position = unpacked
            inner = self._kind(value, depth + 1)
            if inner is not None and inner.kind == _SORTED and position == 1:
                return Distinct(PERMUTATION, inner.dim)
        return None

    def _unpacked(self, name: cst.Name) -> tuple[cst.BaseExpression, int] | None:
        """(value, position) when the nearest binding before `name` unpacks a two-item target."""
        here = self.flow.pos(name)
        nearest = None
        for statement, _ in self.flow.bindings(name.value, self.flow.owner(name)):
            if self.flow.pos(statement) < here:
                nearest = statement
        if not (isinstance(nearest, cst.Assign) and len(nearest.targets) == 1):
            return None
        target = nearest.targets[0].target
        if not isinstance(target, (cst.Tuple, cst.List)):
            return None
        for position, element in enumerate(target.elements):
            if isinstance(element.value, cst.Name) and element.value.value == name.value:
                return nearest.value, position
        return None

    def _call(self, call: cst.Call, depth: int) -> Distinct | None:
        func = call.func
        q = self.index.resolve(func, call) if isinstance(func, (cst.Name, cst.Attribute)) else None
        if q in _VECTOR_FACTORIES:
            return Distinct(VECTOR)
        if q == "torch.unique":
            return None if _has_keyword(call, *_UNIQUE_SPLITTING) else Distinct(VECTOR)
        if q in _NONZERO:
            return self._coordinates(call)
        if q == "torch.argsort":
            return Distinct(PERMUTATION, self._dim(call, 1))
        if q == "torch.sort":
            return Distinct(_SORTED, self._dim(call, 1))
        if q in ("torch.flatten", "torch.squeeze", "torch.ravel") and call.args:
            return _made_1d(self._kind(call.args[0].value, depth + 1))
        if q is not None or not isinstance(func, cst.Attribute):
            return None
        method, receiver = func.attr.value, func.value
        if method == "nonzero":
            return self._coordinates(call)
        if method == "unique":
            return None if _has_keyword(call, *_UNIQUE_SPLITTING) else Distinct(VECTOR)
        if method == "argsort":
            return Distinct(PERMUTATION, self._dim(call, 0))
        if method == "sort":
            return Distinct(_SORTED, self._dim(call, 0))
        if method in _MADE_1D or (method in ("view", "reshape") and self._minus_one(call)):
            return _made_1d(self._kind(receiver, depth + 1))
        if method in _SAME_VALUES:
            return self._kind(receiver, depth + 1)
        return None

    def _coordinates(self, call: cst.Call) -> Distinct | None:
        """`nonzero(m)`: one row of coordinates per position (`as_tuple=True`: a tuple instead)."""
        for arg in call.args:
            if arg.star == "**" or (arg.keyword is not None and arg.keyword.value == "as_tuple"):
                if arg.star or self.values.of(arg.value) != frozenset({False}):
                    return None
        return Distinct(_COORDINATES)

    def _subscript(self, expr: cst.Subscript, depth: int) -> Distinct | None:
        inner = self._kind(expr.value, depth + 1)
        if inner is None:
            return None
        items = [element.slice for element in expr.slice]
        if inner.kind == _SORTED:  # `torch.sort(x)[1]`
            if len(items) == 1 and isinstance(items[0], cst.Index) and self.values.of(items[0].value) == frozenset({1}):
                return Distinct(PERMUTATION, inner.dim)
            return None
        if inner.kind == _COORDINATES:  # `torch.nonzero(mask)[:, 0]`
            if len(items) == 2 and _whole(items[0]) and isinstance(items[1], cst.Index):
                if self.values.of(items[1].value) == frozenset({0}):
                    return Distinct(VECTOR)
            return None
        if len(items) == 1 and isinstance(items[0], cst.Slice):
            return inner  # `perm[:k]`: a part of distinct values
        return None

    def _dim(self, call: cst.Call, position: int) -> int | None:
        """The sort dim: keyword `dim`, else the argument at `position`; -1 when absent."""
        for arg in call.args:
            if arg.keyword is not None and arg.keyword.value == "dim":
                return _single_int(self.values.of(arg.value))
        positional = [a for a in call.args if a.keyword is None]
        if any(a.star for a in call.args):
            return None
        if len(positional) > position:
            return _single_int(self.values.of(positional[position].value))
        return -1

    def _minus_one(self, call: cst.Call) -> bool:
        return len(call.args) == 1 and call.args[0].keyword is None and self.values.of(call.args[0].value) == frozenset({-1})


def _made_1d(inner: Distinct | None) -> Distinct | None:
    """Flattening the positions of a mask, or a vector, gives a vector; a flattened
    permutation of several rows repeats values."""
    return Distinct(VECTOR) if inner is not None and inner.kind in (VECTOR, _COORDINATES) else None


def _has_keyword(call: cst.Call, *names: str) -> bool:
    return any(a.star == "**" or (a.keyword is not None and a.keyword.value in names) for a in call.args)


def _whole(item) -> bool:
    return isinstance(item, cst.Slice) and item.lower is None and item.upper is None and item.step is None


def _single_int(values: frozenset | None) -> int | None:
    if values is not None and len(values) == 1:
        value = next(iter(values))
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return None
