"""Where the project uses a module-level function or class, without reading other modules' trees.

The op rules ask two questions of the whole project: is this function only ever called from
code without gradients (`@torch.no_grad()` callers, ...), and is this nn.Module class built only
at the top level (a whole model, whose `forward` receives data)? Answering them looks at every
module that mentions the name. Each module's answer is a *summary*, `Use` records computed from
its tree once and kept by the run's store (and the persistent cache) by the module's content, so
a re-run after an edit parses the edited file, not every module that mentions a name in it.
Results that read a summary depend on the summary, not on the module's text.
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from torchrepro_lint.analysis.dataflow.core import named
from torchrepro_lint.analysis.module_index import ModuleIndex
from torchrepro_lint.analysis.names import LOCAL
from torchrepro_lint.analysis.op_matching.dispatch import Branch, Parameter, arguments_of_calls, passed, selected
from torchrepro_lint.analysis.op_matching.gradients import GradContext, module_level_function
from torchrepro_lint.analysis.op_matching.requires_grad import PLAIN_BASES
from torchrepro_lint.project.summaries import summary, summary_kind

# Name loads that are not uses: definitions, imports, parameters, assignment targets, keywords.
_NOT_USES = (cst.FunctionDef, cst.ClassDef, cst.ImportAlias, cst.Param, cst.AsName, cst.AssignTarget)


@dataclass(frozen=True)
class Use:
    """One load of a name in a module, with everything the project questions need of it."""

    qualname: str | None  # what it resolves to in its module (LOCAL + name for its own)
    no_grad: bool  # runs without autograd there (under no_grad, in a Dataset, ...)
    outer_function: str | None  # the module-level function it is in, if any
    in_bases: bool  # a base class of a class statement
    classes: tuple  # enclosing classes, innermost first: (dotted class path, is an nn.Module class)
    method: str | None = None  # the method of the innermost class it is in, if any


@dataclass(frozen=True)
class Place:
    """Where a name is loaded, without the gradient context (cheap: what top_level_model needs)."""

    qualname: str | None
    in_bases: bool
    classes: tuple  # as Use.classes


def places_in(index: ModuleIndex, path: str, name: str) -> tuple[Place, ...]:
    """The summary: where `name` (as `name` or `<expr>.name`) is loaded in one module's tree."""
    grad = GradContext(index, path)
    return tuple(Place(index.resolve(n, n), _in_bases(index, n), _classes_around(index, grad, n)) for n in _loads(index, name))


def _loads(index: ModuleIndex, name: str):
    """The loads of `name` (`name` or `<expr>.name`) that are uses, in source order."""
    return (node for node in named(index, name) if type(node) is not cst.Name or _is_use(index, node))


def _classes_around(index: ModuleIndex, grad: GradContext, node: cst.CSTNode) -> tuple:
    classes = []
    owner = index.enclosing(node, cst.ClassDef)
    while owner is not None:
        classes.append((class_path(index, owner), grad.is_module_class(owner)))
        owner = index.enclosing(owner, cst.ClassDef)
    return tuple(classes)


def uses_in(index: ModuleIndex, path: str, name: str) -> tuple[Use, ...]:
    """The summary: every use of `name` (as `name` or `<expr>.name`) in one module's tree."""
    grad = GradContext(index, path)
    out = []
    for node in _loads(index, name):
        outer = module_level_function(index, node)
        out.append(
            Use(
                qualname=index.resolve(node, node),
                no_grad=bool(grad.no_grad_reason(node)),
                outer_function=outer.name.value if outer is not None else None,
                in_bases=_in_bases(index, node),
                classes=_classes_around(index, grad, node),
                method=_method_around(index, node),
            )
        )
    return tuple(out)


def _method_around(index: ModuleIndex, node: cst.CSTNode) -> str | None:
    """The name of the method (of the innermost class around `node`) that holds it."""
    method = None
    for ancestor in index.ancestors(node):
        if isinstance(ancestor, cst.FunctionDef):
            method = ancestor
        elif isinstance(ancestor, cst.ClassDef):
            return method.name.value if method is not None else None
    return None


