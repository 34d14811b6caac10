"""What this module shows about a tensor beyond "it is a tensor": dtype family, dims, device, layout.

Complements ``receivers.is_tensor`` / ``is_ndarray`` for rules whose truth depends on a
tensor's properties (the op catalogue's ``input_dtype``, ``input_ndim``, ``device`` and
``input_layout`` conditions). Every answer comes from code written in this module:

- ``dtype_kind(expr, index)``: "floating" | "integer" | "bool" | "complex" | "quantized" | None.
  Factories (`torch.rand*`, `zeros/ones/empty` without dtype -> floating, `randint`, `randperm`,
  `arange` of ints -> integer), `dtype=`, casts (`.float()`, `.long()`, `.to(torch.int64)`),
  float-valued functions (`softmax`, `sigmoid`, ...), `argmax`, comparisons (bool), arithmetic.
- ``ndim_range(expr, index)``: (lo, hi) bounds on the number of dims (hi None: unbounded), or None.
  Sizes given to factories, `view/reshape/permute/expand` arguments, `unsqueeze`, `flatten`,
  `F.interpolate` (3 to 5 dims), convolution outputs (`nn.Conv2d` gives 3 or 4 dims), and
  shape-preserving methods and functions.
- ``device_kind(expr, index)``: "cuda" | "cpu" | None. `device=` literals, `.cuda()`, `.cpu()`,
  `.to("cuda")`; a factory without `device=` makes a CPU tensor unless the module calls
  `torch.set_default_device`.
- ``layout_kind(expr, index)``: "sparse_coo" | "strided" | None.

Names are followed to the nearest assignment before them in their function (dataflow.core's
``reaching_value``); `self.<attr>` to the assignments in its class when they all agree.
Parameters are unknown. None means "this module does not say": callers stay silent.
"""

from __future__ import annotations

import libcst as cst

from torchrepro_lint.analysis.dataflow.core import flow
from torchrepro_lint.analysis.module_index import ModuleIndex
from torchrepro_lint.analysis.syntax import self_attribute, string_value

FLOATING, INTEGER, BOOL, COMPLEX, QUANTIZED = "floating", "integer", "bool", "complex", "quantized"
CUDA, CPU = "cuda", "cpu"
SPARSE_COO, STRIDED = "sparse_coo", "strided"

_T = "torch."
_F = "torch.nn.functional."

DTYPES = {
    **{_T + n: FLOATING for n in "float float32 float64 double float16 half bfloat16 float8_e4m3fn float8_e5m2".split()},
    **{_T + n: INTEGER for n in "int int8 int16 int32 int64 long short uint8 uint16 uint32 uint64".split()},
    _T + "bool": BOOL,
    **{_T + n: COMPLEX for n in "complex32 complex64 complex128 cfloat cdouble chalf".split()},
    **{_T + n: QUANTIZED for n in "qint8 quint8 qint32 quint4x2 quint2x4".split()},
}
_LEGACY = {
    **{_T + n: FLOATING for n in "FloatTensor DoubleTensor HalfTensor BFloat16Tensor cuda.FloatTensor cuda.DoubleTensor cuda.HalfTensor".split()},
    **{_T + n: INTEGER for n in "LongTensor IntTensor ShortTensor CharTensor ByteTensor cuda.LongTensor cuda.IntTensor".split()},
    _T + "BoolTensor": BOOL,
}

