"""Whether an expression names a CUDA device, as the lowering of a call or an assignment asks it.

A `"cuda"` literal, `torch.cuda.is_available()`, `torch.device(...)` of one, a variable or
attribute assigned one: what this module shows decides it. Where an attribute's value is decided
elsewhere (an imported class, a store outside the class), a test is left for the run
(ir.AttributeOnCuda, which interpreter/devices.py answers).
"""

from __future__ import annotations

import libcst as cst

from torchrepro_lint.analysis.module_index import ModuleIndex
from torchrepro_lint.analysis.dataflow.core import flow
from torchrepro_lint.analysis.literals import literal_value
from torchrepro_lint.analysis.names import LOCAL
from torchrepro_lint.analysis.syntax import arg as _arg
from torchrepro_lint.analysis.syntax import evaluated_string
from torchrepro_lint.project import ir
from torchrepro_lint.project.extract import attributes
from torchrepro_lint.project.extract.call_syntax import is_project_name
from torchrepro_lint.project.known_apis import ACCELERATOR_DEVICE, DEVICE_PROBES

# How far a device is followed: names, helpers' returns, attributes and their defaults. A helper
# given as a dataclass factory read as `cfg.device` is five steps from its `"cuda"`.
MAX_DEPTH = 6


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
        parsed = self._argparse_default(owner, attribute, at, depth)
        if parsed is not None:
            return parsed
        values = self._attribute_values_of(expr, at)
        known = values is not None and any(self._mentions_cuda(v, where, depth + 1) for v, where in values)
        if values is None and (annotation := self._annotated_class(owner)) is not None:
            # `def train(cfg: TrainConfig)`, the class imported: its defaults, the construction unseen
            self._defer_to_class(annotation, None, attribute, None, annotation, depth, unseen=True)
            return None
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
            built = self.index.assigned_value(inner.value.value, at)
            func = built.func if isinstance(built, cst.Call) else self._annotated_class(inner.value)
            if func is not None:  # `cfg = TrainConfig()` or `cfg: TrainConfig`, the class imported
                call = built if isinstance(built, cst.Call) else None
                self._defer_to_class(func, call, f"{inner.attr.value}.{expr.attr.value}", None, func, depth, unseen=call is None)
            return None
        found = False
        for value, where in values:
            unseen = False
            if isinstance(value, cst.Name) and (annotation := self._annotated_class(value)) is not None:
                value, where, unseen = annotation, annotation, True  # `self.cfg = cfg`, `cfg: TrainConfig`
            call = value if isinstance(value, cst.Call) else None
            func = call.func if call is not None else value
            if not isinstance(func, (cst.Name, cst.Attribute)):
                continue
            klass = attributes.local_class(self.index, self.index.resolve(func, where))
            if klass is None:
                self._defer_to_class(func, call, expr.attr.value, None, where, depth, unseen)
                continue
            if unseen:
                found = found or any(
                    self._mentions_cuda(v, w, depth + 1)
                    for v, w in attributes.attribute_values(self.index, klass, expr.attr.value, None, instance=True)
                )
                continue
            construction = call if call is not None else cst.Call(func=func)  # a factory: built with no arguments
            found = found or any(
                self._mentions_cuda(v, w, depth + 1)
                for v, w in attributes.attribute_values(self.index, klass, expr.attr.value, construction)
            )
        return found

    def _defer_to_class(
        self, func, call: cst.Call | None, attribute: str, owner: str | None, at=None, depth: int = 0, unseen: bool = False
    ) -> None:
        """Leave the test of `<object>.<attribute>` to the run, for a class of another project
        module (the run reads its summary, ir.ClassIR.devices). Built from `**overrides`, any
        attribute may be given: no test (precision first). `unseen`: an instance built where this
        module does not show it (a parameter annotated with the class): its defaults stand, and an
        `__init__` parameter stored on `self` is not known."""
        qualname = self.index.resolve(func, at or call or func)
        if not is_project_name(qualname) or qualname.startswith(LOCAL):
            return
        if unseen:
            self._pending.append(ir.AttributeOnCuda(owner, qualname, attribute))
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
        annotation = self._annotated_class(expr.value)
        if owner == "self":
            klass = self.index.enclosing(at, cst.ClassDef)
            construction = None
        elif annotation is not None:  # `def train(cfg: TrainConfig)`: an instance built elsewhere
            klass = attributes.local_class(self.index, self.index.resolve(annotation, annotation))
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
        instance = owner == "self" or construction is not None or annotation is not None
        key = (id(klass), id(construction if annotation is None else annotation), owner, attribute, instance)
        found = self._attribute_values.get(key)
        if found is None:
            found = attributes.attribute_values(self.index, klass, attribute, construction, instance=instance)
            if owner != "self":
                # `cfg.device = "cpu"` where the object is used (anywhere in the module, for a class)
                scope = self.index.enclosing(at, cst.FunctionDef) if instance else None
                found = attributes.with_stores(found, scope or self.index.module, owner, attribute)
            self._attribute_values[key] = found
        return found

    def _mentions_cuda(self, expr: cst.BaseExpression | None, at: cst.CSTNode, depth: int = 0) -> bool:
        """"cuda" literals, torch.cuda.is_available(), or a variable assigned from one; a call of
        a function of this module that returns a CUDA device (_returns_cuda), or such a function
        named as a factory (`field(default_factory=auto_device)`)."""
        if expr is None or depth > MAX_DEPTH:
            return False
        if isinstance(expr, cst.SimpleString):
            value = evaluated_string(expr)
            return isinstance(value, str) and value.startswith("cuda")
        if isinstance(expr, cst.Name):
            assigned = self.index.assigned_value(expr.value, at)
            if assigned is not None:
                return assigned is not expr and self._mentions_cuda(assigned, at, depth + 1)
            helper = self._helper(self.index.resolve(expr, at))
            return helper is not None and self._returns_cuda(helper, None, depth + 1)
        if isinstance(expr, cst.Call):
            q = self.index.resolve(expr.func, at)
            if q in DEVICE_PROBES or q == ACCELERATOR_DEVICE:
                return True
            if q == "torch.device":
                return any(self._mentions_cuda(a.value, at, depth + 1) for a in expr.args)
            helper = self._helper(q)
            return helper is not None and self._returns_cuda(helper, expr, depth + 1)
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

    # -- device helpers and argparse defaults --------------------------------------------------
    def _helper(self, qualname: str | None) -> cst.FunctionDef | None:
        """A module-level function of this module (a version-gated def included), by its name."""
        if not qualname or not qualname.startswith(LOCAL) or "." in qualname[len(LOCAL):]:
            return None
        return self.index.functions.get(qualname[len(LOCAL):])

    def _returns_cuda(self, function: cst.FunctionDef, call: cst.Call | None, depth: int) -> bool:
        """`function`, called by `call` (None: with no arguments, as a factory), returns a CUDA
        device: a returned value names one (`torch.device("cuda" if torch.cuda.is_available()
        else "cpu")`), or is built from a parameter (`torch.device(name)`, `name`) that the
        call's argument, or the parameter's default, names CUDA. A returned name stands for every
        value the function assigns it (`device = torch.device(name)` in one branch of many)."""
        fl = flow(self.index)
        for node in self.index.nodes_of(cst.Return):
            if node.value is None or self.index.enclosing(node, cst.FunctionDef) is not function:
                continue
            values = [node.value]
            if isinstance(node.value, cst.Name):
                values += [v for _, v in fl.bindings(node.value.value, function) if v is not None]
            for value in values:
                if self._mentions_cuda(value, value, depth + 1):
                    return True
                argument = _argument_for(function, _built_from_parameter(self.index, value, function), call)
                if argument is not None and self._mentions_cuda(*argument, depth + 1):
                    return True
        return False

    def _argparse_default(self, owner: cst.Name, attribute: str, at: cst.CSTNode, depth: int) -> bool | None:
        """`args.device` where `args = parser.parse_args()` in view: whether the module's
        `add_argument` calls for that destination all default to a CUDA device (None: `args`
        is not such a namespace)."""
        built = self.index.assigned_value(owner.value, at)
        if isinstance(built, cst.Subscript):  # `parser.parse_known_args()[0]`
            built = built.value
        if not (isinstance(built, cst.Call) and isinstance(built.func, cst.Attribute)
                and built.func.attr.value in ("parse_args", "parse_known_args")):  # fmt: skip
            return None
        defaults = []
        for site in self.index.calls:
            node = site.node
            if isinstance(node.func, cst.Attribute) and node.func.attr.value == "add_argument" and _destination(node) == attribute:
                defaults.append(_arg(node, None, "default"))
        return bool(defaults) and all(d is not None and self._mentions_cuda(d, d, depth + 1) for d in defaults)

    def _annotated_class(self, name: cst.Name) -> cst.BaseExpression | None:
        """The annotation of the parameter `name` reads, when it names a project class
        (`cfg: TrainConfig`, also `Optional[...]`-free forms only)."""
        param = flow(self.index).parameter(name)
        if param is None or param.annotation is None:
            return None
        annotation = param.annotation.annotation
        if not isinstance(annotation, (cst.Name, cst.Attribute)):
            return None
        qualname = self.index.resolve(annotation, annotation)
        if attributes.local_class(self.index, qualname) is not None:
            return annotation
        return annotation if is_project_name(qualname) and not (qualname or "").startswith(LOCAL) else None


