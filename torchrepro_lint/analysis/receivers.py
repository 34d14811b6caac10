"""Is this expression a torch tensor, or a NumPy array? Receiver typing from local evidence.

Shared by the rules that must tell `x.median(dim=0)` on a tensor from the same method on a
NumPy array or a pandas Series, or that need to know a name holds a tensor.

API
---
``is_tensor(expr, index, at=None) -> bool``
    True only when this module shows that `expr` is a torch tensor:

    - a call of a torch function that returns one tensor (``torch.zeros``, ``torch.randn``,
      ``torch.cat``, ``F.relu``, ``torch.linalg.norm``, legacy ``torch.FloatTensor(...)``,
      ``nn.Parameter(...)``, ...), not those returning tuples, modules, devices or generators;
    - a method call on a tensor that returns a tensor (``x.float()``, ``x.view(...)``,
      ``x.sum()``), not ``x.item()``, ``x.tolist()``, ``x.numpy()``, ``x.size()``, ...;
    - ``x.T``/``.mT``/``.data``/``.grad``/``.real``/``.imag``, ``x[i]``, ``-x``, and
      arithmetic with a tensor operand (``x * 2``, ``x @ w``);
    - a name whose nearest preceding assignment in its function is one of the above;
    - a parameter annotated ``Tensor``/``torch.Tensor`` (also ``Optional[Tensor]``,
      ``Tensor | None``, ``torch.FloatTensor``, ...), or a parameter without default or
      annotation of a method named ``forward`` (other than ``self``);
    - ``self.<attr>`` when every assignment to it in the class is a tensor (including
      ``nn.Parameter(...)`` and ``self.register_buffer("attr", <tensor>)``).

``is_ndarray(expr, index, at=None) -> bool``
    The same for NumPy arrays: ``np.array``/``np.zeros``/... calls, ``x.numpy()`` on a tensor,
    array-returning methods of an array, indexing and arithmetic, names and parameters
    annotated ``np.ndarray``/``numpy.typing.NDArray``.

Both answer False when unsure; they never both answer True. `index` is the module's
``ModuleIndex``; `at` (default: `expr`) is where the expression is read.

``is_untyped(expr, index) -> bool``
    Nothing in this module says what `expr` holds: a parameter without annotation (not the
    `self` of a method), an attribute of one, `self.<attr>` that the class assigns only from such
    values or not at all, an index or slice of these, or a name assigned one of them. What
    ``TENSOR_ONLY_METHODS`` are called on is then a tensor: no other type a torch module meets
    has those names.
"""

from __future__ import annotations

import libcst as cst

from torchrepro_lint.analysis.dataflow.core import flow
from torchrepro_lint.analysis.module_index import ModuleIndex
from torchrepro_lint.analysis.syntax import evaluated_string, self_attribute, string_value

TENSOR, NDARRAY = "tensor", "ndarray"

