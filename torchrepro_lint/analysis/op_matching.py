"""Which op-catalogue entries a call reaches: the catalogue's predicates evaluated on code.

``ops_in(index, version, path, uses)`` matches every call of a module once (cached; TRP401 and
TRP402 share it) against the catalogue as it holds in ``version`` and returns ``OpMatch``
records. A call matches an ``[ops.<id>]`` entry through one of its API records when every
condition of the entry and of the record is *known* to hold here:

- the callee: a resolved function or module name (``F.interpolate``, ``nn.Upsample``,
  ``torch.bincount``), or a ``torch.Tensor`` method on a receiver that ``receivers.is_tensor``
  shows to be a tensor (never a NumPy array, never an unknown object);
- ``arg`` / ``ctor_arg`` conditions on arguments, by keyword or position, with literal values
  followed through local constants (``mode = "bilinear"``); an argument with a few known values
  (``"bicubic" if fast else "linear"``, a name assigned in two branches) is matched once per
  value and reported only when every value reaches the rule; an argument that ``*args`` /
  ``**kwargs`` may supply is unknown, except a True/False flag, tried both ways like the above;
  a ``len`` test counts the values of a display (``[left, right, top, bottom]``);
- context conditions from ``tensor_evidence``: ``device``, ``input_ndim``, ``input_dtype``,
  ``input_layout``, ``target_kind`` (class indices unless the target is shown to be floating).
  For a module, the input is the first argument of the calls of the instance that this module
  shows (``self.loss(out, y)`` for ``self.loss = nn.CrossEntropyLoss()``);
- ``requires_grad`` (backward-only entries): false where nothing is differentiated
  (``GradContext.no_grad_reason``: no_grad / inference_mode blocks and decorators, Datasets,
  transforms, collate functions, checkpoint-loading code, Lightning evaluation steps), where the
  op's result only reaches non-differentiable uses (``> 0.5``, ``.gt_()``, ``.long()``,
  ``.item()``), in a module-level function that the project only uses from such code
  (``project_uses.ProjectUses``), and on the data input of a top-level model's ``forward``.

Refinements the catalogue states in words but not as predicates: sums of ones or of integers
(``scatter_add_`` counting degrees) and writes of one constant through duplicate indices give the
same result in any order; ``cumsum`` needs a 1-D input.

Unknown is not a match (precision before recall), with two exceptions that the catalogue's own
facts make safe: entries of one rule whose only unknown is the input's number of dims and that
together cover every valid number (``interpolate(mode="area")`` raises for 3-, 4- and 5-D input),
and CUDA entries on a tensor of unknown device (CUDA is where the hazard is; a tensor shown to be
on the CPU, or data-pipeline code, is not reported). A call that a ``[not_flagged]`` record
covers is never matched.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import libcst as cst

from torchrepro_lint.analysis import tensor_evidence as te
from torchrepro_lint.analysis.dataflow.core import flow
from torchrepro_lint.analysis.module_index import CallSite, ModuleIndex
from torchrepro_lint.analysis.names import LOCAL
from torchrepro_lint.analysis.syntax import evaluated_string, self_attribute
from torchrepro_lint.catalog import ApiRecord, OpEntry, Predicate, Version, load_catalog

from torchrepro_lint.analysis.receivers import is_ndarray, is_tensor  # shared receiver typing

if TYPE_CHECKING:
    from torchrepro_lint.analysis.project_uses import ProjectUses


TENSOR_METHOD = "torch.Tensor."
NO_GRAD = frozenset(
    {"torch.no_grad", "torch.inference_mode", "torch.autograd.no_grad", "torch.autograd.grad_mode.no_grad",
     "torch.autograd.inference_mode", "torch.autograd.grad_mode.inference_mode"}
)  # fmt: skip
ENABLE_GRAD = frozenset({"torch.enable_grad", "torch.autograd.enable_grad", "torch.autograd.grad_mode.enable_grad"})
SET_GRAD = frozenset({"torch.set_grad_enabled", "torch.autograd.set_grad_enabled", "torch.autograd.grad_mode.set_grad_enabled"})
JIT_SCRIPT = frozenset({"torch.jit.script", "torch.jit.script_method"})
LOADERS = frozenset(
    {"torch.load", "torch.hub.load_state_dict_from_url", "torch.utils.model_zoo.load_url", "safetensors.torch.load_file",
     "numpy.load", "torch.jit.load"}
)  # fmt: skip
LOADER_METHODS = frozenset({"load_state_dict", "load_checkpoint", "load_pretrained", "load_from_checkpoint"})
CHECKPOINT_NAME = re.compile(
    r"(^|_)(load|loads|loading|checkpoint|ckpt|state_dict|filter_fn|convert|conversion|remap|port|pretrained)(_|$)"
)
# Resizing weights (position embeddings, relative-position bias tables) to load them at another
# input size: only a fallback for module-level functions the project never references.
WEIGHT_RESIZE_NAME = re.compile(r"(resize|resample|interpolate|rescale)\w*_(pos|posemb|embed|bias|table|rel)")
TRANSFORM_FILES = frozenset({"transforms", "transform", "augmentations", "augmentation", "augment", "augmentor"})
TRANSFORM_NAME = re.compile(
    r"Transform|Augment|Compose|Resize|Crop|Flip|Rotat|Normaliz|ToTensor|Jitter|Blur|Affine|Rescale|Erasing|"
    r"Cutout|Mixup|MixUp|CutMix|Perspective|Grayscale|Posterize|Solarize|Equalize"
)
DATASET_BASES = ("torch.utils.data.", "torchvision.datasets.", "datasets.")
NO_GRAD_STEPS = frozenset({"validation_step", "test_step", "predict_step"})
LIGHTNING = ("lightning.", "pytorch_lightning.")
# Uses of a tensor that autograd cannot go through (the op's backward then never runs).
NONDIFF_METHODS = frozenset(
    "gt gt_ lt lt_ ge ge_ le le_ eq eq_ ne ne_ argmax argmin argsort bool long int byte short char numpy item "
    "tolist detach detach_ round round_ floor floor_ ceil ceil_ sign nonzero any all".split()
)
PASS_METHODS = frozenset(
    "sigmoid sigmoid_ softmax squeeze squeeze_ unsqueeze float half double contiguous view reshape permute "
    "transpose cpu cuda to clamp clamp_ clip flatten abs mul mul_ add add_ sub sub_ div div_ expand expand_as".split()
)
METADATA = frozenset({"shape", "dtype", "device", "ndim", "is_cuda"})
NONDIFF_FUNCTIONS = frozenset({"torch.argmax", "torch.argmin", "torch.argsort", "torch.nonzero", "torch.round", "torch.sign"})
PASS_FUNCTIONS = frozenset({"torch.sigmoid", "torch.softmax", "torch.nn.functional.softmax", "torch.squeeze", "torch.clamp"})
# Possible input dims of an API, to know when the ndim-gated entries together cover every case.
VALID_NDIMS = {
    "torch.nn.functional.interpolate": frozenset({3, 4, 5}),
    "torch.nn.Upsample": frozenset({3, 4, 5}),
}
# Refinements the catalogue states in words (`condition`) but not as predicates.
ONE_DIMENSIONAL = frozenset({"cumsum"})  # multi-dim cumsums use per-row scans, deterministic anyway
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
# Writes through possibly duplicate indices: harmless when every write carries the same value.
SAME_VALUE_ENTRIES = frozenset({"scatter_src", "index_put_no_accumulate", "index_copy"})
CONSTANT_FACTORIES = frozenset({"torch.ones", "torch.ones_like", "torch.zeros", "torch.zeros_like", "torch.full", "torch.full_like"})
NEVER_NONE = frozenset({"dim"})  # parameters that cannot be None: passing one means it is present


@dataclass(frozen=True)
class OpMatch:
    """A call that reaches catalogue entries (of one rule: several only when they cover one case)."""

    entries: tuple[OpEntry, ...]
    api: ApiRecord
    site: CallSite
    form: str  # "function" | "method" | "module"
    shown: str  # the call, short: "F.interpolate(..., mode='bilinear')"
    evidence: str = ""  # where a context condition was shown, e.g. "its input at line 12 has 4 dims"

    @property
    def entry(self) -> OpEntry:
        return self.entries[0]

    @property
    def rule(self) -> str:
        return self.entries[0].rule

    @property
    def ids(self) -> str:
        return ", ".join(e.id for e in self.entries)


def ops_in(index: ModuleIndex, version: Version, path: str = "", uses: ProjectUses | None = None) -> list[OpMatch]:
    """Every catalogue match in the module (both rules), computed once per index and version.

    With `uses` (the project's), a backward-only op in a module-level function that the project
    only uses from code without gradients is not matched either."""
    per_index = index.derived.setdefault("ops", {})
    key = (version, path)
    if key not in per_index:
        per_index[key] = _Matcher(index, version, path, uses).run()
    return per_index[key]


def named(index: ModuleIndex, name: str) -> list[cst.CSTNode]:
    """The Name nodes `name` and the Attribute nodes `<expr>.name` of the module, together in
    source order."""
    fl = flow(index)
    names, attributes = fl.names_called(name), fl.attribute_names.get(name, ())
    if not attributes or not names:
        return list(names or attributes)
    return sorted([*names, *attributes], key=fl.pos)


def module_level_function(index: ModuleIndex, node: cst.CSTNode) -> cst.FunctionDef | None:
    function = None
    for ancestor in index.ancestors(node):
        if isinstance(ancestor, cst.FunctionDef):
            function = ancestor
        elif isinstance(ancestor, cst.ClassDef):
            return None
    if function is not None and isinstance(index.parents.get(function), cst.Module):
        return function
    return None


# -- values ----------------------------------------------------------------------------------
_UNKNOWN = object()
ABSENT = object()


class _Values:
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


# -- where nothing is differentiated ----------------------------------------------------------
class GradContext:
    """Why the code at a node runs without autograd (or on data, not parameters), if it does."""

    def __init__(self, index: ModuleIndex, path: str = "") -> None:
        self.index = index
        self.flow = flow(index)
        stem = path.rsplit("/", 1)[-1].rsplit(".", 1)[0] if path else ""
        self.transform_file = stem in TRANSFORM_FILES
        self._collate: set[str] | None = None
        self._checkpoint: dict[int, bool] = {}
        self._calls_in: dict[int, list[CallSite]] = {}  # id(function) -> its call sites
        self._calls_of: dict[str, list[CallSite]] = {}  # `name(...)` call sites by name
        self._calls_indexed = False

    def no_grad_reason(self, node: cst.CSTNode) -> str | None:
        """'under `torch.no_grad()`', 'in a Dataset', ... or None when gradients may flow."""
        for ancestor in self.index.ancestors(node):
            if isinstance(ancestor, cst.With):
                state = self._with_state(ancestor)
                if state is not None:
                    return state or None
            elif isinstance(ancestor, cst.FunctionDef):
                state = self._decorator_state(ancestor)
                if state is not None:
                    return state or None
                reason = self._function_reason(ancestor)
                if reason:
                    return reason
            elif isinstance(ancestor, cst.ClassDef):
                reason = self._class_reason(ancestor, node)
                if reason:
                    return reason
        return self.data_reason(node, classes=False)

    def data_reason(self, node: cst.CSTNode, classes: bool = True) -> str | None:
        """Data-pipeline code (datasets, transforms, collate functions): CPU tensors, no autograd."""
        if self.transform_file:
            return "in a transforms module"
        if not classes:
            return None
        for ancestor in self.index.ancestors(node):
            if isinstance(ancestor, cst.FunctionDef) and self._is_collate(ancestor):
                return "in a collate function"
            if isinstance(ancestor, cst.ClassDef):
                if self.is_dataset(ancestor):
                    return "in a Dataset"
                if self.is_transform(ancestor):
                    return "in a transform"
        return None

    # grad-mode context managers and decorators: "" = gradients on (stop looking), text = off
    def _grad_state(self, expr: cst.BaseExpression, at: cst.CSTNode) -> str | None:
        call = expr if isinstance(expr, cst.Call) else None
        target = call.func if call is not None else expr
        q = self.index.resolve(target, at) if isinstance(target, (cst.Name, cst.Attribute)) else None
        if q in NO_GRAD:
            return f"under `{q.rsplit('.', 1)[-1]}()`"
        if q in ENABLE_GRAD:
            return ""
        if q is not None and q not in ENABLE_GRAD and q.rsplit(".", 1)[-1].lower().endswith(("inference_mode", "no_grad")):
            return f"under `@{q.rsplit('.', 1)[-1]}`"  # a project wrapper (yolov5's smart_inference_mode)
        if q in SET_GRAD and call is not None and call.args:
            value = call.args[0].value
            if isinstance(value, cst.Name) and value.value == "False":
                return "under `set_grad_enabled(False)`"
            if isinstance(value, cst.Name) and value.value == "True":
                return ""
        return None

    def _with_state(self, node: cst.With) -> str | None:
        for item in node.items:
            state = self._grad_state(item.item, node)
            if state is not None:
                return state
        return None

    def _decorator_state(self, function: cst.FunctionDef) -> str | None:
        for decorator in function.decorators:
            state = self._grad_state(decorator.decorator, function)
            if state is not None:
                return state
        return None

    def _function_reason(self, function: cst.FunctionDef) -> str | None:
        if self._is_collate(function):
            return "in a collate function"
        if self.is_checkpoint_code(function):
            return "in checkpoint-loading code"
        klass = self.index.enclosing(function, cst.ClassDef)
        if function.name.value in NO_GRAD_STEPS and klass is not None and self._is_lightning(klass):
            return f"in `{function.name.value}` (Lightning runs it without gradients)"
        return None

    def _class_reason(self, klass: cst.ClassDef, node: cst.CSTNode) -> str | None:
        if self.is_dataset(klass):
            return "in a Dataset"
        if self.is_transform(klass):
            return "in a transform"
        return None

    # -- classes ----------------------------------------------------------------------------
    def _bases(self, klass: cst.ClassDef) -> list[str]:
        out = []
        for base in klass.bases:
            q = self.index.resolve(base.value, klass) if isinstance(base.value, (cst.Name, cst.Attribute)) else None
            if q:
                out.append(q)
        return out

    def _local_class(self, qualname: str) -> cst.ClassDef | None:
        return self.index.classes.get(qualname[len(LOCAL):]) if qualname.startswith(LOCAL) else None

    def _derives(self, klass: cst.ClassDef, test, depth: int = 0) -> bool:
        if depth > 8:
            return False
        for q in self._bases(klass):
            if test(q):
                return True
            local = self._local_class(q)
            if local is not None and self._derives(local, test, depth + 1):
                return True
        return False

    def is_module_class(self, klass: cst.ClassDef) -> bool:
        def test(q: str) -> bool:
            return (q.startswith("torch.nn.") and not q.startswith("torch.nn.functional")) or q.startswith(LIGHTNING)

        if self._derives(klass, lambda q: q.startswith("torch.autograd.")):
            return False  # torch.autograd.Function: `forward(ctx, ...)` is not a module's
        return self._derives(klass, test) or "forward" in self.flow.methods(klass)

    def _is_lightning(self, klass: cst.ClassDef) -> bool:
        return self._derives(klass, lambda q: q.startswith(LIGHTNING))

    def is_dataset(self, klass: cst.ClassDef) -> bool:
        def test(q: str) -> bool:
            last = q.rsplit(".", 1)[-1]
            return last.endswith("Dataset") or q.startswith(DATASET_BASES)

        if self._derives(klass, test):
            return True
        methods = self.flow.methods(klass)
        return "__getitem__" in methods and "__len__" in methods and not self.is_module_class(klass)

    def is_transform(self, klass: cst.ClassDef) -> bool:
        if self._derives(klass, lambda q: q.startswith(("torchvision.transforms", "albumentations", "kornia.augmentation"))):
            return True
        methods = self.flow.methods(klass)
        if "__call__" not in methods or self.is_module_class(klass):
            return False
        return bool(TRANSFORM_NAME.search(klass.name.value)) or self._used_in_compose(klass)

    def _used_in_compose(self, klass: cst.ClassDef) -> bool:
        local = LOCAL + klass.name.value
        for site in self.index.calls:
            if site.qualname and site.qualname.endswith(".Compose"):
                for element in _list_elements(site.node):
                    if isinstance(element, cst.Call) and self.index.resolve(element.func, element) == local:
                        return True
        return False

    # -- functions --------------------------------------------------------------------------
    def _is_collate(self, function: cst.FunctionDef) -> bool:
        if "collate" in function.name.value.lower():
            return True
        if self._collate is None:
            self._collate = set()
            for site in self.index.calls:
                for a in site.node.args:
                    if a.keyword is not None and a.keyword.value == "collate_fn" and isinstance(a.value, cst.Name):
                        self._collate.add(a.value.value)
        return function.name.value in self._collate

    def is_checkpoint_code(self, function: cst.FunctionDef, depth: int = 0) -> bool:
        key = id(function)
        if key in self._checkpoint:
            return self._checkpoint[key]
        self._checkpoint[key] = False  # cycles: not by themselves
        result = self._checkpoint_code(function, depth)
        self._checkpoint[key] = result
        return result

    def _checkpoint_code(self, function: cst.FunctionDef, depth: int) -> bool:
        name = function.name.value.lower()
        if CHECKPOINT_NAME.search(name):
            return True
        if not self._calls_indexed:
            self._calls_indexed = True
            for site in self.index.calls:  # both keep the order of index.calls
                self._calls_in.setdefault(id(self.index.enclosing(site.node, cst.FunctionDef)), []).append(site)
                if type(site.node.func) is cst.Name:
                    self._calls_of.setdefault(site.node.func.value, []).append(site)
        for site in self._calls_in.get(id(function), ()):
            if site.qualname in LOADERS:
                return True
            if isinstance(site.node.func, cst.Attribute) and site.node.func.attr.value in LOADER_METHODS:
                return True
        if depth > 3 or self.index.enclosing(function, cst.ClassDef) is not None:
            return False
        # A module-level helper called only from checkpoint-loading functions of this module.
        callers = self._calls_of.get(function.name.value, ())
        if not callers:
            return False
        for site in callers:
            caller = self.index.enclosing(site.node, cst.FunctionDef)
            if caller is None or caller is function or not self.is_checkpoint_code(caller, depth + 1):
                return False
        return True

    def result_not_differentiated(self, node: cst.BaseExpression, depth: int = 0) -> bool:
        """The value of `node` only reaches uses that autograd cannot go through: comparisons,
        thresholds (`.gt_(0.5)`), casts to integers or bool, `.detach()`, `.numpy()`, `.item()`,
        `argmax`, `.shape`. Followed through shape/elementwise methods, arithmetic, indexing and
        local variables (up to their next assignment)."""
        if depth > 6:
            return False
        expr: cst.CSTNode = node
        parents = self.index.parents
        while True:
            parent = parents.get(expr)
            if isinstance(parent, cst.Subscript) and parent.value is expr:
                expr = parent
            elif isinstance(parent, cst.Attribute) and parent.value is expr:
                holder = parents.get(parent)
                method = parent.attr.value
                if not (isinstance(holder, cst.Call) and holder.func is parent):
                    return method in METADATA
                if method in NONDIFF_METHODS:
                    return True
                if method not in PASS_METHODS:
                    return False
                expr = holder
            elif isinstance(parent, cst.Comparison):
                return True
            elif isinstance(parent, (cst.BinaryOperation, cst.UnaryOperation)):
                if isinstance(parent, cst.UnaryOperation) and isinstance(parent.operator, cst.Not):
                    return True
                expr = parent
            elif isinstance(parent, cst.Arg):
                call = parents.get(parent)
                if not isinstance(call, cst.Call) or parent.keyword is not None:
                    return False
                q = self.index.resolve(call.func, call) if isinstance(call.func, (cst.Name, cst.Attribute)) else None
                if q in NONDIFF_FUNCTIONS:
                    return True
                if q not in PASS_FUNCTIONS:
                    return False
                expr = call
            elif isinstance(parent, (cst.Assign, cst.AnnAssign)) and parent.value is expr:
                return self._uses_not_differentiated(parent, depth)
            else:
                return False

    def _uses_not_differentiated(self, statement, depth: int) -> bool:
        targets = [t.target for t in statement.targets] if isinstance(statement, cst.Assign) else [statement.target]
        if len(targets) != 1 or not isinstance(targets[0], cst.Name):
            return False
        name = targets[0].value
        owner = self.flow.owner(statement)
        start = self.flow.pos(statement)
        later = [s for s, _ in self.flow.bindings(name, owner) if self.flow.pos(s) > start]
        end = min((self.flow.pos(s) for s in later), default=None)
        uses = []
        for use in self.flow.name_uses(name, owner, after=statement):
            position = self.flow.pos(use)
            if end is not None and position > end and not any(self.flow.inside(use, s) for s in later[:1]):
                continue
            uses.append(use)
        if not uses:
            return False
        return all(self.result_not_differentiated(use, depth + 1) for use in uses)

    def torchscript(self, node: cst.CSTNode) -> bool:
        for ancestor in self.index.ancestors(node):
            if isinstance(ancestor, cst.FunctionDef):
                for decorator in ancestor.decorators:
                    d = decorator.decorator
                    target = d.func if isinstance(d, cst.Call) else d
                    if isinstance(target, (cst.Name, cst.Attribute)) and self.index.resolve(target, ancestor) in JIT_SCRIPT:
                        return True
        return False


def _list_elements(call: cst.Call) -> list[cst.BaseExpression]:
    if call.args and isinstance(call.args[0].value, (cst.List, cst.Tuple)):
        return [e.value for e in call.args[0].value.elements]
    return []


# -- the matcher -----------------------------------------------------------------------------
@dataclass
class _Call:
    """A call seen as one API: how to find its arguments and its input."""

    site: CallSite
    api_name: str
    form: str
    receiver: cst.BaseExpression | None = None
    instance_calls: list[cst.Call] = field(default_factory=list)  # module form: calls of the instance


class _Matcher:
    def __init__(self, index: ModuleIndex, version: Version, path: str, uses: ProjectUses | None = None) -> None:
        self.index = index
        self.version = version
        self.uses = uses
        self._forced: dict = {}
        self._memo: dict = {}
        self._last_evidence = ""
        self.module = None
        if uses is not None:
            self.module = next((m for m in uses.project.modules.values() if m.source is index.source), None)
        self.values = _Values(index)
        self.grad = GradContext(index, path)
        catalog = load_catalog()
        self.ops: dict[str, list[tuple[OpEntry, ApiRecord]]] = {}
        for entry in catalog.entries_for(version):
            if not entry.report:
                continue
            for api in entry.apis_for(version):
                if api.report:
                    self.ops.setdefault(api.name, []).append((entry, api))
        self.traps: dict[str, list[ApiRecord]] = {}
        for trap in catalog.not_flagged:
            if trap.holds_in(version):
                for api in trap.apis:
                    if api.holds_in(version):
                        self.traps.setdefault(api.name, []).append(api)
        self.methods = {name[len(TENSOR_METHOD):] for name in self.ops if name.startswith(TENSOR_METHOD)}

    def run(self) -> list[OpMatch]:
        out: list[OpMatch] = []
        for site in self.index.calls:
            call = self._as_api(site)
            if call is None:
                continue
            out.extend(self._match(call))
        return out

    # -- which API a call is ----------------------------------------------------------------
    def _as_api(self, site: CallSite) -> _Call | None:
        q = _canonical_api(site.qualname)
        if q is not None:
            if q in self.ops and not q.startswith(TENSOR_METHOD):
                form = self.ops[q][0][1].kind
                call = _Call(site, q, form)
                if form == "module":
                    call.instance_calls = self._instance_calls(site.node)
                return call
            return None
        func = site.node.func
        if isinstance(func, cst.Attribute) and func.attr.value in self.methods:
            receiver = func.value
            if is_tensor(receiver, self.index, site.node) and not is_ndarray(receiver, self.index, site.node):
                return _Call(site, TENSOR_METHOD + func.attr.value, "method", receiver)
        return None

    def _instance_calls(self, construction: cst.Call) -> list[cst.Call]:
        """`self.crit = nn.CrossEntropyLoss()` -> the `self.crit(...)` calls in its class."""
        expr: cst.CSTNode = construction
        parent = self.index.parents.get(expr)
        # `nn.CrossEntropyLoss().cuda()`, `.to(device)`: the same module
        while isinstance(parent, cst.Attribute) and parent.attr.value in ("cuda", "to", "cpu", "float", "half", "double"):
            holder = self.index.parents.get(parent)
            if not (isinstance(holder, cst.Call) and holder.func is parent):
                return []
            expr, parent = holder, self.index.parents.get(holder)
        if not isinstance(parent, (cst.Assign, cst.AnnAssign)):
            return []
        targets = [t.target for t in parent.targets] if isinstance(parent, cst.Assign) else [parent.target]
        if len(targets) != 1:
            return []
        target = targets[0]
        fl = self.values.flow
        out = []
        attr = self_attribute(target) if isinstance(target, cst.Attribute) else None
        if attr is not None:
            klass = fl.enclosing_class(construction)
            if klass is None:
                return []
            for use in fl.self_attr_uses(klass, attr):
                holder = self.index.parents.get(use)
                if isinstance(holder, cst.Call) and holder.func is use:
                    out.append(holder)
            return out
        if isinstance(target, cst.Name):
            owner = fl.owner(construction)
            for use in fl.name_uses(target.value, owner, after=parent):
                holder = self.index.parents.get(use)
                if isinstance(holder, cst.Call) and holder.func is use:
                    out.append(holder)
        return out

    # -- matching ---------------------------------------------------------------------------
    def _match(self, call: _Call) -> list[OpMatch]:
        """Match the call; an argument with a few known values (`"bicubic" if fast else "linear"`)
        is matched once per value, and a rule is reported when every value reaches it."""
        name, values = self._split_argument(call)
        if not values:
            return self._match_once(call)
        per_rule: dict[str, list[OpMatch]] = {}
        for value in values:
            self._forced = {name: value}
            try:
                found = self._match_once(call)
            finally:
                self._forced = {}
            rules = {m.rule for m in found}
            for match in found:
                per_rule.setdefault(match.rule, []).append(match)
            for rule in list(per_rule):
                if rule not in rules:
                    per_rule[rule] = []
            if not found:
                return []
        out = []
        for rule, group in sorted(per_rule.items()):
            if len(group) < len(values):
                continue
            entries = tuple({e.id: e for m in group for e in m.entries}.values())
            first = group[0]
            out.append(OpMatch(entries, first.api, first.site, first.form, first.shown, first.evidence))
        return out

    def _split_argument(self, call: _Call):
        predicates = [p for entry, api in self.ops.get(call.api_name, ()) for p in (*entry.when, *api.when)]
        names = {p.name: p for p in predicates if p.subject in ("arg", "ctor_arg")}
        for name, p in names.items():
            expr = _argument(call.site.node, None if p.keyword_only else p.pos, name)
            if isinstance(expr, (cst.IfExp, cst.Name)):
                values = self.values.of(expr)
                if values is not None and 1 < len(values) <= 4:
                    return name, sorted(values, key=repr)
        # A flag tested only against True/False whose value is not known (`antialias=self.flag`,
        # or absent with `**kwargs` that may pass it) can take just those two values: matched
        # with each, it silences the call only where it changes the verdict.
        for name, p in names.items():
            tests = [q for q in predicates if q.name == name and q.subject == p.subject]
            if not all(q.test == "equals" and isinstance(q.value, bool) for q in tests):
                continue
            expr = _argument(call.site.node, None if p.keyword_only else p.pos, name)
            if expr is _UNKNOWN or (expr is not ABSENT and self.values.of(expr) is None):
                return name, [False, True]
        return None, []

    def _match_once(self, call: _Call) -> list[OpMatch]:
        for trap in self.traps.get(call.api_name, ()):
            if self._holds(call, trap.when, None) is True:
                return []
        by_rule: dict[str, list[tuple[OpEntry, ApiRecord, str]]] = {}
        ndim_only: dict[str, list[tuple[OpEntry, ApiRecord, frozenset]]] = {}
        for entry, api in self.ops.get(call.api_name, ()):
            result, unknown = self._evaluate(call, entry, api)
            if result is True:
                by_rule.setdefault(entry.rule, []).append((entry, api, self._last_evidence))
            elif result is None and unknown and all(p.name == "input_ndim" and p.test == "in" for p in unknown):
                ndim_only.setdefault(entry.rule, []).append((entry, api, frozenset(v for p in unknown for v in p.value)))
        valid = VALID_NDIMS.get(call.api_name)
        if valid:
            for rule, group in ndim_only.items():
                if rule not in by_rule and valid <= frozenset().union(*(g[2] for g in group)):
                    by_rule[rule] = [(e, a, "") for e, a, _ in group]
        out = []
        for rule, group in sorted(by_rule.items()):
            entries = tuple({e.id: e for e, _, _ in group}.values())
            api = group[0][1]
            evidence = next((ev for _, _, ev in group if ev), "")
            out.append(OpMatch(entries, api, call.site, call.form, self._shown(call, group), evidence))
        return out

    def _evaluate(self, call: _Call, entry: OpEntry, api: ApiRecord):
        """(True, []) when the entry is shown to apply, (False, []) when shown not to, else
        (None, the predicates that stayed unknown). Cheap argument tests run first."""
        self._last_evidence = ""
        evidence = ""
        unknown: list[Predicate] = []
        predicates = (*entry.when, *api.when)
        ordered = [p for p in predicates if p.subject != "context"] + [p for p in predicates if p.subject == "context"]
        for predicate in ordered:
            if predicate.subject == "context":
                key = (id(call.site.node), predicate.name, predicate.test, repr(predicate.value))
                if key not in self._memo:
                    self._last_evidence = ""
                    self._memo[key] = (self._predicate(call, predicate), self._last_evidence)
                value, found = self._memo[key]
                evidence = evidence or found
            else:
                value = self._predicate(call, predicate)
            if value is False:
                return False, []
            if value is None:
                unknown.append(predicate)
        device = self._device_ok(call, entry)
        if device is False:
            return False, []
        if device is None:
            unknown.append(Predicate("context", "device", "equals", entry.device))
        if entry.id in EXACT_SUM_ENTRIES and self._exact_sum(call):
            return False, []
        if entry.id in SAME_VALUE_ENTRIES and self._constant_written(call):
            return False, []
        if entry.id in ONE_DIMENSIONAL:
            value = self._one_dimensional(call)
            if value is False:
                return False, []
            if value is None:
                unknown.append(Predicate("context", "input_ndim", "equals", 1))
        self._last_evidence = evidence
        return (None, unknown) if unknown else (True, [])

    def _holds(self, call: _Call, predicates, entry) -> bool | None:
        result: bool | None = True
        for predicate in predicates:
            value = self._predicate(call, predicate)
            if value is False:
                return False
            if value is None:
                result = None
        return result

    def _device_ok(self, call: _Call, entry: OpEntry) -> bool | None:
        if entry.device == "any":
            return True
        if entry.device == "cuda" and self.grad.data_reason(call.site.node):
            return False  # data-pipeline code works on CPU tensors
        kind = self._device_of(call)
        if entry.device == "cuda":
            return kind != te.CPU
        return True if kind == te.CPU else (False if kind == te.CUDA else None)

    # -- predicates -------------------------------------------------------------------------
    def _predicate(self, call: _Call, p: Predicate) -> bool | None:
        if p.subject in ("arg", "ctor_arg"):
            return self._arg_predicate(call, p)
        name = p.name
        if name == "requires_grad":
            return self._differentiated(call) == p.value
        if name in ("det_mode_at_forward", "det_mode_at_backward"):
            return True  # how the deterministic alternative is reached, not whether the op is used
        if name == "torchscript":
            return self.grad.torchscript(call.site.node) == p.value
        if name == "cudnn_ctc_path":
            return p.value is False  # the native path unless int32 targets etc. are shown: assumed
        if name == "index_kind":
            return None
        if name == "device":
            kind = self._device_of(call)
            return None if kind is None else kind == p.value
        if name == "input_ndim":
            dims = f"{p.value} or more" if p.test == "min" else " or ".join(map(str, p.value))
            return self._over_inputs(call, lambda e: _ndim_test(te.ndim_range(e, self.index), p), f"{dims} dims")
        if name == "input_dtype":
            return self._over_inputs(call, lambda e: _dtype_test(te.dtype_kind(e, self.index), p.value), f"{p.value} dtype")
        if name == "input_layout":
            return self._over_inputs(call, lambda e: _layout_test(te.layout_kind(e, self.index), p.value), f"{p.value} layout")
        if name == "target_kind":
            return self._target_kind(call, p.value)
        return None

    def _device_of(self, call: _Call) -> str | None:
        key = (id(call.site.node), "device-of")
        if key not in self._memo:
            kinds = {te.device_kind(e, self.index) for e in self._inputs(call)}
            self._memo[key] = kinds.pop() if len(kinds) == 1 else None
        return self._memo[key]

    def _over_inputs(self, call: _Call, test, what: str) -> bool | None:
        inputs = self._inputs(call)
        results = [(test(e), e) for e in inputs]
        for result, expr in results:
            if result is True:
                if call.form == "module":
                    row = self._row(expr)
                    self._last_evidence = f"called at line {row} on an input with {what}" if row else ""
                return True
        if results and all(r is False for r, _ in results):
            return False
        return None

    def _inputs(self, call: _Call) -> list[cst.BaseExpression]:
        if call.form == "method":
            return [call.receiver] if call.receiver is not None else []
        if call.form == "module":
            return [e for e in (_argument(c, 0, "input") for c in call.instance_calls) if e is not None and e is not ABSENT and e is not _UNKNOWN]
        first = _argument(call.site.node, 0, "input")
        return [first] if first is not None and first is not ABSENT and first is not _UNKNOWN else []

    def _targets(self, call: _Call) -> list[cst.BaseExpression]:
        calls = call.instance_calls if call.form == "module" else [call.site.node]
        out = []
        for c in calls:
            target = _argument(c, 1, "target")
            if target is not None and target is not ABSENT and target is not _UNKNOWN:
                out.append(target)
        return out

    def _target_kind(self, call: _Call, wanted: str) -> bool | None:
        # Class indices unless the target is shown to be floating (probabilities): the usual case.
        kinds = {te.dtype_kind(t, self.index) for t in self._targets(call)}
        kind = "probabilities" if kinds == {te.FLOATING} else "class_indices"
        if kinds and te.FLOATING in kinds and len(kinds) > 1:
            return None
        return kind == wanted

    def _exact_sum(self, call: _Call) -> bool:
        """The values summed are ones (counting) or integers: every order gives the same result."""
        method = call.api_name.rsplit(".", 1)[-1]
        spec = VALUE_ARGUMENT.get(method)
        if spec is None:
            return False
        keyword, position = spec
        node = call.site.node
        summed = _argument(node, position if call.form == "method" else position + 1, keyword)
        if any(te.dtype_kind(e, self.index) in (te.INTEGER, te.BOOL) for e in self._inputs(call)):
            return True
        if not isinstance(summed, cst.BaseExpression):
            return False
        if te.dtype_kind(summed, self.index) in (te.INTEGER, te.BOOL):
            return True
        return self._ones(summed, 0)

    def _constant_written(self, call: _Call) -> bool:
        """Every write carries the same value (a scalar, `torch.ones(...)`, `x.new_zeros(...)`)."""
        method = call.api_name.rsplit(".", 1)[-1]
        spec = VALUE_ARGUMENT.get(method)
        if spec is None:
            return False
        keyword, position = spec
        written = _argument(call.site.node, position if call.form == "method" else position + 1, keyword)
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
        if depth > 4:
            return False
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
            if func.attr.value == "new_ones":
                return True
            if func.attr.value in ("expand", "expand_as", "view", "reshape", "to", "float", "cuda", "unsqueeze"):
                return self._ones(func.value, depth + 1)
        return False

    def _one_dimensional(self, call: _Call) -> bool | None:
        one = Predicate("context", "input_ndim", "in", (1,))
        return self._over_inputs(call, lambda e: _ndim_test(te.ndim_range(e, self.index), one), "1 dim")

    def _differentiated(self, call: _Call) -> bool:
        node = call.site.node
        if self.grad.no_grad_reason(node):
            return False
        if call.form != "module" and self.grad.result_not_differentiated(node):
            return False
        if self._data_inputs(call):
            return False
        outer = module_level_function(self.index, node)
        if outer is not None and self.uses is not None and self.module is not None:
            if self.uses.only_without_grad(self.module, outer.name.value):
                return False
            if WEIGHT_RESIZE_NAME.search(outer.name.value) and not self.uses.references(self.module, outer.name.value):
                return False
        helper = self._plain_class(node)
        if helper is not None and self.uses is not None and self.module is not None:
            # a helper object (not an nn.Module) that the project only builds and uses in code
            # without gradients, like a pipeline's tiling helper made in its no_grad `__call__`
            if self.uses.only_without_grad(self.module, helper.name.value):
                return False
        if call.form == "module" and call.instance_calls:
            if all(self.grad.no_grad_reason(c) for c in call.instance_calls):
                return False
        return True

    def _plain_class(self, node: cst.CSTNode) -> cst.ClassDef | None:
        """The module-level class whose method holds `node`, when it is not an nn.Module (or
        Lightning) class: no base class at all, or none that makes it one."""
        klass = self.index.enclosing(node, cst.ClassDef)
        if klass is None or not isinstance(self.index.parents.get(klass), cst.Module):
            return None
        no_bases = all(isinstance(b.value, cst.Name) and b.value.value == "object" for b in klass.bases)
        return klass if no_bases or not self.grad.is_module_class(klass) else None  # `forward` alone does not make a module

    def _data_inputs(self, call: _Call) -> bool:
        """The op's input is an argument of `forward` of a top-level model (one that no nn.Module
        class of the project builds): data, which does not require gradients."""
        if self.uses is None or self.module is None:
            return False
        inputs = self._inputs(call)
        return bool(inputs) and all(self._model_input(e) for e in inputs)

    def _model_input(self, expr: cst.BaseExpression) -> bool:
        if not isinstance(expr, cst.Name):
            return False
        fl = self.values.flow
        param = fl.parameter(expr)
        if param is None:
            return False
        function = fl.owner(expr)
        if not isinstance(function, cst.FunctionDef) or function.name.value != "forward":
            return False
        klass = self.index.enclosing(function, cst.ClassDef)
        if klass is None or self.index.parents.get(self.index.parents.get(function)) is not klass:
            return False
        positional = [*function.params.posonly_params, *function.params.params]
        if not positional or positional[0] is param or not self.grad.is_module_class(klass):
            return False
        return isinstance(self.index.parents.get(klass), cst.Module) and self.uses.top_level_model(self.module, klass)

    def no_grad_reason(self, node: cst.CSTNode) -> str | None:
        return self.grad.no_grad_reason(node)

    def _arg_predicate(self, call: _Call, p: Predicate) -> bool | None:
        node = call.site.node
        if p.name in self._forced:
            return _test_value(p, self._forced[p.name])
        expr = _argument(node, None if p.keyword_only else p.pos, p.name)
        if expr is _UNKNOWN:
            return None
        if expr is ABSENT:
            if p.test == "present":
                return p.value is False
            if p.has_default:
                return _test_value(p, p.default)
            if p.test == "not_equals":
                return True  # the signature's default (None) differs from any value tested against
            return False
        if p.test == "type":
            if p.value == "Tensor":
                if is_tensor(expr, self.index, node):
                    return True
                values = self.values.of(expr)
                return False if values is not None and all(isinstance(v, (int, float)) for v in values) else None
            if p.value == "Scalar":
                values = self.values.of(expr)
                if values is not None:
                    return all(isinstance(v, (int, float)) for v in values)
                return False if is_tensor(expr, self.index, node) else None
            return None
        if p.test == "len":
            length = _display_length(self.values.flow, expr)
            if length is not None:  # `[left, right, top, bottom]`: 4 values whatever they are
                return length == p.value
        values = self.values.of(expr)
        if p.test == "present":
            if values is not None:
                if values == frozenset({None}):
                    return p.value is False
                if None not in values:
                    return p.value is True
                return None
            if p.name in NEVER_NONE or is_tensor(expr, self.index, node):
                return p.value is True
            return None
        if values is None:
            return None
        results = {_test_value(p, v) for v in values}
        if None in results or len(results) != 1:
            return None
        return results.pop()

    # -- presentation -----------------------------------------------------------------------
    def _row(self, node: cst.CSTNode) -> int | None:
        try:
            return self.index.source.span(node)[0]
        except Exception:  # a node the source cannot place
            return None

    def _shown(self, call: _Call, group) -> str:
        """The call as written when it is short, else its callee and the arguments that matter."""
        code = self.index.module.code_for_node
        whole = " ".join(code(call.site.node).split())
        if len(whole) <= 60:
            return whole
        callee = " ".join(code(call.site.node.func).split())
        if len(callee) > 40:
            callee = "..." + callee[-37:]
        shown = []
        for _, api, _ in group:
            for p in api.when:
                if p.subject not in ("arg", "ctor_arg"):
                    continue
                expr = _argument(call.site.node, None if p.keyword_only else p.pos, p.name)
                if expr is ABSENT or expr is _UNKNOWN or expr is None:
                    continue
                text = " ".join(code(expr).split())
                text = text if len(text) <= 24 else text[:21] + "..."
                item = f"{p.name}={text}"
                if item not in shown:
                    shown.append(item)
        first = [] if call.form != "function" else [a for a in call.site.node.args[:1] if a.keyword is None and not a.star]
        lead = " ".join(code(first[0].value).split()) if first else ""
        lead = lead if 0 < len(lead) <= 30 and not any(item.startswith(lead) for item in shown) else ""
        parts = ([lead] if lead else []) + ["..."] + shown
        return f"{callee}({', '.join(parts)})"


def _canonical_api(q: str | None) -> str | None:
    """`torch.nn.modules.upsampling.Upsample` -> `torch.nn.Upsample`."""
    if q is not None and q.startswith("torch.nn.modules."):
        parts = q.split(".")
        if len(parts) == 5:
            return "torch.nn." + parts[4]
    return q


def _argument(call: cst.Call, position: int | None, keyword: str | None):
    """The argument bound to a parameter; ABSENT when the call does not pass it; _UNKNOWN when
    `*args` / `**kwargs` may."""
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
        return _UNKNOWN
    if any(a.star == "**" for a in call.args):
        return _UNKNOWN
    return ABSENT


def _display_length(fl, expr: cst.BaseExpression, depth: int = 0) -> int | None:
    """How many values a tuple/list display holds (names, `+` of displays, through names
    every binding of which before the use is such a display); None when not fixed by the code."""
    if depth > 6:
        return None
    if isinstance(expr, (cst.Tuple, cst.List)):
        if any(isinstance(e, cst.StarredElement) for e in expr.elements):
            return None
        return len(expr.elements)
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Add):
        left, right = _display_length(fl, expr.left, depth + 1), _display_length(fl, expr.right, depth + 1)
        return left + right if left is not None and right is not None else None
    if isinstance(expr, cst.Name) and fl.parameter(expr) is None:
        here = fl.pos(expr)
        values = [v for s, v in fl.bindings(expr.value, fl.owner(expr)) if fl.pos(s) < here and not fl.inside(expr, s)]
        if not values or any(v is None for v in values):
            return None
        lengths = {_display_length(fl, v, depth + 1) for v in values}
        return lengths.pop() if len(lengths) == 1 and None not in lengths else None
    return None


def _test_value(p: Predicate, value) -> bool | None:
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


def _ndim_test(found, p: Predicate) -> bool | None:
    if found is None:
        return None
    lo, hi = found
    if p.test == "min":
        if lo >= p.value:
            return True
        return False if hi is not None and hi < p.value else None
    allowed = set(p.value) if p.test == "in" else {p.value}
    if hi is not None and set(range(lo, hi + 1)) <= allowed:
        return True
    if hi is not None and not set(range(lo, hi + 1)) & allowed:
        return False
    if hi is None and lo > max(allowed):
        return False
    return None


def _dtype_test(kind: str | None, wanted: str) -> bool | None:
    if kind is None:
        return None
    if wanted == "floating":
        return kind == te.FLOATING
    if wanted == "floating_or_complex":
        return kind in (te.FLOATING, te.COMPLEX)
    if wanted == "integer":
        return kind == te.INTEGER
    if wanted == "quantized":
        return kind == te.QUANTIZED
    return None


def _layout_test(kind: str | None, wanted: str) -> bool | None:
    return None if kind is None else kind == wanted


def argument(call: cst.Call, position: int | None, keyword: str | None):
    """The expression passed for a parameter (by keyword, else position); ``ABSENT`` when the call
    does not pass it; ``UNKNOWN`` when ``*args`` / ``**kwargs`` may."""
    return _argument(call, position, keyword)


def possible_values(index: ModuleIndex, expr) -> frozenset | None:
    """The Python values `expr` may have (literals, local constants, both arms of `a if c else b`)."""
    if not isinstance(expr, cst.BaseExpression):
        return None
    return _Values(index).of(expr)


UNKNOWN = _UNKNOWN

__all__ = ["ABSENT", "UNKNOWN", "GradContext", "OpMatch", "argument", "ops_in", "possible_values"]