def _built_from_parameter(index: ModuleIndex, value: cst.BaseExpression, function: cst.FunctionDef) -> cst.Param | None:
    """The parameter a device value is built from: `name`, `torch.device(name)`, `str(name)`."""
    if isinstance(value, cst.Call) and value.args and index.resolve(value.func, value) in ("torch.device", "builtins.str"):
        value = value.args[0].value
    if not isinstance(value, cst.Name):
        return None
    params = [*function.params.posonly_params, *function.params.params, *function.params.kwonly_params]
    return next((p for p in params if p.name.value == value.value), None)


def _argument_for(function: cst.FunctionDef, param: cst.Param | None, call: cst.Call | None):
    """(expression, where its names are read) that `call` binds to `param`, else its default."""
    if param is None:
        return None
    if call is not None:
        positional = [*function.params.posonly_params, *function.params.params]
        given = _arg(call, positional.index(param) if param in positional else None, param.name.value)
        if given is not None:
            return given, call
        if any(a.star for a in call.args):
            return None  # (it may be in there)
    return (param.default, param.default) if param.default is not None else None


def _destination(add_argument: cst.Call) -> str | None:
    """Where `parser.add_argument(...)` stores its value: `dest=`, else the first long option
    (`--train-device` -> `train_device`), else a positional name."""
    dest = _arg(add_argument, None, "dest")
    if dest is not None:
        return literal_value(dest) if isinstance(literal_value(dest), str) else None
    names = [literal_value(a.value) for a in add_argument.args if a.keyword is None]
    names = [n for n in names if isinstance(n, str)]
    long = next((n for n in names if n.startswith("--")), None)
    chosen = long or (names[0] if names and not names[0].startswith("-") else None)
    return chosen.lstrip("-").replace("-", "_") if chosen else None
