"""Gradient evidence: where nothing is differentiated, so a backward-only op never runs.

``GradContext`` says why the code at a node runs without autograd: no_grad / inference_mode
blocks and decorators, a module's evaluation-only branch (branch_gates.py), Datasets,
transforms, collate functions, checkpoint-loading code, Lightning evaluation steps; and whether a value only reaches uses that autograd cannot go through
(``> 0.5``, ``.gt_()``, ``.long()``, ``.item()``). ``RequiresGrad`` decides the catalogue's
``requires_grad`` condition for a call: the above, plus a module-level function or helper class
that the project only uses from such code (``project_uses.ProjectUses``), and the data input of a
top-level model's ``forward``.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import libcst as cst

from torchrepro_lint.analysis.dataflow.core import flow
from torchrepro_lint.analysis.module_index import CallSite, ModuleIndex
from torchrepro_lint.analysis.names import LOCAL
from torchrepro_lint.analysis.op_matching.calls import ApiCall
from torchrepro_lint.analysis.branch_gates import runs_only_in_evaluation
from torchrepro_lint.project.known_apis import PARAMETER_CLASSES

if TYPE_CHECKING:
    from torchrepro_lint.analysis.project_uses import ProjectUses

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
# Bases whose subclasses' methods run only when the project calls them (no framework hooks).
PLAIN_BASES = frozenset({"torch.nn.Module", "torch.nn.modules.module.Module", "builtins.object", "object"})
NO_GRAD_STEPS = frozenset({"validation_step", "test_step", "predict_step"})
LIGHTNING = ("lightning.", "pytorch_lightning.")
# Uses of a tensor that autograd cannot go through (the op's backward then never runs).
NONDIFF_METHODS = frozenset(
    "gt gt_ lt lt_ ge ge_ le le_ eq eq_ ne ne_ argmax argmin argsort bool long int byte short char numpy item "
    "tolist detach detach_ round round_ floor floor_ ceil ceil_ sign nonzero any all".split()
)
PASS_METHODS = frozenset(
    "sigmoid sigmoid_ softmax squeeze squeeze_ unsqueeze float half double contiguous view reshape permute "
    "transpose cpu cuda to clamp clamp_ clip flatten abs mul mul_ add add_ sub sub_ div div_ expand expand_as "
    "pow square sqrt rsqrt exp log log2 log10 neg reciprocal sum mean prod norm std var amax amin unfold".split()
)
METADATA = frozenset({"shape", "dtype", "device", "ndim", "is_cuda"})
NONDIFF_FUNCTIONS = frozenset({"torch.argmax", "torch.argmin", "torch.argsort", "torch.nonzero", "torch.round", "torch.sign"})
PASS_FUNCTIONS = frozenset({"torch.sigmoid", "torch.softmax", "torch.nn.functional.softmax", "torch.squeeze", "torch.clamp"})


def module_level_function(index: ModuleIndex, node: cst.CSTNode) -> cst.FunctionDef | None:
    """The function defined at the module's top level that holds `node`; None inside a class."""
    function = None
    for ancestor in index.ancestors(node):
        if isinstance(ancestor, cst.FunctionDef):
            function = ancestor
        elif isinstance(ancestor, cst.ClassDef):
            return None
    if function is not None and isinstance(index.parents.get(function), cst.Module):
        return function
    return None


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
        if runs_only_in_evaluation(self.index, node):
            return "where `self.training` is False (the evaluation output is not backpropagated)"
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


