"""Whether an expression names a CUDA device, as the lowering of a call or an assignment asks it.

A `"cuda"` literal, `torch.cuda.is_available()`, `torch.device(...)` of one, a variable or
attribute assigned one: what this module shows decides it. Where an attribute's value is decided
elsewhere (an imported class, a store outside the class), a test is left for the run
(ir.AttributeOnCuda, which interpreter/devices.py answers).
"""

from __future__ import annotations

import libcst as cst

from torchrepro_lint.analysis.module_index import ModuleIndex
from torchrepro_lint.analysis.names import LOCAL
from torchrepro_lint.analysis.syntax import evaluated_string
from torchrepro_lint.project import ir
from torchrepro_lint.project.extract import attributes
from torchrepro_lint.project.extract.call_syntax import is_project_name
from torchrepro_lint.project.known_apis import ACCELERATOR_DEVICE, DEVICE_PROBES


class DeviceLowering:
    """The lowering's methods for device evidence (calls.CallLowering derives from this class, and
    lowering.Lowering from that): they read the module's index and keep what they find."""

    index: ModuleIndex
    _attribute_values: dict[tuple, list[attributes.Value]]
    _pending: list[ir.AttributeOnCuda]  # device tests for the run, found by _mentions_cuda

    def _cuda_value(self, exprs, at: cst.CSTNode) -> ir.Value | None:
        """Whether an expression (or any of a list) names a CUDA device, as an IR value: TRUE
        where this module shows it; a test for the run (ir.AttributeOnCuda) where an attribute's
        value is decided elsewhere (an imported class, a store outside the class); None where
        nothing could."""
        saved, self._pending = self._pending, []
        try:
            if any(self._mentions_cuda(e, at) for e in (exprs if isinstance(exprs, list) else [exprs])):
                return ir.TRUE
            pending = tuple(dict.fromkeys(self._pending))
        finally:
            self._pending = saved
        if not pending:
            return None
        return pending[0] if len(pending) == 1 else ir.BoolOp("or", pending, "<device>")

    def _names_cuda_here(self, expr: cst.BaseExpression, at: cst.CSTNode, depth: int = 0) -> bool:
        """_mentions_cuda on what this module shows alone (for summaries and constructions)."""
        saved, self._pending = self._pending, []
        try:
            return self._mentions_cuda(expr, at, depth)
        finally:
            self._pending = saved

    def _attribute_names_cuda(self, expr: cst.Attribute, at: cst.CSTNode, depth: int) -> bool | None:
        """`self.device` set in a method of the class (a Trainer's __init__), `cfg.device` of a
        config built from a class of this module, the class attribute `Config.device`, or one
        level of chain (`self.cfg.device`, `cfg.train.device`). Where the value is decided
        elsewhere, a test is left for the run (self._pending); None: not an attribute we follow."""
        owner, attribute = expr.value, expr.attr.value
        if isinstance(owner, cst.Attribute):
            return self._chained_attribute_names_cuda(expr, at, depth)
        values = self._attribute_values_of(expr, at)
        known = values is not None and any(self._mentions_cuda(v, where, depth + 1) for v, where in values)
        if owner.value == "self":
            if values is not None and self.index.enclosing(at, cst.FunctionDef) is not None:
                # a store from outside the class (`trainer.device = "cpu"`) or a base class in
                # another module may decide it: the run does, knowing what this module shows
                self._pending.append(ir.AttributeOnCuda("self", None, attribute, known=known))
                return False
            return known if values is not None else None
        if values is not None:
            return known
        built = self.index.assigned_value(owner.value, at)
        if isinstance(built, cst.Call):  # `cfg = Config(...)`, Config imported from the project
            self._defer_to_class(built.func, built, attribute, owner.value, depth=depth)
        elif built is None:  # `Config.device`
            self._defer_to_class(owner, None, attribute, None, depth=depth)
        return None

    def _chained_attribute_names_cuda(self, expr: cst.Attribute, at: cst.CSTNode, depth: int) -> bool | None:
        """`self.cfg.device` where `self.cfg = Config(...)`, `cfg.train.device` where the
        dataclass field is `train: TrainConfig = field(default_factory=TrainConfig)`: the
        attribute of each object the inner attribute may hold, built from a project class."""
        inner = expr.value
        if not isinstance(inner.value, cst.Name):
            return None
        values = self._attribute_values_of(inner, at)
        if values is None:
            return None
        found = False
        for value, where in values:
            call = value if isinstance(value, cst.Call) else None
            func = call.func if call is not None else value
            if not isinstance(func, (cst.Name, cst.Attribute)):
                continue
            klass = attributes.local_class(self.index, self.index.resolve(func, where))
            if klass is None:
                self._defer_to_class(func, call, expr.attr.value, None, where, depth)
                continue
            construction = call if call is not None else cst.Call(func=func)  # a factory: built with no arguments
            found = found or any(
                self._mentions_cuda(v, w, depth + 1)
                for v, w in attributes.attribute_values(self.index, klass, expr.attr.value, construction)
            )
        return found

    def _defer_to_class(self, func, call: cst.Call | None, attribute: str, owner: str | None, at=None, depth: int = 0) -> None:
        """Leave the test of `<object>.<attribute>` to the run, for a class of another project
        module (the run reads its summary, ir.ClassIR.devices). Built from `**overrides`, any
        attribute may be given: no test (precision first)."""
        qualname = self.index.resolve(func, at or call or func)
        if not is_project_name(qualname) or qualname.startswith(LOCAL):
            return
        given = None
        if call is not None:
            if any(a.star for a in call.args):
                return
            given, position = [], 0
            for a in call.args:
                key = a.keyword.value if a.keyword is not None else position
                position += a.keyword is None
                given.append((key, self._names_cuda_here(a.value, call, depth + 1), attributes.is_plain_literal(a.value)))
            given = tuple(given)
        elif owner is None and at is not None:
            given = ()  # a dataclass field's `default_factory`: built with no arguments
        self._pending.append(ir.AttributeOnCuda(owner, qualname, attribute, given, instance=call is not None or given is not None))

    def _attribute_values_of(self, expr: cst.Attribute, at: cst.CSTNode) -> list[attributes.Value] | None:
        """The values `owner.attribute` may hold, where the owner is `self`, an instance of a class
        of this module built in the same scope, or such a class itself; None for any other owner."""
        owner, attribute = expr.value.value, expr.attr.value
        if owner == "self":
            klass = self.index.enclosing(at, cst.ClassDef)
            construction = None
        else:
            klass = attributes.local_class(self.index, self.index.resolve(expr.value, at))
            construction = None
            if klass is None:
                built = self.index.assigned_value(owner, at)
                if not isinstance(built, cst.Call):
                    return None
                klass = attributes.local_class(self.index, self.index.resolve(built.func, built))
                construction = built
            elif self.index.assigned_value(owner, at) is not None:
                return None  # a variable of the class's name
        if klass is None:
            return None
        key = (id(klass), id(construction), owner, attribute, owner == "self" or construction is not None)
        found = self._attribute_values.get(key)
        if found is None:
            found = attributes.attribute_values(self.index, klass, attribute, construction, instance=key[4])
            if owner != "self":
                # `cfg.device = "cpu"` where the object is used (anywhere in the module, for a class)
                scope = self.index.enclosing(at, cst.FunctionDef) if construction is not None else None
                found = attributes.with_stores(found, scope or self.index.module, owner, attribute)
            self._attribute_values[key] = found
        return found

    def _mentions_cuda(self, expr: cst.BaseExpression | None, at: cst.CSTNode, depth: int = 0) -> bool:
        """"cuda" literals, torch.cuda.is_available(), or a variable assigned from one."""
        if expr is None or depth > 3:
            return False
        if isinstance(expr, cst.SimpleString):
            value = evaluated_string(expr)
            return isinstance(value, str) and value.startswith("cuda")
        if isinstance(expr, cst.Name):
            assigned = self.index.assigned_value(expr.value, at)
            return assigned is not None and assigned is not expr and self._mentions_cuda(assigned, at, depth + 1)
        if isinstance(expr, cst.Call):
            q = self.index.resolve(expr.func, at)
            if q in DEVICE_PROBES or q == ACCELERATOR_DEVICE:
                return True
            if q == "torch.device":
                return any(self._mentions_cuda(a.value, at, depth + 1) for a in expr.args)
            return False
        if isinstance(expr, cst.IfExp):
            return any(self._mentions_cuda(e, at, depth + 1) for e in (expr.test, expr.body, expr.orelse))
        if isinstance(expr, cst.Attribute) and isinstance(expr.value, (cst.Name, cst.Attribute)):
            found = self._attribute_names_cuda(expr, at, depth)
            if found is not None:
                return found
        if isinstance(expr, cst.Attribute) and expr.attr.value == "type":  # `current_accelerator().type`
            return self._mentions_cuda(expr.value, at, depth + 1)
        if isinstance(expr, cst.FormattedString):
            return any(
                isinstance(part, cst.FormattedStringText) and part.value.startswith("cuda") for part in expr.parts[:1]
            )
        return False
