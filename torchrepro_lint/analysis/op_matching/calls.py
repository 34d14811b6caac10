"""Which catalogue API a call is, and what it is given.

A call is an API of the catalogue through its resolved callee (``F.interpolate``,
``nn.Upsample``; ``torch.nn.modules.upsampling.Upsample`` is read as ``torch.nn.Upsample``), or
as a ``torch.Tensor`` method on a receiver that ``receivers.is_tensor`` shows to be a tensor
(never a NumPy array, never an unknown object). A method that only tensors have
(``receivers.TENSOR_ONLY_METHODS``: ``index_add_``, ``scatter_add_``, ``put_``, ...) on a receiver
whose type the module does not show at all (``receivers.is_untyped``: a parameter, an attribute)
in a module that imports no look-alike library (paddle, ...) is the tensor method too, marked
``assumed``: the rules report it only where a program that runs it uses CUDA. A project name that
stands for a catalogue API (``interpolate = F.interpolate``, imported) is that API. A module's
input and target are the arguments of the calls of the instance that this module shows
(``self.loss(out, y)`` for ``self.loss = nn.CrossEntropyLoss()``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

from torchrepro_lint.analysis.dataflow.core import flow
from torchrepro_lint.analysis.module_index import CallSite, ModuleIndex
from torchrepro_lint.analysis.op_matching.values import ABSENT, UNKNOWN, argument
from torchrepro_lint.analysis.receivers import TENSOR_ONLY_METHODS, imports_no_lookalike, is_ndarray, is_tensor, is_untyped
from torchrepro_lint.analysis.syntax import self_attribute
from torchrepro_lint.catalog import ApiRecord, OpEntry

TENSOR_METHOD = "torch.Tensor."


@dataclass
class ApiCall:
    """A call seen as one API: how to find its arguments and its input."""

    site: CallSite
    api_name: str
    form: str
    receiver: cst.BaseExpression | None = None
    index: ModuleIndex | None = field(default=None, repr=False)  # module form: where its instance is used
    assumed: bool = False  # a tensor-only method on a receiver of unknown type (see above)
    _instance_calls: list[cst.Call] | None = field(default=None, repr=False)

    @property
    def instance_calls(self) -> list[cst.Call]:
        """Module form: the calls of the instance (found when first asked: most module-form
        candidates are settled by their constructor's arguments alone)."""
        if self._instance_calls is None:
            self._instance_calls = instance_calls(self.index, self.site.node) if self.index is not None else []
        return self._instance_calls

    def inputs(self) -> list[cst.BaseExpression]:
        if self.form == "method":
            return [self.receiver] if self.receiver is not None else []
        if self.form == "module":
            return [e for e in (argument(c, 0, "input") for c in self.instance_calls) if e is not None and e is not ABSENT and e is not UNKNOWN]
        first = argument(self.site.node, 0, "input")
        return [first] if first is not None and first is not ABSENT and first is not UNKNOWN else []

    def targets(self) -> list[cst.BaseExpression]:
        calls = self.instance_calls if self.form == "module" else [self.site.node]
        out = []
        for c in calls:
            target = argument(c, 1, "target")
            if target is not None and target is not ABSENT and target is not UNKNOWN:
                out.append(target)
        return out


def as_api(
    site: CallSite, index: ModuleIndex, ops: dict[str, list[tuple[OpEntry, ApiRecord]]], methods: set[str], external=None
) -> ApiCall | None:
    """The call as one of the APIs in `ops` (the catalogue's records by API name; `methods`: the
    tensor methods among them), or None. `external(qualname)`: the name outside the project that
    a project name stands for (`interpolate = F.interpolate` in another module), if any."""
    q = _canonical_api(site.qualname)
    if q is not None:
        if q not in ops and external is not None:
            q = _canonical_api(external(q)) or q
        if q in ops and not q.startswith(TENSOR_METHOD):
            form = ops[q][0][1].kind
            return ApiCall(site, q, form, index=index if form == "module" else None)
        return None
    func = site.node.func
    if isinstance(func, cst.Attribute) and func.attr.value in methods:
        receiver = func.value
        if is_tensor(receiver, index, site.node) and not is_ndarray(receiver, index, site.node):
            return ApiCall(site, TENSOR_METHOD + func.attr.value, "method", receiver)
        if func.attr.value in TENSOR_ONLY_METHODS and imports_no_lookalike(index) and is_untyped(receiver, index):
            return ApiCall(site, TENSOR_METHOD + func.attr.value, "method", receiver, assumed=True)
    return None


def instance_calls(index: ModuleIndex, construction: cst.Call) -> list[cst.Call]:
    """`self.crit = nn.CrossEntropyLoss()` -> the `self.crit(...)` calls in its class."""
    expr: cst.CSTNode = construction
    parent = index.parents.get(expr)
    # `nn.CrossEntropyLoss().cuda()`, `.to(device)`: the same module
    while isinstance(parent, cst.Attribute) and parent.attr.value in ("cuda", "to", "cpu", "float", "half", "double"):
        holder = index.parents.get(parent)
        if not (isinstance(holder, cst.Call) and holder.func is parent):
            return []
        expr, parent = holder, index.parents.get(holder)
    if not isinstance(parent, (cst.Assign, cst.AnnAssign)):
        return []
    targets = [t.target for t in parent.targets] if isinstance(parent, cst.Assign) else [parent.target]
    if len(targets) != 1:
        return []
    target = targets[0]
    fl = flow(index)
    out = []
    attr = self_attribute(target) if isinstance(target, cst.Attribute) else None
    if attr is not None:
        klass = fl.enclosing_class(construction)
        if klass is None:
            return []
        for use in fl.self_attr_uses(klass, attr):
            holder = index.parents.get(use)
            if isinstance(holder, cst.Call) and holder.func is use:
                out.append(holder)
        return out
    if isinstance(target, cst.Name):
        owner = fl.owner(construction)
        for use in fl.name_uses(target.value, owner, after=parent):
            holder = index.parents.get(use)
            if isinstance(holder, cst.Call) and holder.func is use:
                out.append(holder)
    return out


def _canonical_api(q: str | None) -> str | None:
    """`torch.nn.modules.upsampling.Upsample` -> `torch.nn.Upsample`."""
    if q is not None and q.startswith("torch.nn.modules."):
        parts = q.split(".")
        if len(parts) == 5:
            return "torch.nn." + parts[4]
    return q