# torch functions whose result is floating whatever their input (or that make float tensors).
_FLOAT_FUNCTIONS = frozenset(
    [_T + n for n in "rand randn rand_like randn_like normal linspace logspace sigmoid tanh exp log log2 log10 log1p "
     "sqrt rsqrt softmax log_softmax erf erfinv sin cos atan2 lerp".split()]
    + [_F + n for n in "softmax log_softmax softmin sigmoid tanh gelu silu elu selu mish softplus normalize "
       "layer_norm group_norm batch_norm instance_norm interpolate upsample grid_sample avg_pool1d avg_pool2d "
       "avg_pool3d adaptive_avg_pool1d adaptive_avg_pool2d adaptive_avg_pool3d linear conv1d conv2d conv3d "
       "dropout cross_entropy nll_loss mse_loss l1_loss".split()]
)
_INT_FUNCTIONS = frozenset(
    [_T + n for n in "randint randint_like randperm argmax argmin argsort bucketize searchsorted bincount".split()]
    + [_F + "one_hot"]
)
_FILLED = frozenset(_T + n for n in "zeros ones empty".split())  # default dtype: floating
_LIKE = frozenset(_T + n for n in "zeros_like ones_like empty_like full_like rand_like randn_like clone".split())
_FLOAT_METHODS = frozenset("float double half bfloat16 softmax log_softmax sigmoid tanh exp log sqrt rsqrt mean".split())
_INT_METHODS = frozenset("long int short byte char argmax argmin argsort".split())
_SAME_DTYPE_METHODS = frozenset(
    "view reshape permute transpose contiguous clone detach flatten squeeze unsqueeze cuda cpu expand expand_as "
    "repeat flip roll t narrow select abs neg clamp clamp_ clip masked_fill index_select gather view_as reshape_as "
    "requires_grad_ pin_memory to_dense cumsum sum max min relu unflatten".split()
)
# Shape-preserving (same number of dims).
_SAME_NDIM_METHODS = frozenset(
    "float double half bfloat16 long int short byte bool contiguous clone detach cuda cpu to type_as transpose "
    "softmax log_softmax sigmoid tanh exp log sqrt abs neg clamp clamp_ clip masked_fill masked_fill_ "
    "requires_grad_ relu relu_ mul add sub div pow sigmoid_ float_ pin_memory flip roll".split()
)
_SAME_NDIM_FUNCTIONS = frozenset(
    [_T + n for n in "sigmoid tanh exp log sqrt abs neg clamp softmax log_softmax relu".split()]
    + [_F + n for n in "softmax log_softmax relu relu6 gelu silu elu leaky_relu sigmoid tanh dropout dropout2d "
       "dropout3d normalize layer_norm group_norm batch_norm instance_norm pad".split()]
)
_SIZED = frozenset(_T + n for n in "zeros ones empty rand randn".split())
_ONE_DIM = frozenset(_T + n for n in "arange linspace logspace randperm".split())
_CONV_NDIM = {
    "Conv1d": (2, 3), "Conv2d": (3, 4), "Conv3d": (4, 5),
    "ConvTranspose1d": (2, 3), "ConvTranspose2d": (3, 4), "ConvTranspose3d": (4, 5),
    "LazyConv1d": (2, 3), "LazyConv2d": (3, 4), "LazyConv3d": (4, 5),
    "BatchNorm2d": (3, 4), "BatchNorm3d": (4, 5), "InstanceNorm2d": (3, 4),
}
_FACTORIES_WITH_DEVICE = frozenset(
    _T + n for n in "tensor as_tensor zeros ones empty full rand randn randint randperm arange linspace logspace "
    "eye zeros_like ones_like empty_like full_like rand_like randn_like randint_like".split()
)
_NOT_TENSOR_METHODS = frozenset("item tolist numpy size dim numel shape to_list".split())

Range = tuple  # (lo, hi | None)