# torch functions that do not return a single tensor (tuples, modules, flags, objects).
_TORCH_NOT_TENSOR = frozenset(
    "load save device dtype Generator Size no_grad enable_grad inference_mode set_grad_enabled compile "
    "manual_seed seed initial_seed get_rng_state set_rng_state is_tensor is_storage is_floating_point "
    "is_complex is_nonzero numel typename use_deterministic_algorithms are_deterministic_algorithms_enabled "
    "set_default_dtype get_default_dtype set_default_device set_printoptions set_num_threads get_num_threads "
    "split chunk unbind tensor_split hsplit vsplit dsplit meshgrid broadcast_tensors broadcast_shapes "
    "sort topk kthvalue mode median nanmedian max min aminmax var_mean std_mean unique unique_consecutive "
    "histogram frexp lu lu_unpack svd qr eig slogdet lstsq triangular_solve cummax cummin where nonzero "
    "from_file autocast jit cuda backends distributed utils optim nn multiprocessing onnx hub "
    "fx export func profiler testing package library overrides".split()
)
_TORCH_MULTI_OK_WITHOUT_DIM = frozenset("max min median nanmedian".split())  # a tensor when given no dim
_TORCH_SUBMODULES = ("torch.nn.functional.", "torch.linalg.", "torch.fft.", "torch.special.")
_TORCH_FUNCTIONAL_NOT_TENSOR = frozenset(
    "torch.nn.functional.max_pool1d_with_indices torch.nn.functional.max_pool2d_with_indices "
    "torch.nn.functional.max_pool3d_with_indices torch.linalg.eig torch.linalg.eigh torch.linalg.svd "
    "torch.linalg.qr torch.linalg.slogdet torch.linalg.lstsq torch.linalg.lu torch.linalg.lu_factor "
    "torch.linalg.inv_ex torch.linalg.cholesky_ex torch.linalg.ldl_factor".split()
)
# What a module's parameters and buffers are made with: the tensor given is their initial value
PARAMETER_CLASSES = frozenset({"torch.nn.Parameter", "torch.nn.parameter.Parameter", "torch.nn.Buffer"})
_TENSOR_CLASSES = frozenset(
    "torch.Tensor torch.FloatTensor torch.DoubleTensor torch.HalfTensor torch.BFloat16Tensor torch.LongTensor "
    "torch.IntTensor torch.ShortTensor torch.CharTensor torch.ByteTensor torch.BoolTensor torch.nn.Parameter "
    "torch.nn.parameter.Parameter torch.nn.Buffer".split()
)
# Tensor methods that return something other than one tensor.
_METHOD_NOT_TENSOR = frozenset(
    "item tolist numpy size dim ndimension numel nelement element_size data_ptr stride storage "
    "untyped_storage storage_offset is_contiguous is_floating_point is_complex is_cuda get_device "
    "type backward register_hook split chunk unbind tensor_split sort topk kthvalue mode max min median "
    "nanmedian aminmax unique unique_consecutive nonzero dim_order apply_ map_ __len__ "
    "equal allclose is_set_to is_shared is_pinned share_memory_ requires_grad_ retain_grad "
    "tobytes to_list keys values items".split()
)
_METHOD_OK_WITHOUT_DIM = frozenset("max min median nanmedian".split())  # one tensor when called with no dim
# In-place indexed writes that only `torch.Tensor` has among the types a torch module meets:
# NumPy, pandas, Python's containers and cupy have none of them (cupy's is `scatter_add`, without
# the underscore; NumPy's `put` has none either). Tensor libraries that copy torch's names
# (paddle, oneflow, mindspore, ...) are told apart by the module's imports (TORCH_LOOKALIKES).
TENSOR_ONLY_METHODS = frozenset(
    "index_add_ index_copy_ index_put_ index_reduce_ put_ scatter_ scatter_add_ scatter_reduce_".split()
)
TORCH_LOOKALIKES = frozenset("paddle oneflow mindspore jittor megengine mxnet tensorflow jax cupy".split())
_TENSOR_ATTRIBUTES = frozenset("T mT H mH data grad real imag".split())

_NUMPY_NOT_ARRAY = frozenset(
    "random seed save savez savez_compressed load loadtxt_ dtype shape ndim size isscalar iscomplexobj "
    "set_printoptions errstate finfo iinfo printoptions unique split array_split hsplit vsplit dsplit "
    "meshgrid histogram histogram2d histogramdd where nonzero linalg fft testing lib ma char rec "
    "broadcast_arrays allclose array_equal any all isclose_scalar".split()
)
_NUMPY_ARRAY_CLASSES = frozenset({"numpy.ndarray", "numpy.typing.NDArray", "numpy.matrix"})
_ARRAY_METHOD_NOT_ARRAY = frozenset(
    "item tolist tobytes dump dumps fill sort size shape ndim nbytes itemsize all any".split()
)
_ARRAY_ATTRIBUTES = frozenset("T real imag flat".split())


def is_tensor(expr: cst.BaseExpression, index: ModuleIndex, at: cst.CSTNode | None = None) -> bool:
    return _Typer(index).kind(expr, at if at is not None else expr) == TENSOR


def is_ndarray(expr: cst.BaseExpression, index: ModuleIndex, at: cst.CSTNode | None = None) -> bool:
    return _Typer(index).kind(expr, at if at is not None else expr) == NDARRAY


def is_untyped(expr: cst.BaseExpression, index: ModuleIndex) -> bool:
    typer = _Typer(index)
    return typer.kind(expr, expr) is None and typer.untyped(expr, 0)


