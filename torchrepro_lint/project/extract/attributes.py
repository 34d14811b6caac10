"""Where an attribute's value comes from: the assignments a device read as `self.device`,
`cfg.device` or `Config.device` may hold, for the device evidence of devices.py.

Read from the module's own classes, and conservatively: a later assignment of a plain literal
that stands in its method (or class body) unconditionally replaces what came before it, so a
device set to "cuda" and then to "cpu" is not CUDA. Each value comes with the node its names are
read from. For reads in other modules, `device_summary` sums each class up for the IR
(ir.DeviceSource): what the interpreter needs to decide a read of an imported class's attribute
(interpreter/devices.py), with the same replacing rule.
"""

from __future__ import annotations

import libcst as cst

from torchrepro_lint.analysis.literals import literal_value
from torchrepro_lint.analysis.module_index import ModuleIndex
from torchrepro_lint.analysis.names import LOCAL
from torchrepro_lint.analysis.syntax import arg as _arg
from torchrepro_lint.analysis.syntax import descendants
from torchrepro_lint.project import ir

Value = tuple[cst.BaseExpression, cst.CSTNode]  # (expression, where its names are read)
_MISSING = object()


def local_class(index: ModuleIndex, qualname: str | None) -> cst.ClassDef | None:
    """The class a qualified name like "@.TrainConfig" names in this module, if any."""
    if not qualname or not qualname.startswith(LOCAL):
        return None
    return index.classes.get(qualname[len(LOCAL):])


def class_defaults(index: ModuleIndex, klass: cst.ClassDef, attribute: str) -> list[tuple[Value, bool]]:
    """`device = "cuda"` / `device: str = "cuda"` / `device: str = field(default="cuda")` in
    the class body: (value, unconditional)."""
    return [((value, value), True) for name, value in body_defaults(index, klass) if name == attribute]


def body_defaults(index: ModuleIndex, klass: cst.ClassDef):
    """(attribute, value) for each simple assignment in the class body, in order. A dataclass
    `field(default_factory=TrainConfig)` stands for `TrainConfig()`: its factory is the value."""
    for statement in klass.body.body:
        if not isinstance(statement, cst.SimpleStatementLine):
            continue
        for small in statement.body:
            if isinstance(small, cst.Assign):
                for target in small.targets:
                    if isinstance(target.target, cst.Name):
                        yield target.target.value, small.value
            elif isinstance(small, cst.AnnAssign) and isinstance(small.target, cst.Name) and small.value is not None:
                value = small.value
                if isinstance(value, cst.Call) and index.resolve(value.func, value) == "dataclasses.field":
                    value = _arg(value, None, "default") or _arg(value, None, "default_factory")
                if value is not None:
                    yield small.target.value, value


def method_assignments(index: ModuleIndex, klass: cst.ClassDef, attribute: str):
    """Every `self.<attribute> = value` in the class's methods, in source order:
    (value, the function it is in, unconditional there)."""
    out = []
    for method in klass.body.body:
        if not isinstance(method, cst.FunctionDef):
            continue
        for node in small_statements(method.body):
            if not isinstance(node, (cst.Assign, cst.AnnAssign)):
                continue
            targets = [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target]
            if node.value is not None and any(_is_self_attribute(t, attribute) for t in targets):
                out.append((node.value, method, _unconditional(index, node, method)))
    return out


def small_statements(block: cst.CSTNode):
    """Every simple statement under a method's body, nested blocks (branches, loops, `with`,
    `try`, nested functions) included, in source order. Assignments are statements: walking
    only statements, not every expression node, keeps a class's summary cheap."""
    stack = [block]
    while stack:
        current = stack.pop()
        if isinstance(current, (cst.SimpleStatementLine, cst.SimpleStatementSuite)):
            yield from current.body
            continue
        children = []
        for name in ("body", "handlers", "orelse", "finalbody", "cases"):  # (a block's `body` is its statements)
            part = getattr(current, name, None)
            if isinstance(part, (list, tuple)):
                children.extend(part)
            elif part is not None:
                children.append(part)
        stack.extend(reversed([c for c in children if isinstance(c, cst.CSTNode)]))


