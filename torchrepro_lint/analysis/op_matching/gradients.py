"""Gradient evidence in one module: where nothing is differentiated, so a backward-only op never runs.

``GradContext`` says why the code at a node runs without autograd: no_grad / inference_mode
blocks and decorators, a module's evaluation-only branch (branch_gates.py), Datasets,
transforms, collate functions, checkpoint-loading code, Lightning evaluation steps; and whether
a value only reaches uses that autograd cannot go through (``> 0.5``, ``.gt_()``, ``.long()``,
``.item()``). requires_grad.py combines it with what the rest of the project shows.
"""

from __future__ import annotations

import re

import libcst as cst

from torchrepro_lint.analysis.dataflow.core import flow
from torchrepro_lint.analysis.module_index import CallSite, ModuleIndex
from torchrepro_lint.analysis.names import LOCAL
from torchrepro_lint.analysis.branch_gates import runs_only_in_evaluation

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
LOAD_HOOKS = frozenset({"register_load_state_dict_pre_hook", "register_load_state_dict_post_hook"})
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
    if function is not None and defined_at_module_level(index, function):
        return function
    return None


# What may stand between a module and a function defined at its top level: a version or
# platform test (`if TORCH_VERSION >= (1, 8): def op(...) ... else: def op(...)`), a `try`.
_MODULE_LEVEL_BLOCKS = (cst.If, cst.Else, cst.IndentedBlock, cst.Try, cst.ExceptHandler, cst.Finally)


def defined_at_module_level(index: ModuleIndex, function: cst.FunctionDef) -> bool:
    """The def runs at the module's top level, directly or under an `if` / `try` there."""
    for ancestor in index.ancestors(function):
        if isinstance(ancestor, cst.Module):
            return True
        if not isinstance(ancestor, _MODULE_LEVEL_BLOCKS):
            return False
    return False


class GradContext:
    """Why the code at a node runs without autograd (or on data, not parameters), if it does."""

    def __init__(self, index: ModuleIndex, path: str = "") -> None:
        self.index = index
        self.flow = flow(index)
        stem = path.rsplit("/", 1)[-1].rsplit(".", 1)[0] if path else ""
        self.transform_file = stem in TRANSFORM_FILES
        self._checkpoint: dict[int, bool] = {}

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
        if self.index.enclosing(node, cst.FunctionDef, cst.ClassDef) is None and self._converter_script():
            return "in checkpoint-loading code"
        return self.data_reason(node, classes=False)

    def _converter_script(self) -> bool:
        """The module's top level loads weights and nothing in the module trains: a script that
        converts a checkpoint (resize its position embeddings, save it), whose ops never run
        backward. As for a checkpoint-loading function, but stricter: a top-level fine-tuning
        script also loads weights first."""
        found = self.index.derived.get("converter script")
        if found is None:
            calls_in, _ = _call_tables(self.index)
            top_level = calls_in.get(id(None), ())  # (calls in no function are kept under id(None))
            loads = any(_loads_weights(site) for site in top_level)
            found = self.index.derived["converter script"] = loads and not any(_trains(site) for site in self.index.calls)
        return found

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
        collate = self.index.derived.get("collate functions")
        if collate is None:  # (kept on the index, as _call_tables)
            collate = self.index.derived["collate functions"] = {
                a.value.value
                for site in self.index.calls for a in site.node.args
                if a.keyword is not None and a.keyword.value == "collate_fn" and isinstance(a.value, cst.Name)
            }  # fmt: skip
        return function.name.value in collate

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
        if CHECKPOINT_NAME.search(name) or function.name.value in self._load_hooks():
            return True
        calls_in, calls_of = _call_tables(self.index)
        if any(_loads_weights(site) for site in calls_in.get(id(function), ())):
            return True
        if depth > 3 or self.index.enclosing(function, cst.ClassDef) is not None:
            return False
        # A module-level helper called only from checkpoint-loading functions of this module.
        callers = calls_of.get(function.name.value, ())
        if not callers:
            return False
        for site in callers:
            caller = self.index.enclosing(site.node, cst.FunctionDef)
            if caller is None or caller is function or not self.is_checkpoint_code(caller, depth + 1):
                return False
        return True

    def _load_hooks(self) -> frozenset:
        """Names of the functions (or `self.` methods) this module hands to a module's
        `register_load_state_dict_pre_hook` / `_post_hook`: they rewrite a checkpoint's tensors
        as it loads."""
        found = self.index.derived.get("load hooks")
        if found is None:
            names = set()
            for site in self.index.calls:
                func = site.node.func
                if isinstance(func, cst.Attribute) and func.attr.value.lstrip("_") in LOAD_HOOKS and site.node.args:
                    hook = site.node.args[0].value
                    if isinstance(hook, cst.Name):
                        names.add(hook.value)
                    elif isinstance(hook, cst.Attribute) and isinstance(hook.value, cst.Name) and hook.value.value == "self":
                        names.add(hook.attr.value)
            found = self.index.derived["load hooks"] = frozenset(names)
        return found

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


def _loads_weights(site: CallSite) -> bool:
    func = site.node.func
    return site.qualname in LOADERS or isinstance(func, cst.Attribute) and func.attr.value in LOADER_METHODS


def _trains(site: CallSite) -> bool:
    """A call that differentiates or steps an optimizer: `.backward()`, `torch.autograd.*`,
    an optimizer built, `trainer.train()` / `.fit()`."""
    qualname, func = site.qualname or "", site.node.func
    if qualname.startswith(("torch.optim.", "torch.autograd.")):
        return True
    if not isinstance(func, cst.Attribute):
        return False
    method = func.attr.value
    receiver = func.value.value if isinstance(func.value, cst.Name) else ""
    return method in ("backward", "fit") or method == "train" and receiver.lower().endswith("trainer")


def _call_tables(index: ModuleIndex) -> tuple[dict, dict]:
    """The module's call sites by enclosing function (id) and, for `name(...)` calls, by name,
    in the order of index.calls. Kept on the index: every GradContext of it (the op matcher's,
    each summary's) asks."""
    found = index.derived.get("calls by function")
    if found is None:
        calls_in: dict[int, list[CallSite]] = {}
        calls_of: dict[str, list[CallSite]] = {}
        for site in index.calls:
            calls_in.setdefault(id(index.enclosing(site.node, cst.FunctionDef)), []).append(site)
            if type(site.node.func) is cst.Name:
                calls_of.setdefault(site.node.func.value, []).append(site)
        found = index.derived["calls by function"] = (calls_in, calls_of)
    return found
