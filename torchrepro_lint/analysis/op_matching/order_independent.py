"""Scatters and index writes whose result is the same in any order.

The catalogue states these refinements in words (its `condition`) but not as predicates: sums of
ones or of integers (``scatter_add_`` counting degrees; integer adds are exact) and writes of one
constant through possibly duplicate indices give one result whatever order the writes run in.
"""

from __future__ import annotations

import libcst as cst

from torchrepro_lint.analysis import tensor_evidence as te
from torchrepro_lint.analysis.module_index import ModuleIndex
from torchrepro_lint.analysis.op_matching.calls import ApiCall
from torchrepro_lint.analysis.op_matching.values import Values, argument

# Sums whose order cannot change the result: counting with ones, or integer dtypes (exact adds).
EXACT_SUM_ENTRIES = frozenset(
    {"scatter_add", "index_add", "scatter_reduce_sum_mean", "scatter_legacy_add", "index_put_accumulate_cpu", "put_accumulate_cpu"}
)
VALUE_ARGUMENT = {  # method name -> the argument holding the values added or written (keyword, position after self)
    "index_copy": ("source", 2), "index_copy_": ("source", 2), "scatter_add": ("src", 2), "scatter_add_": ("src", 2), "scatter_reduce": ("src", 2), "scatter_reduce_": ("src", 2),
    "scatter": ("src", 2), "scatter_": ("src", 2), "index_add": ("source", 2), "index_add_": ("source", 2),
    "index_put": ("values", 1), "index_put_": ("values", 1), "put": ("source", 1), "put_": ("source", 1),
}  # fmt: skip
ONES = frozenset({"torch.ones", "torch.ones_like"})
# Entries whose hazard is duplicate indices (their catalogue condition says so): harmless when
# every write carries the same value, or when the indices cannot repeat (distinct_indices.py).
DUPLICATE_INDEX_ENTRIES = frozenset({"scatter_src", "index_put_no_accumulate", "index_copy"})
# Tensor methods whose result is a boolean mask: its values are zeros and ones
MASK_METHODS = frozenset(
    {"eq", "ne", "gt", "ge", "lt", "le", "bool", "isnan", "isinf", "isfinite", "logical_not", "logical_and", "logical_or"}
)
CONSTANT_FACTORIES = frozenset({"torch.ones", "torch.ones_like", "torch.zeros", "torch.zeros_like", "torch.full", "torch.full_like"})


class OrderIndependence:
    """Whether the values a call sums, or the values it writes, make its order not matter."""

    def __init__(self, index: ModuleIndex, values: Values) -> None:
        self.index = index
        self.values = values

    def exact_sum(self, call: ApiCall) -> bool:
        """The values summed are ones (counting) or integers: every order gives the same result."""
        method = call.api_name.rsplit(".", 1)[-1]
        spec = VALUE_ARGUMENT.get(method)
        if spec is None:
            return False
        keyword, position = spec
        node = call.site.node
        summed = argument(node, position if call.form == "method" else position + 1, keyword)
        if any(te.dtype_kind(e, self.index) in (te.INTEGER, te.BOOL) for e in call.inputs()):
            return True
        if not isinstance(summed, cst.BaseExpression):
            return False
        if te.dtype_kind(summed, self.index) in (te.INTEGER, te.BOOL):
            return True
        return self._ones(summed, 0)

    def constant_written(self, call: ApiCall) -> bool:
        """Every write carries the same value (a scalar, `torch.ones(...)`, `x.new_zeros(...)`)."""
        method = call.api_name.rsplit(".", 1)[-1]
        spec = VALUE_ARGUMENT.get(method)
        if spec is None:
            return False
        keyword, position = spec
        written = argument(call.site.node, position if call.form == "method" else position + 1, keyword)
        return isinstance(written, cst.BaseExpression) and self._constant(written, 0)

    def _constant(self, expr: cst.BaseExpression, depth: int) -> bool:
        if depth > 4:
            return False
        values = self.values.of(expr)
        if values is not None and len(values) == 1 and isinstance(next(iter(values)), (int, float)):
            return True
        if isinstance(expr, cst.Name):
            if self.values.flow.parameter(expr) is not None:
                return False
            value = self.values.flow.reaching_value(expr)
            return value is not None and self._constant(value, depth + 1)
        if not isinstance(expr, cst.Call):
            return False
        func = expr.func
        q = self.index.resolve(func, expr) if isinstance(func, (cst.Name, cst.Attribute)) else None
        if q in CONSTANT_FACTORIES:
            return True
        if q in ("torch.tensor", "torch.as_tensor") and expr.args:
            values = self.values.of(expr.args[0].value)
            return values is not None and len(values) == 1 and isinstance(next(iter(values)), (int, float))
        if q is None and isinstance(func, cst.Attribute):
            if func.attr.value in ("new_ones", "new_zeros", "new_full"):
                return True
            if func.attr.value in ("expand", "expand_as", "view", "reshape", "to", "float", "cuda", "unsqueeze"):
                return self._constant(func.value, depth + 1)
        return False

    def _ones(self, expr: cst.BaseExpression, depth: int) -> bool:
        """Ones, or zeros and ones: a boolean mask cast to float (`(labels != -100).float()`)
        counts what it selects as exactly as ones do."""
        if depth > 4:
            return False
        if isinstance(expr, cst.Comparison) or depth > 0 and te.dtype_kind(expr, self.index) == te.BOOL:
            return True  # (a comparison given to a tensor method is a tensor's: a bool has no `.float()`)
        if isinstance(expr, cst.Name):
            if self.values.flow.parameter(expr) is not None:
                return False
            value = self.values.flow.reaching_value(expr)
            return value is not None and self._ones(value, depth + 1)
        if not isinstance(expr, cst.Call):
            return False
        func = expr.func
        q = self.index.resolve(func, expr) if isinstance(func, (cst.Name, cst.Attribute)) else None
        if q in ONES:
            return True
        if q == "torch.full" and len(expr.args) >= 2:
            return self.values.of(expr.args[1].value) in (frozenset({1}), frozenset({1.0}))
        if q is None and isinstance(func, cst.Attribute):
            if func.attr.value == "new_ones" or func.attr.value in MASK_METHODS:
                return True
            if func.attr.value in ("expand", "expand_as", "view", "reshape", "to", "float", "cuda", "unsqueeze"):
                return self._ones(func.value, depth + 1)
        return False
