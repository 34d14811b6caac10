"""The catalogue's ``requires_grad`` condition at a call, for the op matcher.

False where ``GradContext`` (gradients.py) shows no autograd in the module, where the op's result
only reaches non-differentiable uses, in a function, method or helper class that the project only
uses from such code (``project/uses.py``: ``ProjectUses``), on a top-level model's data input, and on
frozen attributes of ``self``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from torchrepro_lint.analysis.dataflow.core import flow
from torchrepro_lint.analysis.module_index import ModuleIndex
from torchrepro_lint.analysis.names import LOCAL
from torchrepro_lint.analysis.receivers import PARAMETER_CLASSES
from torchrepro_lint.analysis.syntax import self_attribute, string_value
from torchrepro_lint.analysis.op_matching.calls import ApiCall
from torchrepro_lint.analysis.op_matching.gradients import WEIGHT_RESIZE_NAME, GradContext, module_level_function

if TYPE_CHECKING:
    from torchrepro_lint.project.uses import ProjectUses

# Bases whose subclasses' methods run only when the project calls them (no framework hooks).
PLAIN_BASES = frozenset({"torch.nn.Module", "torch.nn.modules.module.Module", "builtins.object", "object"})


class RequiresGrad:
    """The catalogue's ``requires_grad`` condition at a call: false where ``GradContext`` shows no
    autograd, where the op's result only reaches non-differentiable uses, in a function or helper
    class that the project only uses from such code, and on a top-level model's data input."""

    def __init__(self, index: ModuleIndex, grad: GradContext, uses: ProjectUses | None) -> None:
        self.index = index
        self.grad = grad
        self.uses = uses
        self.module = None
        self._frozen: dict[tuple, bool] = {}  # (id(class), attribute) -> held frozen
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
        method = self._method_holding(node)
        if method is not None and self.uses is not None and self._only_called_without_grad(method):
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

    def _method_holding(self, node: cst.CSTNode) -> cst.FunctionDef | None:
        method = self.index.enclosing(node, cst.FunctionDef)
        if method is None or not isinstance(self.index.parents.get(self.index.parents.get(method)), cst.ClassDef):
            return None  # (a method's parent is its class body, whose parent is the class)
        return method

    def _only_called_without_grad(self, method: cst.FunctionDef) -> bool:
        """Every use of the method's name in the project runs without gradients, where only the
        project's calls can run it: not a dunder or `forward` (run by `module(x)`), in a class
        whose bases are nn.Module, `object` or the project's own classes (a Trainer's or
        LightningModule's methods are hooks a framework calls by name, unseen). A method named
        like weight resizing (`_resize_position_embedding`, run from a `@torch.no_grad()`
        load_state_dict hook: torchtune's CLIP) counts in any class, other modules' tests aside."""
        name = method.name.value
        if WEIGHT_RESIZE_NAME.search(name):
            return self.uses.name_used_only_without_grad(name, self.module)
        if name.startswith("__") or name == "forward" or self._framework_class(self.index.parents.get(self.index.parents.get(method))):
            return False
        return self.uses.name_used_only_without_grad(name)

    def _framework_class(self, klass: cst.ClassDef) -> bool:
        """Some class along `klass`'s bases, through the project's own classes in any module,
        is outside the project and not nn.Module or `object` (or cannot be told)."""
        if self.uses is None or self.module is None or self.index.enclosing(klass, cst.ClassDef, cst.FunctionDef):
            return self.grad._derives(klass, lambda q: q not in PLAIN_BASES and not q.startswith(LOCAL))
        return self.uses.framework_class(self.module, klass.name.value)

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
        return bool(inputs) and klass is not None and all(
            (attr := self_attribute(e)) is not None and self._frozen_attribute(klass, attr) for e in inputs
        )

    def _frozen_attribute(self, klass: cst.ClassDef, attr: str) -> bool:
        key = (id(klass), attr)
        if key not in self._frozen:
            fl = flow(self.index)
            values = fl.self_attr_values(klass, attr)  # (None: a store without a plain value)
            registered = any(
                isinstance(site.node.func, cst.Attribute) and site.node.func.attr.value == "register_buffer"
                and site.node.args and string_value(site.node.args[0].value) == attr
                and fl.enclosing_class(site.node) is klass
                for site in self.index.calls
            )  # fmt: skip
            frozen = values is not None and (registered or bool(values)) and all(self._frozen_value(v) for v in values)
            self._frozen[key] = frozen and not self._unfrozen(fl, klass, attr)
        return self._frozen[key]

    @staticmethod
    def _unfrozen(fl, klass: cst.ClassDef, attr: str) -> bool:
        """`self.<attr>.requires_grad = <not False>` or `self.<attr>.requires_grad_(<not False>)` in the class."""
        for name in ("requires_grad", "requires_grad_"):
            for node in fl.attribute_names.get(name, ()):
                if self_attribute(node.value) != attr or fl.enclosing_class(node) is not klass:
                    continue
                holder = fl.parents.get(node)
                if isinstance(holder, cst.Call) and holder.func is node:
                    value = holder.args[0].value if holder.args else None
                else:
                    statement = fl.parents.get(holder) if isinstance(holder, cst.AssignTarget) else None
                    if statement is None:
                        continue  # a read
                    value = statement.value
                if not (isinstance(value, cst.Name) and value.value == "False"):
                    return True
        return False

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
        # Where the name stands is asked first, what it holds (the dataflow) last: most
        # `forward`s of a model file are a block's, which another class builds (timm's
        # resnet.py: 6 inputs an edit, each found a parameter, then a block's).
        function = self.index.enclosing(expr, cst.FunctionDef, cst.Lambda)  # (Flow.owner)
        if not isinstance(function, cst.FunctionDef) or function.name.value != "forward":
            return False
        klass = self.index.enclosing(function, cst.ClassDef)
        if klass is None or self.index.parents.get(self.index.parents.get(function)) is not klass:
            return False
        positional = [*function.params.posonly_params, *function.params.params]
        if not positional or not self.grad.is_module_class(klass):
            return False
        if not isinstance(self.index.parents.get(klass), cst.Module):
            return False
        if not self.uses.top_level_model(self.module, klass):
            return False
        param = self._parameter_value(flow(self.index), expr)
        return param is not None and positional[0] is not param