class RequiresGrad:
    """The catalogue's ``requires_grad`` condition at a call: false where ``GradContext`` shows no
    autograd, where the op's result only reaches non-differentiable uses, in a function or helper
    class that the project only uses from such code, and on a top-level model's data input."""

    def __init__(self, index: ModuleIndex, grad: GradContext, uses: ProjectUses | None) -> None:
        self.index = index
        self.grad = grad
        self.uses = uses
        self.module = None
        self._frozen: dict[int, set[str]] = {}  # id(class) -> its frozen attributes
        self._stores: dict[int, list] | None = None
        if uses is not None:
            self.module = next((m for m in uses.project.modules.values() if m.source is index.source), None)

    def holds(self, call: ApiCall) -> bool:
        node = call.site.node
        if self.grad.no_grad_reason(node):
            return False
        if call.form != "module" and self.grad.result_not_differentiated(node):
            return False
        if self._data_inputs(call) or self._frozen_inputs(call):
            return False
        outer = module_level_function(self.index, node)
        if outer is not None and self.uses is not None and self.module is not None:
            if self.uses.only_without_grad(self.module, outer.name.value):
                return False
            if WEIGHT_RESIZE_NAME.search(outer.name.value) and not self.uses.references(self.module, outer.name.value):
                return False
        if self._resizing_method_of_loading(node):
            return False
        method = self._explicitly_called_method(node)
        if method is not None and self.uses is not None and self.uses.name_used_only_without_grad(method.name.value):
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

    def _resizing_method_of_loading(self, node: cst.CSTNode) -> bool:
        """A method named like weight resizing (`_resize_position_embedding`) that the project
        calls only without gradients (from a `@torch.no_grad()` load_state_dict hook, say), tests
        aside: it resizes checkpoint tensors (torchtune's CLIP position embeddings)."""
        method = self.index.enclosing(node, cst.FunctionDef)
        if method is None or not isinstance(self.index.parents.get(self.index.parents.get(method)), cst.ClassDef):
            return False  # (a method's parent is its class body, whose parent is the class)
        name = method.name.value
        if not WEIGHT_RESIZE_NAME.search(name):
            return False
        if self.uses is None or self.module is None:
            return self._called_only_without_grad(self.index, self.grad, name) is True
        found = False
        for other in self.uses.project.modules_mentioning(name):
            if other is not self.module and self.uses.in_tests(other):
                continue
            grad = self.grad if other is self.module else GradContext(other.index, other.source.path.as_posix())
            answer = self._called_only_without_grad(other.index, grad, name)
            if answer is False:
                return False
            found = found or answer is True
        return found

    def _explicitly_called_method(self, node: cst.CSTNode) -> cst.FunctionDef | None:
        """The method holding `node`, where only the project's own calls can run it: not a dunder
        or `forward` (run by `module(x)`), in a class whose bases are nn.Module, `object` or the
        project's own classes (a Trainer's or LightningModule's methods are hooks a framework
        calls by name, unseen)."""
        method = self.index.enclosing(node, cst.FunctionDef)
        klass = self.index.parents.get(self.index.parents.get(method)) if method is not None else None
        if not isinstance(klass, cst.ClassDef) or method.name.value.startswith("__") or method.name.value == "forward":
            return None  # (a method's parent is its class body, whose parent is the class)
        if self._framework_class(klass):
            return None
        return method

    def _framework_class(self, klass: cst.ClassDef) -> bool:
        """Some class along `klass`'s bases, through the project's own classes in any module,
        is outside the project and not nn.Module or `object` (or cannot be told)."""
        project = self.uses.project if self.uses is not None else None
        if project is None or self.module is None or self.index.enclosing(klass, cst.ClassDef, cst.FunctionDef):
            return self.grad._derives(klass, lambda q: q not in PLAIN_BASES and not q.startswith(LOCAL))
        symbol = project.resolve(LOCAL + klass.name.value, self.module)
        if symbol is None or symbol.klass is None:
            return True
        for current in project.lineage(symbol):
            for base in current.klass.bases:
                if project.resolve(base, current.module) is None and project.external_name(base, current.module) not in PLAIN_BASES:
                    return True
        return False

    @staticmethod
    def _called_only_without_grad(index: ModuleIndex, grad: GradContext, name: str) -> bool | None:
        """Whether every `<x>.name(...)` call in the module runs without gradients; None if none."""
        calls = [c.node for c in index.calls if isinstance(c.node.func, cst.Attribute) and c.node.func.attr.value == name]
        if not calls:
            return None
        return all(grad.no_grad_reason(call) for call in calls)

    def _plain_class(self, node: cst.CSTNode) -> cst.ClassDef | None:
        """The module-level class whose method holds `node`, when it is not an nn.Module (or
        Lightning) class: no base class at all, or none that makes it one."""
        klass = self.index.enclosing(node, cst.ClassDef)
        if klass is None or not isinstance(self.index.parents.get(klass), cst.Module):
            return None
        no_bases = all(isinstance(b.value, cst.Name) and b.value.value == "object" for b in klass.bases)
        return klass if no_bases or not self.grad.is_module_class(klass) else None  # `forward` alone does not make a module

    @staticmethod
    def _parameter_value(fl, name: cst.Name) -> cst.Param | None:
        """The parameter whose value `name` still holds where it stands: nothing rebinds it
        before (`image = F.interpolate(image, ...)` reads the argument), nor in a loop around it."""
        owner = fl.owner(name)
        if not isinstance(owner, (cst.FunctionDef, cst.Lambda)):
            return None
        binds = [statement for statement, _ in fl.bindings(name.value, owner)]
        params = [b for b in binds if isinstance(b, cst.Param)]
        others = [b for b in binds if not isinstance(b, cst.Param)]
        if not params:
            return None
        here = fl.pos(name)
        if any(fl.pos(b) < here and not fl.inside(name, b) for b in others):
            return None
        loops = [a for a in fl.index.ancestors(name) if isinstance(a, (cst.For, cst.While)) and fl.inside(a, owner)]
        if any(fl.inside(b, loop) for loop in loops for b in others):
            return None  # (a later rebinding reaches it on the loop's next turn)
        return params[0]

    def _frozen_inputs(self, call: ApiCall) -> bool:
        """Every input is an attribute of `self` that its class holds frozen: a buffer
        (`register_buffer`, `nn.Buffer`) or an `nn.Parameter(..., requires_grad=False)` that
        nothing in the class unfreezes (a fixed sin-cos position table resized to the input)."""
        inputs = call.inputs()
        klass = self.index.enclosing(call.site.node, cst.ClassDef)
        if not inputs or klass is None:
            return False
        frozen = self._frozen.get(id(klass))
        if frozen is None:
            frozen = self._frozen[id(klass)] = self._frozen_attributes(klass)
        return all(
            isinstance(e, cst.Attribute) and isinstance(e.value, cst.Name) and e.value.value == "self" and e.attr.value in frozen
            for e in inputs
        )

    def _frozen_attributes(self, klass: cst.ClassDef) -> set[str]:
        if self._stores is None:  # id(class) -> its assignments and calls (a nested class's are its own)
            self._stores = {}
            for node in self.index.nodes_of(cst.Assign, cst.Call):
                owner = self.index.enclosing(node, cst.ClassDef)
                if owner is not None:
                    self._stores.setdefault(id(owner), []).append(node)
        frozen, other, unfrozen = set(), set(), set()
        for node in self._stores.get(id(klass), ()):
            if isinstance(node, cst.Call):
                method = node.func.attr.value if isinstance(node.func, cst.Attribute) else None
                first = node.args[0].value if node.args else None
                if method == "register_buffer" and isinstance(first, cst.SimpleString):
                    frozen.add(first.value.strip("\"'"))
                elif method == "requires_grad_" and isinstance(node.func.value, cst.Attribute):
                    if not (node.args and isinstance(node.args[0].value, cst.Name) and node.args[0].value.value == "False"):
                        unfrozen.add(node.func.value.attr.value)
                continue
            for target in node.targets:
                t = target.target
                if isinstance(t, cst.Attribute) and t.attr.value == "requires_grad" and isinstance(t.value, cst.Attribute):
                    if not (isinstance(node.value, cst.Name) and node.value.value == "False"):
                        unfrozen.add(t.value.attr.value)
                if not (isinstance(t, cst.Attribute) and isinstance(t.value, cst.Name) and t.value.value == "self"):
                    continue
                (frozen if self._frozen_value(node.value) else other).add(t.attr.value)
        return frozen - other - unfrozen

    def _frozen_value(self, value: cst.BaseExpression) -> bool:
        if not isinstance(value, cst.Call) or not isinstance(value.func, (cst.Name, cst.Attribute)):
            return False
        q = self.index.resolve(value.func, value)
        if q == "torch.nn.Buffer":
            return True
        if q not in PARAMETER_CLASSES:
            return False
        flag = next((a.value for a in value.args if a.keyword is not None and a.keyword.value == "requires_grad"), None)
        if flag is None and len(value.args) > 1 and value.args[1].keyword is None:
            flag = value.args[1].value
        return isinstance(flag, cst.Name) and flag.value == "False"

    def _data_inputs(self, call: ApiCall) -> bool:
        """The op's input is an argument of `forward` of a top-level model (one that no nn.Module
        class of the project builds): data, which does not require gradients."""
        if self.uses is None or self.module is None:
            return False
        inputs = call.inputs()
        return bool(inputs) and all(self._model_input(e) for e in inputs)

    def _model_input(self, expr: cst.BaseExpression) -> bool:
        if isinstance(expr, cst.Subscript) and isinstance(expr.value, cst.Name):
            expr = expr.value  # `batch["image"]`: an entry of the batch the model is given
        if not isinstance(expr, cst.Name):
            return False
        fl = flow(self.index)
        param = self._parameter_value(fl, expr)
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