def class_path(index: ModuleIndex, klass: cst.ClassDef) -> str:
    """`Outer.Inner`: a class named by the classes around it."""
    names = [klass.name.value]
    owner = index.enclosing(klass, cst.ClassDef)
    while owner is not None:
        names.append(owner.name.value)
        owner = index.enclosing(owner, cst.ClassDef)
    return ".".join(reversed(names))


def _is_use(index: ModuleIndex, node: cst.Name) -> bool:
    parent = index.parents.get(node)
    if isinstance(parent, _NOT_USES):
        return False
    if isinstance(parent, cst.Attribute) and parent.attr is node:
        return False  # counted as the Attribute
    return not (isinstance(parent, cst.Arg) and parent.keyword is node)


def _in_bases(index: ModuleIndex, ref: cst.CSTNode) -> bool:
    for ancestor in index.ancestors(ref):
        if isinstance(ancestor, cst.Arg):
            holder = index.parents.get(ancestor)
            return isinstance(holder, cst.ClassDef) and any(b is ancestor for b in holder.bases)
        if isinstance(ancestor, (cst.BaseSmallStatement, cst.BaseCompoundStatement)):
            return False
    return False


@summary_kind("uses")
def _uses_of(module, name: str) -> tuple[Use, ...]:
    return uses_in(module.index, module.source.path.as_posix(), name)


@summary_kind("places")
def _places_of(module, name: str) -> tuple[Place, ...]:
    return places_in(module.index, module.source.path.as_posix(), name)


@summary_kind("call arguments")
def _call_arguments_of(module, name: str) -> tuple:
    return arguments_of_calls(module.index, name)