class _Evidence:
    def __init__(self, index: ModuleIndex) -> None:
        self.index = index
        self.flow = flow(index)
        self.active: set[int] = set()

    # -- shared plumbing -------------------------------------------------------------------
    def _guard(self, expr: cst.CSTNode, fn, depth: int):
        if depth > 12 or id(expr) in self.active:
            return None
        self.active.add(id(expr))
        try:
            return fn(expr, depth + 1)
        finally:
            self.active.discard(id(expr))

    def qualname(self, expr: cst.BaseExpression) -> str | None:
        if isinstance(expr, (cst.Name, cst.Attribute)):
            return self.index.resolve(expr, expr)
        return None

    def name_value(self, name: cst.Name) -> cst.BaseExpression | None:
        if self.flow.parameter(name) is not None:
            return None
        return self.flow.reaching_value(name)

    def self_values(self, expr: cst.Attribute) -> list[cst.BaseExpression] | None:
        attr = self_attribute(expr)
        klass = self.flow.enclosing_class(expr) if attr else None
        if klass is None:
            return None
        return self.flow.self_attr_values(klass, attr) or None

    def agree(self, values, fn, depth):
        kinds = {self._guard(v, fn, depth) for v in values}
        return kinds.pop() if len(kinds) == 1 else None

    # -- dtype -----------------------------------------------------------------------------
    def dtype(self, expr: cst.BaseExpression, depth: int):
        if isinstance(expr, cst.Call):
            return self._dtype_call(expr, depth)
        if isinstance(expr, cst.Name):
            value = self.name_value(expr)
            return self._guard(value, self.dtype, depth) if value is not None else None
        if isinstance(expr, cst.Attribute):
            values = self.self_values(expr)
            if values is not None:
                return self.agree(values, self.dtype, depth)
            if expr.attr.value in ("data", "T", "mT", "grad"):
                return self._guard(expr.value, self.dtype, depth)
            return None
        if isinstance(expr, cst.Subscript):
            return self._guard(expr.value, self.dtype, depth)
        if isinstance(expr, cst.Comparison):
            return BOOL if self._tensorish(expr.left, depth) else None
        if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, (cst.Minus, cst.Plus)):
            return self._guard(expr.expression, self.dtype, depth)
        if isinstance(expr, cst.BinaryOperation):
            left = _literal_kind(expr.left) or self._guard(expr.left, self.dtype, depth)
            right = _literal_kind(expr.right) or self._guard(expr.right, self.dtype, depth)
            if _is_literal(expr.left) and _is_literal(expr.right):
                return None  # plain Python numbers, not a tensor
            if isinstance(expr.operator, cst.Divide):
                # true division of a known numeric tensor gives floats (other side a number or unknown)
                return FLOATING if {left, right} & {FLOATING, INTEGER} and not {left, right} & {BOOL, COMPLEX, QUANTIZED} else None
            if isinstance(expr.operator, cst.MatrixMultiply):
                return left if left == right else None
            if FLOATING in (left, right) and {left, right} <= {FLOATING, INTEGER, BOOL}:
                return FLOATING
            if left == right == INTEGER and not isinstance(expr.operator, cst.Power):
                return INTEGER
            return None
        return None

    def _dtype_call(self, call: cst.Call, depth: int):
        q = self.qualname(call.func)
        dtype_arg = _keyword(call, "dtype")
        if q is not None and q.startswith(_T):
            if dtype_arg is not None:
                return DTYPES.get(self.qualname(dtype_arg) or "")
            if q in _LEGACY:
                return _LEGACY[q]
            if q in ("torch.nn.Parameter", "torch.nn.parameter.Parameter"):
                return FLOATING
            if q in ("torch.quantize_per_tensor", "torch.quantize_per_channel"):
                return QUANTIZED
            if q in _FLOAT_FUNCTIONS or q in _FILLED:
                return FLOATING
            if q in _INT_FUNCTIONS:
                return INTEGER
            if q == "torch.full" and len(call.args) >= 2:
                return _literal_kind(call.args[1].value)
            if q == "torch.arange":
                kinds = {_literal_kind(a.value) for a in call.args if a.keyword is None}
                return kinds.pop() if len(kinds) == 1 and None not in kinds else None
            if q in ("torch.tensor", "torch.as_tensor") and call.args:
                return _nested_literal_kind(call.args[0].value)
            if q in _LIKE and call.args:
                return self._guard(call.args[0].value, self.dtype, depth)
            return None
        if q is not None:
            return None
        if isinstance(call.func, cst.Attribute):
            method = call.func.attr.value
            receiver = call.func.value
            if method in _FLOAT_METHODS:
                return FLOATING
            if method in _INT_METHODS:
                return INTEGER
            if method == "bool":
                return BOOL
            if method in ("to", "type"):
                for a in call.args:
                    if a.keyword is None or a.keyword.value == "dtype":
                        kind = DTYPES.get(self.qualname(a.value) or "")
                        if kind is not None:
                            return kind
                if dtype_arg is None and method == "to":
                    return self._guard(receiver, self.dtype, depth)
                return None
            if method in ("new_zeros", "new_ones", "new_empty", "new_full", "new_tensor"):
                if dtype_arg is not None:
                    return DTYPES.get(self.qualname(dtype_arg) or "")
                return self._guard(receiver, self.dtype, depth)
            if method in _SAME_DTYPE_METHODS:
                return self._guard(receiver, self.dtype, depth)
        return None

    def _tensorish(self, expr, depth) -> bool:
        return self._guard(expr, self.dtype, depth) is not None or self._guard(expr, self.ndim, depth) is not None

    # -- number of dims --------------------------------------------------------------------
    def ndim(self, expr: cst.BaseExpression, depth: int):
        if isinstance(expr, cst.Call):
            return self._ndim_call(expr, depth)
        if isinstance(expr, cst.Name):
            value = self.name_value(expr)
            return self._guard(value, self.ndim, depth) if value is not None else None
        if isinstance(expr, cst.Attribute):
            values = self.self_values(expr)
            if values is not None:
                return self.agree(values, self.ndim, depth)
            if expr.attr.value in ("data", "grad"):
                return self._guard(expr.value, self.ndim, depth)
            return None
        if isinstance(expr, cst.Subscript):
            return self._ndim_subscript(expr, depth)
        if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, (cst.Minus, cst.Plus)):
            return self._guard(expr.expression, self.ndim, depth)
        if isinstance(expr, cst.BinaryOperation) and not isinstance(expr.operator, cst.MatrixMultiply):
            left = None if _is_literal(expr.left) else self._guard(expr.left, self.ndim, depth)
            right = None if _is_literal(expr.right) else self._guard(expr.right, self.ndim, depth)
            if left is None and right is None:
                return None
            if left is not None and right is not None:
                hi = None if left[1] is None or right[1] is None else max(left[1], right[1])
                return (max(left[0], right[0]), hi)
            if _is_literal(expr.left) or _is_literal(expr.right):
                return left or right
            known = left or right
            return (known[0], None)  # broadcasting with an unknown tensor: at least as many dims
        return None

    def _ndim_subscript(self, expr: cst.Subscript, depth: int):
        base = self._guard(expr.value, self.ndim, depth)
        if base is None:
            return None
        delta = 0
        for element in expr.slice:
            item = element.slice
            if isinstance(item, cst.Slice):
                continue
            value = item.value
            if isinstance(value, cst.Name) and value.value == "None":
                delta += 1
            elif isinstance(value, cst.Ellipsis):
                continue
            elif isinstance(value, cst.Integer) or (isinstance(value, cst.UnaryOperation) and isinstance(value.expression, cst.Integer)):
                delta -= 1
            else:
                return None
        hi = None if base[1] is None else base[1] + delta
        return (max(base[0] + delta, 0), hi)

    def _ndim_call(self, call: cst.Call, depth: int):
        q = self.qualname(call.func)
        positional = [a.value for a in call.args if a.keyword is None and not a.star]
        starred = any(a.star for a in call.args)
        if q is not None:
            if q in _SIZED and not starred:
                size = _keyword(call, "size")
                if size is not None:
                    return _exact(_sequence_len(size))
                if len(positional) == 1:
                    only = positional[0]
                    if isinstance(only, (cst.Tuple, cst.List)):
                        return _exact(_sequence_len(only))
                    if isinstance(only, cst.Integer):
                        return (1, 1)
                    return None
                return (len(positional), len(positional)) if positional else None
            if q == "torch.full" and positional:
                return _exact(_sequence_len(positional[0]))
            if q == "torch.randint":
                size = _keyword(call, "size") or (positional[-1] if len(positional) >= 2 else None)
                return _exact(_sequence_len(size)) if size is not None else None
            if q in _ONE_DIM:
                return (1, 1)
            if q in ("torch.tensor", "torch.as_tensor") and positional:
                depth_of = _nesting(positional[0])
                return (depth_of, depth_of) if depth_of is not None else None
            if q in _LIKE and positional:
                return self._guard(positional[0], self.ndim, depth)
            if q in (_F + "interpolate", _F + "upsample", _F + "upsample_bilinear", _F + "upsample_nearest"):
                inner = self._guard(positional[0], self.ndim, depth) if positional else None
                return inner or (3, 5)
            if q.startswith(_F + "conv"):
                name = q[len(_F):]
                key = "ConvTranspose" + name[-2:] if name.startswith("conv_transpose") else "Conv" + name[-2:]
                return _CONV_NDIM.get(key)
            if q == _F + "one_hot" and positional:
                inner = self._guard(positional[0], self.ndim, depth)
                return (inner[0] + 1, None if inner[1] is None else inner[1] + 1) if inner else None
            if q == "torch.cat" and positional and isinstance(positional[0], (cst.List, cst.Tuple)):
                first = positional[0].elements[0].value if positional[0].elements else None
                return self._guard(first, self.ndim, depth) if first is not None else None
            if q == "torch.stack" and positional and isinstance(positional[0], (cst.List, cst.Tuple)):
                first = positional[0].elements[0].value if positional[0].elements else None
                inner = self._guard(first, self.ndim, depth) if first is not None else None
                return (inner[0] + 1, None if inner[1] is None else inner[1] + 1) if inner else None
            if q in _SAME_NDIM_FUNCTIONS and positional:
                return self._guard(positional[0], self.ndim, depth)
            if q.startswith("torch.nn.") and q.rsplit(".", 1)[-1] in _CONV_NDIM:
                return None  # constructing a module is not a tensor
            return None
        func = call.func
        # Calling a module instance: `self.conv(x)` / `conv(x)` where it was built as nn.Conv2d(...).
        built = self._module_class(func)
        if built is not None:
            name = built.rsplit(".", 1)[-1]
            if name in _CONV_NDIM:
                return _CONV_NDIM[name]
            if name == "Upsample":
                inner = self._guard(positional[0], self.ndim, depth) if positional else None
                return inner or (3, 5)
            return None
        if not isinstance(func, cst.Attribute):
            return None
        method = func.attr.value
        receiver = func.value
        if method in ("view", "reshape", "expand", "permute", "new_zeros", "new_ones", "new_empty") and not starred:
            if len(positional) == 1:
                only = positional[0]
                if isinstance(only, (cst.Tuple, cst.List)):
                    return _exact(_sequence_len(only))
                if isinstance(only, cst.Integer) or (isinstance(only, cst.UnaryOperation) and isinstance(only.expression, cst.Integer)):
                    return (1, 1)
                return None
            return (len(positional), len(positional)) if positional else None
        if method in ("unsqueeze", "unsqueeze_"):
            inner = self._guard(receiver, self.ndim, depth)
            if inner:
                return (inner[0] + 1, None if inner[1] is None else inner[1] + 1)
            dims = _int_args(positional)
            return (dims[0] + 1, None) if dims and dims[0] >= 0 else None
        if method in ("transpose", "transpose_", "swapaxes", "swapdims", "movedim"):
            inner = self._guard(receiver, self.ndim, depth)
            if inner:
                return inner
            dims = _int_args(positional)  # the dims named must exist: `x.transpose(1, 2)` has 3 or more
            return (max(dims) + 1, None) if dims and min(dims) >= 0 else None
        if method == "flatten":
            if not positional and _keyword(call, "start_dim") is None:
                return (1, 1)
            start = positional[0] if positional else _keyword(call, "start_dim")
            if isinstance(start, cst.Integer) and len(positional) <= 1 and _keyword(call, "end_dim") is None:
                return (int(start.value) + 1, int(start.value) + 1)
            return None
        if method in _SAME_NDIM_METHODS:
            return self._guard(receiver, self.ndim, depth)
        return None

    def _module_class(self, func: cst.BaseExpression) -> str | None:
        """`self.conv` / `conv` bound to `nn.Conv2d(...)`: the class's qualified name."""
        values: list[cst.BaseExpression] | None
        if isinstance(func, cst.Attribute):
            values = self.self_values(func)
        elif isinstance(func, cst.Name):
            value = self.name_value(func)
            values = [value] if value is not None else None
        else:
            values = None
        if not values:
            return None
        names = set()
        for value in values:
            if not isinstance(value, cst.Call):
                return None
            q = self.qualname(value.func)
            if q is None or not q.startswith("torch.nn."):
                return None
            names.add(q)
        return names.pop() if len(names) == 1 else None

    # -- device ----------------------------------------------------------------------------
    def device(self, expr: cst.BaseExpression, depth: int):
        if isinstance(expr, cst.Call):
            return self._device_call(expr, depth)
        if isinstance(expr, cst.Name):
            value = self.name_value(expr)
            return self._guard(value, self.device, depth) if value is not None else None
        if isinstance(expr, cst.Attribute):
            values = self.self_values(expr)
            if values is not None:
                return self.agree(values, self.device, depth)
            if expr.attr.value in ("data", "T", "mT", "grad"):
                return self._guard(expr.value, self.device, depth)
            return None
        if isinstance(expr, cst.Subscript):
            return self._guard(expr.value, self.device, depth)
        if isinstance(expr, cst.BinaryOperation):
            kinds = {self._guard(side, self.device, depth) for side in (expr.left, expr.right) if not _is_literal(side)}
            return kinds.pop() if len(kinds) == 1 else None
        return None

    def _device_call(self, call: cst.Call, depth: int):
        q = self.qualname(call.func)
        if q is not None:
            if q not in _FACTORIES_WITH_DEVICE:
                return None
            device = _keyword(call, "device")
            if device is not None:
                return self.device_literal(device)
            if q.endswith("_like") and call.args:
                return self._guard(call.args[0].value, self.device, depth)
            return None if self._sets_default_device else CPU
        if not isinstance(call.func, cst.Attribute):
            return None
        method = call.func.attr.value
        if method == "cuda":
            return CUDA
        if method == "cpu":
            return CPU
        if method == "to":
            for a in call.args:
                if a.keyword is None or a.keyword.value == "device":
                    kind = self.device_literal(a.value)
                    if kind is not None:
                        return kind
                    if DTYPES.get(self.qualname(a.value) or "") is None:
                        return None  # `.to(device)`, `.to(other)`: where to, we cannot tell
            return self._guard(call.func.value, self.device, depth)
        if method in _NOT_TENSOR_METHODS or method.startswith("new_") and _keyword(call, "device") is not None:
            return None
        return self._guard(call.func.value, self.device, depth)

    def device_literal(self, expr: cst.BaseExpression):
        text = string_value(expr)
        if text is None and isinstance(expr, cst.Call) and self.qualname(expr.func) == "torch.device" and expr.args:
            text = string_value(expr.args[0].value)
        if text is None:
            return None
        if text.startswith("cuda"):
            return CUDA
        if text == "cpu":
            return CPU
        return None

    @property
    def _sets_default_device(self) -> bool:
        return bool(self.index.calls_to("torch.set_default_device"))

    # -- layout ----------------------------------------------------------------------------
    def layout(self, expr: cst.BaseExpression, depth: int):
        if isinstance(expr, cst.Call):
            q = self.qualname(expr.func)
            if q in ("torch.sparse_coo_tensor", "torch.sparse.FloatTensor", "torch.sparse.LongTensor"):
                return SPARSE_COO
            if q is not None:
                return STRIDED if q in _FACTORIES_WITH_DEVICE or q in _FLOAT_FUNCTIONS else None
            if isinstance(expr.func, cst.Attribute):
                method = expr.func.attr.value
                if method in ("to_sparse", "to_sparse_coo"):
                    return SPARSE_COO
                if method == "to_dense":
                    return STRIDED
                if method in ("coalesce", "cuda", "cpu", "to", "float", "double", "half"):
                    return self._guard(expr.func.value, self.layout, depth)
            return None
        if isinstance(expr, cst.Name):
            value = self.name_value(expr)
            return self._guard(value, self.layout, depth) if value is not None else None
        return None