def imports_no_lookalike(index: ModuleIndex) -> bool:
    """The module imports no tensor library that copies torch's method names."""
    return not any(record.module and record.module.split(".")[0] in TORCH_LOOKALIKES for record in index.imports)


class _Typer:
    def __init__(self, index: ModuleIndex) -> None:
        self.index = index
        self.flow = flow(index)
        self.active: set[int] = set()

    def kind(self, expr: cst.BaseExpression, at: cst.CSTNode, depth: int = 0) -> str | None:
        if depth > 10 or id(expr) in self.active:
            return None
        self.active.add(id(expr))
        try:
            return self._kind(expr, at, depth + 1)
        finally:
            self.active.discard(id(expr))

    def _kind(self, expr: cst.BaseExpression, at: cst.CSTNode, depth: int) -> str | None:
        if isinstance(expr, cst.Call):
            return self._call(expr, at, depth)
        if isinstance(expr, cst.Attribute):
            attr = self_attribute(expr)
            if attr is not None:
                return self._self_attribute(expr, attr, depth)
            inner = self.kind(expr.value, at, depth)
            if inner == TENSOR and expr.attr.value in _TENSOR_ATTRIBUTES:
                return TENSOR
            if inner == NDARRAY and expr.attr.value in _ARRAY_ATTRIBUTES:
                return NDARRAY
            return None
        if isinstance(expr, cst.Subscript):
            return self.kind(expr.value, at, depth)
        if isinstance(expr, cst.UnaryOperation) and not isinstance(expr.operator, cst.Not):
            return self.kind(expr.expression, at, depth)
        if isinstance(expr, cst.BinaryOperation):
            kinds = {self.kind(expr.left, at, depth), self.kind(expr.right, at, depth)} - {None}
            return kinds.pop() if len(kinds) == 1 else None
        if isinstance(expr, cst.Name):
            return self._name(expr, depth)
        return None

    def _call(self, call: cst.Call, at: cst.CSTNode, depth: int) -> str | None:
        func = call.func
        qualname = self.index.resolve(func, call) if isinstance(func, (cst.Name, cst.Attribute)) else None
        if qualname:
            if qualname in _TENSOR_CLASSES:
                return TENSOR
            if qualname.startswith("torch."):
                return TENSOR if _torch_returns_tensor(qualname, call) else None
            if qualname.startswith("numpy."):
                return NDARRAY if _numpy_returns_array(qualname) else None
            if not qualname.startswith("builtins.") and "." in qualname and not qualname.startswith("@."):
                return None  # another library's function
        if isinstance(func, cst.Attribute):
            method = func.attr.value
            receiver = self.kind(func.value, at, depth)
            if receiver == TENSOR:
                if method == "numpy":
                    return NDARRAY
                if method in _METHOD_OK_WITHOUT_DIM and not call.args:
                    return TENSOR
                return None if method in _METHOD_NOT_TENSOR else TENSOR
            if receiver == NDARRAY:
                return None if method in _ARRAY_METHOD_NOT_ARRAY else NDARRAY
        return None

    def _name(self, name: cst.Name, depth: int) -> str | None:
        param = self.flow.parameter(name)
        if param is not None:
            return self._parameter(param)
        value = self.flow.reaching_value(name)
        if value is None:
            return None
        return self.kind(value, value, depth)

    def _parameter(self, param: cst.Param) -> str | None:
        if param.annotation is not None:
            return _annotation_kind(param.annotation.annotation, self.index, param)
        function = self.flow.parents.get(self.flow.parents.get(param))
        if not (isinstance(function, cst.FunctionDef) and function.name.value == "forward") or param.default is not None:
            return None
        positional = [*function.params.posonly_params, *function.params.params]
        if self.flow.enclosing_class(function) is not None and positional and positional[0] is param:
            return None  # self
        if param in positional or param in function.params.kwonly_params:
            return TENSOR
        return None

    def untyped(self, expr: cst.BaseExpression, depth: int) -> bool:
        """is_untyped: what `expr` holds comes from outside the module's view."""
        if depth > 6:
            return False
        if isinstance(expr, cst.Subscript):
            return self.untyped(expr.value, depth + 1)
        if isinstance(expr, cst.Name):
            param = self.flow.parameter(expr)
            if param is not None:
                return param.annotation is None and param.star in ("", cst.MaybeSentinel.DEFAULT) and not self._is_receiver(param)
            value = self.flow.reaching_value(expr)
            return isinstance(value, (cst.Name, cst.Attribute, cst.Subscript)) and self.untyped(value, depth + 1)
        if isinstance(expr, cst.Attribute):
            attr = self_attribute(expr)
            if attr is None:
                return isinstance(expr.value, cst.Name) and self.untyped(expr.value, depth + 1)
            klass = self.flow.enclosing_class(expr)
            values = self.flow.self_attr_values(klass, attr) if klass is not None else None
            if values is None:
                return False
            return all(self.kind(v, v, depth) is None and self.untyped(v, depth + 1) for v in values)
        return False

    def _is_receiver(self, param: cst.Param) -> bool:
        """The first parameter of a method (`self`, `cls`)."""
        function = self.flow.parents.get(self.flow.parents.get(param))
        if not isinstance(function, cst.FunctionDef) or self.flow.enclosing_class(function) is None:
            return False
        positional = [*function.params.posonly_params, *function.params.params]
        return bool(positional) and positional[0] is param

    def _self_attribute(self, expr: cst.Attribute, attr: str, depth: int) -> str | None:
        klass = self.flow.enclosing_class(expr)
        if klass is None:
            return None
        values = self.flow.self_attr_values(klass, attr)
        if values is None:
            return None
        for site in self.index.calls:
            call = site.node
            if (
                isinstance(call.func, cst.Attribute)
                and call.func.attr.value in ("register_buffer", "register_parameter")
                and len(call.args) >= 2
                and string_value(call.args[0].value) == attr
                and self.flow.enclosing_class(call) is klass
            ):
                values.append(call.args[1].value)
        if not values:
            return None
        kinds = {self.kind(v, v, depth) for v in values if not (isinstance(v, cst.Name) and v.value == "None")}
        return kinds.pop() if len(kinds) == 1 else None