class ProjectUses:
    """The project questions of the op rules, answered from per-module summaries."""

    def __init__(self, project) -> None:
        self.project = project
        self._memo: dict[tuple, bool] = {}

    def references(self, module, name: str, kind: str = "uses") -> list[tuple]:
        """(module, Use) for each use of `module`'s module-level function or class `name` (with
        `kind` "places": (module, Place), without the gradient context)."""
        out = []
        for other in self.project.modules_mentioning(name):
            for use in summary(other, kind, name):
                if self._is_definition(other, use.qualname, module, name):
                    out.append((other, use))
        return out

    def only_without_grad(self, module, name: str, depth: int = 0) -> bool:
        """Every use of function `name` runs without gradients, directly or through callers
        (two levels up)."""
        key = (module.path, name)
        if key in self._memo:
            return self._memo[key]
        self._memo[key] = False  # recursion: not by itself
        refs = self.references(module, name)
        result = bool(refs) and all(self._use_without_grad(other, use, depth) for other, use in refs)
        self._memo[key] = result
        return result

    def _use_without_grad(self, other, use: Use, depth: int) -> bool:
        if use.no_grad:
            return True
        if depth >= 2:
            return False
        if use.outer_function is None:
            return use.method is not None and self._method_only_without_grad(other, use)
        return self.only_without_grad(other, use.outer_function, depth + 1)

    def _method_only_without_grad(self, other, use: Use) -> bool:
        """The use is in a method that only the project calls, and only without gradients (as
        requires_grad asks of a method holding an op: not a dunder or `forward`, in a module-level
        class that is no framework's subclass). A private method (`_encode_image`) is its
        module's: only the uses of its name there count, where a public one's count anywhere."""
        name = use.method
        if name.startswith("__") or name == "forward" or len(use.classes) != 1:
            return False
        if self.framework_class(other, use.classes[0][0]):
            return False
        if name.startswith("_"):
            uses = summary(other, "uses", name)
            return bool(uses) and all(u.no_grad for u in uses)
        return self.name_used_only_without_grad(name)

    def framework_class(self, module, name: str) -> bool:
        """Some class along the bases of `module`'s class `name`, through the project's own
        classes in any module, is outside the project and not nn.Module or `object` (or cannot
        be told): a framework may call its methods by name (a Trainer's hooks)."""
        project = self.project
        symbol = project.resolve(LOCAL + name, module)
        if symbol is None or symbol.klass is None:
            return True
        for current in project.lineage(symbol):
            for base in current.klass.bases:
                if project.resolve(base, current.module) is None and project.external_name(base, current.module) not in PLAIN_BASES:
                    return True
        return False

    def name_used_only_without_grad(self, name: str, module=None) -> bool:
        """Every use of `name` in the project (`<expr>.name` or a bare `name`) runs without
        gradients: a method the project calls only from no-grad code. Matched by name alone, so
        a same-named method used with gradients anywhere keeps the answer False. With `module`
        (the method's own), other modules' tests are left aside."""
        key = ("name", name, module.path if module is not None else None)
        if key not in self._memo:
            uses = [
                use for other in self.project.modules_mentioning(name)
                if module is None or other is module or not self.in_tests(other)
                for use in summary(other, "uses", name)
            ]  # fmt: skip
            self._memo[key] = bool(uses) and all(use.no_grad for use in uses)
        return self._memo[key]

    def top_level_model(self, module, klass: cst.ClassDef) -> bool:
        """The project builds this class, and never inside an nn.Module class: it is a whole model,
        and its `forward` receives data."""
        key = (module.path, "class:" + klass.name.value)
        if key in self._memo:
            return self._memo[key]
        own_path = class_path(module.index, klass)
        built = [
            (other, use) for other, use in self.references(module, klass.name.value, "places")
            if not use.in_bases and not _test_code(self._relative(other))
        ]  # fmt: skip
        result = bool(built)  # never built in the project: could be anyone's block, so unknown
        for other, use in built:
            if any(is_module and not (other is module and path == own_path) for path, is_module in use.classes):
                result = False
                break
        self._memo[key] = result
        return result

    def branch_selected(self, module, branch: Branch) -> bool:
        """A call somewhere in the project takes `module`'s function `branch.function` into the
        branch (analysis/op_matching/dispatch.py): a literal that selects it, or a default that does."""
        name = branch.function
        for other in self.project.modules_mentioning(name):
            calls = [c for c in summary(other, "call arguments", name) if self._is_definition(other, c[0], module, name)]
            if selected(branch, calls):
                return True
        return False

    def passed_values(self, module, parameter: Parameter) -> frozenset:
        """The literal values that calls in the project, tests aside, give a parameter of
        `module`'s function (its default where a call leaves it out): a wrapper's `mode`, as
        `resize(x, mode="area")` passes it (dispatch.passed)."""
        name = parameter.function
        out: set = set()
        for other in self.project.modules_mentioning(name):
            if other is not module and self.in_tests(other):
                continue
            calls = [c for c in summary(other, "call arguments", name) if self._is_definition(other, c[0], module, name)]
            out |= passed(parameter, calls)
        return frozenset(out)

    def external_name(self, qualname: str, module) -> str | None:
        """The name outside the project that a project name, as `module` sees it, stands for
        (ProjectIndex.external_name: a re-export, an alias `interpolate = F.interpolate`)."""
        found = self.project.external_name(qualname, module)
        return None if found == qualname else found

    def in_tests(self, module) -> bool:
        """The module is test code (a `tests/` directory, `test_*.py`, `conftest.py`)."""
        return _test_code(self._relative(module))

    def _relative(self, module):
        try:
            return module.path.relative_to(self.project.root)
        except ValueError:
            return module.path

    def _is_definition(self, other, qualname: str | None, module, name: str) -> bool:
        """The use in `other` names `module`'s own `name`."""
        if qualname is None:
            return False
        if other is module:
            return qualname == LOCAL + name
        symbol = self.project.resolve(qualname, other)
        return symbol is not None and symbol.module is module and symbol.path == name


def _test_code(path) -> bool:
    """Test files build layers on their own; that says nothing about how models use them."""
    name = path.name
    return (
        name.startswith("test_") or name.endswith("_test.py") or name == "conftest.py"
        or any(part in ("test", "tests") for part in path.parts[:-1])
    )  # fmt: skip