def _keyword(call: cst.Call, name: str) -> cst.BaseExpression | None:
    for a in call.args:
        if a.keyword is not None and a.keyword.value == name:
            return a.value
    return None


def _is_literal(expr: cst.BaseExpression) -> bool:
    return _literal_kind(expr) is not None


def _literal_kind(expr: cst.BaseExpression):
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, (cst.Minus, cst.Plus)):
        expr = expr.expression
    if isinstance(expr, cst.Float):
        return FLOATING
    if isinstance(expr, cst.Integer):
        return INTEGER
    if isinstance(expr, cst.Name) and expr.value in ("True", "False"):
        return BOOL
    return None


def _nested_literal_kind(expr: cst.BaseExpression):
    if isinstance(expr, (cst.List, cst.Tuple)):
        kinds = {_nested_literal_kind(e.value) for e in expr.elements}
        if None in kinds or not kinds:
            return None
        if FLOATING in kinds:
            return FLOATING
        return kinds.pop() if len(kinds) == 1 else None
    return _literal_kind(expr)


def _nesting(expr: cst.BaseExpression) -> int | None:
    if isinstance(expr, (cst.List, cst.Tuple)):
        depths = {_nesting(e.value) for e in expr.elements} if expr.elements else {0}
        if None in depths or len(depths) != 1:
            return None
        return depths.pop() + 1
    return 0 if _literal_kind(expr) is not None else None