def attribute_values(
    index: ModuleIndex, klass: cst.ClassDef, attribute: str, construction: cst.Call | None = None, instance: bool = True
) -> list[Value]:
    """The values `<object>.<attribute>` may hold: the class body's default (a keyword of the
    same name at `construction` replaces it, as a dataclass field's), then, on an instance, what
    the methods assign, a parameter of `__init__` read from `construction` where it is given."""
    if construction is not None and any(a.star for a in construction.args):
        return []  # `Config(**overrides)`: any attribute may be given
    ordered: list[tuple[Value, bool]] = []
    override = _constructor_argument(index, klass, attribute, construction) if construction is not None else None
    if override is not None:
        ordered.append(((override, construction), is_plain_literal(override)))
    else:
        ordered += class_defaults(index, klass, attribute)
    if instance:
        for value, method, unconditional in method_assignments(index, klass, attribute):
            where: cst.CSTNode = value
            if construction is not None and method.name.value == "__init__" and isinstance(value, cst.Name):
                bound = _parameter_value(method, value.value, construction)
                if bound is not None:
                    value, where = bound
            ordered.append(((value, where), unconditional and is_plain_literal(value)))
    # A plain literal set unconditionally replaces every value before it.
    last_replacing = max((i for i, (_, replaces) in enumerate(ordered) if replaces), default=0)
    return [value for value, _ in ordered[last_replacing:]]


def with_stores(values: list[Value], scope: cst.CSTNode, owner: str, attribute: str) -> list[Value]:
    """`values` followed by the stores `owner.attribute = value` in `scope`, in source order. A
    stored literal replaces what came before it wherever it stands (a device set to "cpu" under a
    condition may be the one used: precision first)."""
    out = list(values)
    for node in descendants(scope):
        if isinstance(node, (cst.Assign, cst.AnnAssign)) and node.value is not None:
            targets = [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target]
            if any(_is_attribute_of(t, owner, attribute) for t in targets):
                out = [(node.value, node.value)] if is_plain_literal(node.value) else [*out, (node.value, node.value)]
    return out


def _constructor_argument(index: ModuleIndex, klass: cst.ClassDef, attribute: str, call: cst.Call):
    """`TrainConfig(device="cpu")`, or the positional argument of a dataclass field."""
    keyword = _arg(call, None, attribute)
    if keyword is not None:
        return keyword
    positional = [a.value for a in call.args if a.keyword is None and not a.star]
    fields = _field_names(index, klass) if positional else []
    if attribute not in fields:
        return None
    position = fields.index(attribute)
    return positional[position] if position < len(positional) else None


def _parameter_value(function: cst.FunctionDef, name: str, call: cst.Call) -> tuple[cst.BaseExpression, cst.CSTNode] | None:
    """What parameter `name` of `__init__` is bound to by `call`: its argument, else its default."""
    params = list(function.params.posonly_params) + list(function.params.params)
    names = [p.name.value for p in params]
    if name not in names and name not in [p.name.value for p in function.params.kwonly_params]:
        return None
    keyword = _arg(call, None, name)
    if keyword is not None:
        return keyword, call
    if any(a.star for a in call.args):
        return None
    positional = [a.value for a in call.args if a.keyword is None]
    if name in names:
        position = names.index(name) - 1  # after self
        if 0 <= position < len(positional):
            return positional[position], call
    for param in [*params, *function.params.kwonly_params]:
        if param.name.value == name and param.default is not None:
            return param.default, param.default
    return None


def _is_dataclass(index: ModuleIndex, klass: cst.ClassDef) -> bool:
    for decorator in klass.decorators:
        target = decorator.decorator.func if isinstance(decorator.decorator, cst.Call) else decorator.decorator
        if index.resolve(target, target) in ("dataclasses.dataclass", "dataclass"):
            return True
    return False


def is_plain_literal(value: cst.BaseExpression) -> bool:
    return literal_value(value, _MISSING) is not _MISSING


def _is_self_attribute(target: cst.BaseExpression, attribute: str) -> bool:
    return _is_attribute_of(target, "self", attribute)


def _is_attribute_of(target: cst.BaseExpression, owner: str, attribute: str) -> bool:
    return (
        isinstance(target, cst.Attribute)
        and isinstance(target.value, cst.Name)
        and target.value.value == owner
        and target.attr.value == attribute
    )