def _torch_returns_tensor(qualname: str, call: cst.Call) -> bool:
    if qualname in _TORCH_FUNCTIONAL_NOT_TENSOR:
        return False
    parts = qualname.split(".")
    if len(parts) == 2:
        name = parts[1]
        if name in _TORCH_MULTI_OK_WITHOUT_DIM:
            return len(call.args) == 1 and call.args[0].keyword is None
        return name not in _TORCH_NOT_TENSOR and name[:1].islower()
    if qualname.startswith(_TORCH_SUBMODULES):
        return parts[-1][:1].islower()
    return False


def _numpy_returns_array(qualname: str) -> bool:
    parts = qualname.split(".")
    if qualname in _NUMPY_ARRAY_CLASSES:
        return False
    return len(parts) == 2 and parts[1] not in _NUMPY_NOT_ARRAY and parts[1][:1].islower()


def _annotation_kind(annotation: cst.BaseExpression, index: ModuleIndex, at: cst.CSTNode) -> str | None:
    if isinstance(annotation, cst.BinaryOperation) and isinstance(annotation.operator, cst.BitOr):
        kinds = {_annotation_kind(side, index, at) for side in (annotation.left, annotation.right)}
        kinds -= {None} if any(_is_none_annotation(s) for s in (annotation.left, annotation.right)) else set()
        return kinds.pop() if len(kinds) == 1 else None
    if isinstance(annotation, cst.Subscript):
        base = index.resolve(annotation.value, at)
        if base in ("typing.Optional",) and len(annotation.slice) == 1:
            inner = annotation.slice[0].slice
            return _annotation_kind(inner.value, index, at) if isinstance(inner, cst.Index) else None
        if base in ("numpy.typing.NDArray", "numpy.ndarray"):
            return NDARRAY
        return None
    if isinstance(annotation, cst.SimpleString):
        text = evaluated_string(annotation)
        if text in ("Tensor", "torch.Tensor"):
            return TENSOR
        return None
    qualname = index.resolve(annotation, at) if isinstance(annotation, (cst.Name, cst.Attribute)) else None
    if qualname in _TENSOR_CLASSES:
        return TENSOR
    if qualname in _NUMPY_ARRAY_CLASSES:
        return NDARRAY
    return None


def _is_none_annotation(node: cst.BaseExpression) -> bool:
    return isinstance(node, cst.Name) and node.value == "None"