def _sequence_len(expr: cst.BaseExpression | None) -> int | None:
    if isinstance(expr, (cst.Tuple, cst.List)) and not any(isinstance(e, cst.StarredElement) for e in expr.elements):
        return len(expr.elements)
    return None


def _int_args(args: list[cst.BaseExpression]) -> list[int] | None:
    out = []
    for a in args:
        if isinstance(a, cst.Integer):
            out.append(int(a.value))
        elif isinstance(a, cst.UnaryOperation) and isinstance(a.operator, cst.Minus) and isinstance(a.expression, cst.Integer):
            out.append(-int(a.expression.value))
        else:
            return None
    return out or None


def _exact(n: int | None):
    return (n, n) if n is not None else None


# -- public API -------------------------------------------------------------------------------
def dtype_kind(expr: cst.BaseExpression, index: ModuleIndex) -> str | None:
    return _run(index, "dtype", expr)


def ndim_range(expr: cst.BaseExpression, index: ModuleIndex) -> Range | None:
    return _run(index, "ndim", expr)


def device_kind(expr: cst.BaseExpression, index: ModuleIndex) -> str | None:
    return _run(index, "device", expr)


def layout_kind(expr: cst.BaseExpression, index: ModuleIndex) -> str | None:
    return _run(index, "layout", expr)


def _run(index: ModuleIndex, what: str, expr: cst.BaseExpression):
    evidence = _Evidence(index)
    return evidence._guard(expr, getattr(evidence, what), 0)