def _unconditional(index: ModuleIndex, node: cst.CSTNode, function: cst.FunctionDef) -> bool:
    """Whether `node` runs whenever `function` does: no branch, loop, try or nested def between."""
    for ancestor in index.ancestors(node):
        if ancestor is function:
            return True
        if isinstance(ancestor, (cst.If, cst.For, cst.While, cst.Try, cst.TryStar, cst.Match, cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            return False
    return False


# -- summaries for other modules (ir.ClassIR.devices) --------------------------------------
def device_summary(index: ModuleIndex, klass: cst.ClassDef, names_cuda, nested: bool = True) -> tuple[tuple[str, tuple[ir.DeviceSource, ...]], ...]:
    """Each attribute of the class that may name a CUDA device, with its sources in the order
    `attribute_values` reads them. `names_cuda(value, where)` is the lowering's own test. Kept
    only where a value names CUDA, or a construction may give it one (a dataclass field, an
    `__init__` parameter stored on `self`) and its default is not a number or a flag: a read of
    any other attribute is no device evidence, whatever the module. With `nested`, also the
    devices of a field that defaults to an object of a class of this module (`policy.device`,
    _nested_devices)."""
    defaults: dict[str, cst.BaseExpression] = {}
    for name, value in body_defaults(index, klass):
        defaults[name] = value  # the last one stands
    stores: dict[str, list] = {}
    for method in klass.body.body:
        if not isinstance(method, cst.FunctionDef):
            continue
        for node in small_statements(method.body):
            if isinstance(node, (cst.Assign, cst.AnnAssign)) and node.value is not None:
                targets = [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target]
                for target in targets:
                    if isinstance(target, cst.Attribute) and _is_self_attribute(target, target.attr.value):
                        stores.setdefault(target.attr.value, []).append((node.value, method, _unconditional(index, node, method)))
    dataclass = _is_dataclass(index, klass)
    fields = _field_names(index, klass)
    out = []
    for attribute in dict.fromkeys([*defaults, *stores]):
        default = defaults.get(attribute)
        position = fields.index(attribute) if attribute in fields else None
        given_possible = dataclass and attribute in defaults and not _is_number_or_flag(default)
        if default is not None:
            sources = [ir.DeviceSource(names_cuda(default, default), True, True, attribute, position, on_class=True)]
        else:  # no default, but `Config(device=...)` gives one all the same
            sources = [ir.DeviceSource(False, False, True, attribute, position, on_class=True)]
        for value, method, unconditional in stores.get(attribute, ()):
            parameter = _parameter(method, value) if method.name.value == "__init__" else None
            if parameter is None:
                sources.append(ir.DeviceSource(names_cuda(value, value), unconditional and is_plain_literal(value), unconditional))
                continue
            name, after_self, param_default = parameter
            on_cuda = param_default is not None and names_cuda(param_default, param_default)
            replaces = unconditional and param_default is not None and is_plain_literal(param_default)
            sources.append(ir.DeviceSource(on_cuda, replaces, unconditional, name, after_self))
            given_possible = given_possible or param_default is None or not _is_number_or_flag(param_default)
        if given_possible or any(source.on_cuda for source in sources):
            out.append((attribute, tuple(sources)))
        if nested:
            out.extend(_nested_devices(index, klass, attribute, default, position, names_cuda))
    return tuple(out)


def _nested_devices(index: ModuleIndex, klass: cst.ClassDef, attribute: str, default, position, names_cuda):
    """`policy: PolicyConfig = field(default_factory=PolicyConfig)` (or `= PolicyConfig(...)`),
    with PolicyConfig a class of this module: `policy.device` as another module reads it through
    an instance (`cfg.policy.device`). The nested object's device stands unless the construction
    gives `policy` itself (then whatever it gives decides, as for any field)."""
    call = default if isinstance(default, cst.Call) else None
    func = call.func if call is not None else default
    if not isinstance(func, (cst.Name, cst.Attribute)):
        return []
    inner = local_class(index, index.resolve(func, func))
    if inner is None or inner is klass:
        return []
    out = []
    for name, _ in device_summary(index, inner, names_cuda, nested=False):  # (one level of nesting)
        values = attribute_values(index, inner, name, call, instance=True)
        on_cuda = any(names_cuda(value, where) for value, where in values)
        out.append((f"{attribute}.{name}", (ir.DeviceSource(on_cuda, True, True, attribute, position, on_class=True),)))
    return out


def _field_names(index: ModuleIndex, klass: cst.ClassDef) -> list[str]:
    """A dataclass's fields in order (positional construction), for a class without bases."""
    if klass.bases or not _is_dataclass(index, klass):
        return []
    return [
        s.body[0].target.value
        for s in klass.body.body
        if isinstance(s, cst.SimpleStatementLine) and isinstance(s.body[0], cst.AnnAssign) and isinstance(s.body[0].target, cst.Name)
    ]


def _parameter(function: cst.FunctionDef, value: cst.BaseExpression):
    """`self.device = device` with `device` a parameter of `__init__`: (name, position after
    self or None for keyword-only, its default or None)."""
    if not isinstance(value, cst.Name):
        return None
    positional = list(function.params.posonly_params) + list(function.params.params)
    for number, param in enumerate(positional):
        if param.name.value == value.value:
            return value.value, (number - 1 if number else None), param.default
    for param in function.params.kwonly_params:
        if param.name.value == value.value:
            return value.value, None, param.default
    return None


def _is_number_or_flag(value: cst.BaseExpression | None) -> bool:
    literal = literal_value(value, _MISSING)
    return literal is not _MISSING and (isinstance(literal, (int, float)) or literal is True or literal is False)
