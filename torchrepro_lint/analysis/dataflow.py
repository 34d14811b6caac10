"""Small, flow-insensitive-by-default data flow over one module, computed lazily from its index.

`flow(index)` returns the module's `Flow` (cached on the index): source order of nodes, the
function that owns a node, the uses of a local name or of `self.<attr>` across a class, the
value that reaches a name, and a few value views the rules share:

- `dict_view(expr, at)`: the keys of a `**kwargs` dict a call receives, following a literal,
  `dict(...)`, `.update(...)`, `d[k] = v`, `{**a, **b}` and `a if c else b`; `complete` is False
  when part of the dict is opaque (a parameter, the result of an unknown call).
- `callee_classes(func, at)`: the qualified names a called expression may be, through a
  variable bound to a class (`loader = DataLoader if a else MyLoader`).
- `OrderFlow`: where the order of an order-unstable collection (a directory listing, a set)
  goes next: sorted, an order-free use, an order-sensitive sink (index, enumerate, zip,
  first match, ...), or somewhere we cannot see (unknown).

Everything answers from what is written in this module; when the evidence runs out the
answer is "unknown", and rules stay silent on unknown.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, replace
from functools import cached_property
from typing import Callable

import libcst as cst

from torchrepro_lint.analysis.module_index import ModuleIndex
from torchrepro_lint.analysis.names import dotted
from torchrepro_lint.analysis.syntax import arg  # noqa: F401  (re-exported: rules import it from here)
from torchrepro_lint.analysis.syntax import evaluated_string

Owner = cst.CSTNode  # a FunctionDef, a Lambda, or the Module: the scope a local name lives in

def flow(index: ModuleIndex) -> Flow:
    """The module's Flow, built once per index (and kept on it)."""
    found = index.derived.get("flow")
    if found is None:
        found = index.derived["flow"] = Flow(index)
    return found


def programs_for(context, module, node) -> list:
    """The programs whose facts decide a per-call finding's level: those that run the
    function around `node`. For a method that no program is seen calling (hooks called by a
    framework, objects passed around), the programs that reach its module; for a plain
    function nobody calls, none (unknown)."""
    running = context.programs_running(module, node)
    if running:
        return running
    outer = None
    for ancestor in module.index.ancestors(node):
        if isinstance(ancestor, cst.FunctionDef):
            outer = ancestor
    if outer is None or module.index.enclosing(outer, cst.ClassDef) is not None:
        return context.programs_reaching(module)
    return []


# -- small syntax helpers ---------------------------------------------------------------------


_NO_NAMES: list = []
_STATEMENT_KINDS: dict[type, bool] = {}


def _is_statement(node: cst.CSTNode) -> bool:
    """isinstance(node, (BaseSmallStatement, BaseCompoundStatement)), cached per class."""
    kind = type(node)
    found = _STATEMENT_KINDS.get(kind)
    if found is None:
        found = _STATEMENT_KINDS[kind] = issubclass(kind, (cst.BaseSmallStatement, cst.BaseCompoundStatement))
    return found


def is_none(expr: cst.BaseExpression | None) -> bool:
    return isinstance(expr, cst.Name) and expr.value == "None"


def int_value(expr: cst.BaseExpression | None) -> int | None:
    """The value of an integer literal (`3`, `-1`), else None."""
    if isinstance(expr, cst.Integer):
        return int(expr.value.replace("_", ""), 0)
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Minus):
        inner = int_value(expr.expression)
        return -inner if inner is not None else None
    return None


def bool_value(expr: cst.BaseExpression | None) -> bool | None:
    if isinstance(expr, cst.Name) and expr.value in ("True", "False"):
        return expr.value == "True"
    return None


def string_value(expr: cst.BaseExpression | None) -> str | None:
    if isinstance(expr, cst.SimpleString):
        value = evaluated_string(expr)
        return value if isinstance(value, str) else None
    return None


def self_attribute(expr: cst.BaseExpression) -> str | None:
    """`self.x` -> "x" (the receiver must be a plain name; the caller checks it is `self`)."""
    if isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name) and expr.value.value == "self":
        return expr.attr.value
    return None


def method_name(call: cst.Call) -> str | None:
    return call.func.attr.value if isinstance(call.func, cst.Attribute) else None


def assign_targets(node: cst.CSTNode) -> list[cst.BaseExpression]:
    if isinstance(node, cst.Assign):
        return [t.target for t in node.targets]
    if isinstance(node, (cst.AnnAssign, cst.AugAssign, cst.NamedExpr)):
        return [node.target]
    return []


# -- the per-module flow ----------------------------------------------------------------------
class Flow:
    def __init__(self, index: ModuleIndex) -> None:
        self.index = index
        self.parents = index.parents

    @cached_property
    def _order(self) -> dict[int, int]:
        # index.parents is filled in visit order, so its keys are the nodes in source order.
        return self.index.positions()  # the Module 0, then parents' keys from 1

    def pos(self, node: cst.CSTNode) -> int:
        return self._order.get(id(node), 0)

    @cached_property
    def _names(self) -> dict[str, list[cst.Name]]:
        names: dict[str, list[cst.Name]] = {}
        for node in self.index.nodes_of(cst.Name):  # in source order
            names.setdefault(node.value, []).append(node)
        return names

    def _owned(self, name: str, owner: Owner) -> list[cst.Name]:
        """The Name nodes spelled `name` whose owner is `owner`, in source order (grouped once
        per name)."""
        groups = self._owned_names.get(name)
        if groups is None:
            groups = self._owned_names[name] = {}
            for node in self._names.get(name, ()):
                groups.setdefault(id(self.owner(node)), []).append(node)
        return groups.get(id(owner), _NO_NAMES)

    @cached_property
    def _owned_names(self) -> dict[str, dict[int, list[cst.Name]]]:
        return {}

    def names_called(self, name: str) -> list[cst.Name]:
        """Every Name node spelled `name` (loads, stores, attribute names, keywords), in source
        order. Shared: do not modify the list."""
        return self._names.get(name, [])

    @cached_property
    def _self_attrs(self) -> dict[str, list[cst.Attribute]]:
        attrs: dict[str, list[cst.Attribute]] = {}
        for node in self.index.nodes_of(cst.Attribute):
            if type(node.value) is cst.Name and node.value.value == "self":
                attrs.setdefault(node.attr.value, []).append(node)
        return attrs

    @cached_property
    def attribute_names(self) -> dict[str, list[cst.Attribute]]:
        """Every `<expr>.<name>` by name, in source order."""
        attrs: dict[str, list[cst.Attribute]] = {}
        for node in self.index.nodes_of(cst.Attribute):
            attrs.setdefault(node.attr.value, []).append(node)
        return attrs

    # -- structure ----------------------------------------------------------------------------
    def owner(self, node: cst.CSTNode) -> Owner:
        """The function (or lambda) whose local names `node` sees; the Module at top level."""
        found = self.index.enclosing(node, cst.FunctionDef, cst.Lambda)
        return self.index.module if found is None else found

    def statement(self, node: cst.CSTNode) -> cst.CSTNode:
        """The small or compound statement containing `node`."""
        current = node
        while current is not None and not _is_statement(current):
            current = self.parents.get(current)
        return current if current is not None else node

    def inside(self, node: cst.CSTNode, container: cst.CSTNode) -> bool:
        return node is container or any(a is container for a in self.index.ancestors(node))

    def enclosing_class(self, node: cst.CSTNode) -> cst.ClassDef | None:
        return self.index.enclosing(node, cst.ClassDef)

    def methods(self, klass: cst.ClassDef) -> dict[str, cst.FunctionDef]:
        out: dict[str, cst.FunctionDef] = {}
        body = klass.body.body if isinstance(klass.body, cst.IndentedBlock) else ()
        for statement in body:
            if isinstance(statement, cst.FunctionDef):
                out[statement.name.value] = statement
        return out

    # -- names --------------------------------------------------------------------------------
    def is_load(self, name: cst.Name) -> bool:
        """A Name node that reads a variable (not an attribute name, keyword, target or def name)."""
        parent = self.parents.get(name)
        if isinstance(parent, cst.Attribute) and parent.attr is name:
            return False
        if isinstance(parent, (cst.Arg,)) and parent.keyword is name:
            return False
        if isinstance(parent, (cst.FunctionDef, cst.ClassDef, cst.Param, cst.ImportAlias, cst.AsName)):
            return False
        if isinstance(parent, (cst.AssignTarget,)) or (
            isinstance(parent, (cst.AnnAssign, cst.AugAssign, cst.NamedExpr)) and parent.target is name
        ):
            return isinstance(parent, cst.AugAssign)  # `x += 1` reads x
        if isinstance(parent, (cst.For, cst.CompFor)) and parent.target is name:
            return False
        if isinstance(parent, (cst.Element, cst.StarredElement)):
            grand = self.parents.get(parent)
            if isinstance(grand, (cst.Tuple, cst.List)) and self._is_target(grand):
                return False
        return True

    def _is_target(self, node: cst.CSTNode) -> bool:
        parent = self.parents.get(node)
        if isinstance(parent, cst.AssignTarget):
            return True
        if isinstance(parent, (cst.For, cst.CompFor)) and parent.target is node:
            return True
        if isinstance(parent, (cst.Element, cst.StarredElement)):
            grand = self.parents.get(parent)
            return isinstance(grand, (cst.Tuple, cst.List)) and self._is_target(grand)
        return False

    def name_uses(self, name: str, owner: Owner, after: cst.CSTNode | None = None) -> list[cst.Name]:
        """Reads of local `name` in `owner` (not in functions nested in it), after `after`."""
        start = self.pos(after) if after is not None else -1
        out = []
        for node in self._owned(name, owner):  # the same filter, owner first
            if self.pos(node) <= start or not self.is_load(node):
                continue
            if after is not None and self.inside(node, after):
                continue
            out.append(node)
        return out

    def used_in_nested(self, name: str, owner: Owner) -> bool:
        """Whether a function or lambda nested in `owner` mentions `name` (a closure)."""
        for node in self._names.get(name, ()):
            inner = self.owner(node)
            if inner is not owner and self.inside(inner, owner):
                return True
        return False

    def self_attr_uses(self, klass: cst.ClassDef, attr: str) -> list[cst.Attribute]:
        """Every `self.<attr>` read inside the methods of `klass` (assignment targets left out)."""
        out = []
        for node in self._self_attrs.get(attr, ()):
            if self.enclosing_class(node) is not klass or self._is_store(node):
                continue
            out.append(node)
        return out

    def self_attr_stores(self, klass: cst.ClassDef, attr: str) -> list[cst.Attribute]:
        return [
            node for node in self._self_attrs.get(attr, ())
            if self.enclosing_class(node) is klass and self._is_store(node)
        ]

    def self_attr_values(self, klass: cst.ClassDef, attr: str) -> list[cst.BaseExpression] | None:
        """Every value assigned to `self.<attr>` in the class; None if one store has no plain value
        (an augmented assignment, a tuple unpacking): then what it holds is not known."""
        values: list[cst.BaseExpression] = []
        for store in self.self_attr_stores(klass, attr):
            parent = self.parents.get(store)
            statement = self.parents.get(parent) if isinstance(parent, cst.AssignTarget) else parent
            value = getattr(statement, "value", None)
            if value is None:
                return None
            values.append(value)
        return values

    def _is_store(self, node: cst.CSTNode) -> bool:
        parent = self.parents.get(node)
        if isinstance(parent, cst.AssignTarget):
            return True
        if isinstance(parent, (cst.AnnAssign, cst.NamedExpr)) and parent.target is node:
            return True
        return self._is_target(node)

    def bindings(self, name: str, owner: Owner) -> list[tuple[cst.CSTNode, cst.BaseExpression | None]]:
        """(statement, value or None) for each binding of `name` in `owner`, in source order."""
        key = (name, id(owner))  # owners are nodes of this tree (or the Module): ids are stable
        found = self._bindings.get(key)
        if found is None:
            found = self._bindings[key] = self._find_bindings(name, owner)
        return list(found)

    @cached_property
    def _bindings(self) -> dict[tuple[str, int], list]:
        return {}

    def _find_bindings(self, name: str, owner: Owner) -> list[tuple[cst.CSTNode, cst.BaseExpression | None]]:
        out = []
        for node in self._owned(name, owner):
            parent = self.parents.get(node)
            if isinstance(parent, cst.AssignTarget):
                out.append((self.parents[parent], self.parents[parent].value))
            elif isinstance(parent, (cst.AnnAssign, cst.NamedExpr)) and parent.target is node:
                out.append((parent, parent.value))
            elif isinstance(parent, cst.AugAssign) and parent.target is node:
                out.append((parent, None))
            elif self._is_target(node) or (isinstance(parent, cst.AsName)):
                out.append((self.statement(node), None))
            elif isinstance(parent, cst.Param) and parent.name is node:
                out.append((parent, None))
        return out

    def reaching_value(self, name: cst.Name) -> cst.BaseExpression | None:
        """The value of the nearest assignment to `name` before it in its function (by source
        order, branches ignored); falls back to the module-level binding. None if it is bound by
        anything else (a parameter, a loop, an augmented assignment, unpacking)."""
        owner = self.owner(name)
        here = self.pos(name)
        best = None
        for statement, value in self.bindings(name.value, owner):
            if self.pos(statement) < here and not self.inside(name, statement):
                best = (statement, value)
        if best is not None:
            return best[1]
        if owner is not self.index.module and not self.bindings(name.value, owner):
            for statement, value in self.bindings(name.value, self.index.module):
                best = (statement, value)
            return best[1] if best is not None else None
        return None

    def parameter(self, name: cst.Name) -> cst.Param | None:
        """The parameter `name` refers to, when it is one of its function's parameters and the
        function never rebinds it."""
        owner = self.owner(name)
        if not isinstance(owner, (cst.FunctionDef, cst.Lambda)):
            return None
        binds = self.bindings(name.value, owner)
        params = [s for s, _ in binds if isinstance(s, cst.Param)]
        if params and len(binds) == len(params):
            return params[0]
        return None

    # -- dict views (kwargs dicts) -------------------------------------------------------------
    def dict_view(self, expr: cst.BaseExpression, at: cst.CSTNode, depth: int = 0) -> DictView:
        """The keys an expression holds when it is a dict, as far as this module shows."""
        if depth > 6:
            return opaque()
        if isinstance(expr, cst.Dict):
            view = literal()
            for element in expr.elements:
                if isinstance(element, cst.DictElement):
                    key = string_value(element.key)
                    if key is None:
                        view.complete = False
                    else:
                        view.set(key, element.value)
                else:  # **other
                    view = view.merged(self.dict_view(element.value, at, depth + 1))
            return view
        if isinstance(expr, cst.Call) and self.index.resolve(expr.func, at) == "builtins.dict":
            view = literal()
            for a in expr.args:
                if a.keyword is not None:
                    view.set(a.keyword.value, a.value)
                else:
                    view = view.merged(self.dict_view(a.value, at, depth + 1))
            return view
        if isinstance(expr, cst.IfExp):
            return self.dict_view(expr.body, at, depth + 1).either(self.dict_view(expr.orelse, at, depth + 1))
        if isinstance(expr, cst.Name):
            value = self.reaching_value(expr)
            if value is None:
                return opaque()
            view = self.dict_view(value, value, depth + 1)
            return self._dict_updates(expr, view, at, depth)
        return opaque()

    def _dict_updates(self, name: cst.Name, view: DictView, at: cst.CSTNode, depth: int) -> DictView:
        """Add what `.update(...)`, `d[k] = v` and `d |= {...}` put into the dict before `at`."""
        owner = self.owner(name)
        limit = self.pos(self.statement(at))
        for use in self.name_uses(name.value, owner):
            if self.pos(use) >= limit:
                continue
            parent = self.parents.get(use)
            if isinstance(parent, cst.Attribute) and parent.value is use:
                call = self.parents.get(parent)
                if isinstance(call, cst.Call) and call.func is parent:
                    if parent.attr.value == "update":
                        for a in call.args:
                            if a.keyword is not None:
                                view.set(a.keyword.value, a.value)
                            else:
                                view = view.merged(self.dict_view(a.value, call, depth + 1))
                    elif parent.attr.value in ("setdefault",) and call.args:
                        key = string_value(call.args[0].value)
                        if key is None:
                            view.complete = False
                        elif len(call.args) > 1:
                            for option in view.options:
                                option.setdefault(key, call.args[1].value)
                    elif parent.attr.value in ("pop", "clear", "popitem"):
                        view.complete = False
            elif isinstance(parent, cst.Subscript) and parent.value is use:
                target_of = self.parents.get(parent)
                if isinstance(target_of, cst.AssignTarget):
                    elements = parent.slice
                    key = None
                    if len(elements) == 1 and isinstance(elements[0].slice, cst.Index):
                        key = string_value(elements[0].slice.value)
                    if key is None:
                        view.complete = False
                    else:
                        view.set(key, self.parents[target_of].value)
            elif isinstance(parent, cst.AugAssign) and parent.target is use:
                view = view.merged(self.dict_view(parent.value, parent, depth + 1))
        return view

    # -- classes bound to variables ------------------------------------------------------------
    def callee_classes(self, func: cst.BaseExpression, at: cst.CSTNode, depth: int = 0) -> set[str]:
        """Qualified names a called expression may be: itself, or through a variable bound to
        a name or to `A if c else B`."""
        if depth > 4:
            return set()
        if isinstance(func, cst.IfExp):
            return self.callee_classes(func.body, at, depth + 1) | self.callee_classes(func.orelse, at, depth + 1)
        resolved = self.index.resolve(func, at) if isinstance(func, (cst.Name, cst.Attribute)) else None
        if resolved is not None:
            return {resolved}
        if isinstance(func, cst.Name):
            value = self.reaching_value(func)
            if value is not None:
                return self.callee_classes(value, value, depth + 1)
        return set()


@dataclass
class DictView:
    """The keys a dict may hold: one option per branch of `a if c else b` (merges multiply)."""

    options: list[dict[str, cst.BaseExpression]]
    complete: bool  # False: part of the dict is opaque, more keys may be there

    @property
    def keys(self) -> dict[str, cst.BaseExpression]:
        out: dict[str, cst.BaseExpression] = {}
        for option in self.options:
            out.update(option)
        return out

    def merged(self, other: DictView) -> DictView:
        options = [{**a, **b} for a in self.options for b in other.options][:16]
        return DictView(options, self.complete and other.complete)

    def either(self, other: DictView) -> DictView:
        return DictView((self.options + other.options)[:16], self.complete and other.complete)

    def set(self, key: str, value: cst.BaseExpression) -> None:
        for option in self.options:
            option[key] = value


def opaque() -> DictView:
    return DictView([{}], False)


def literal(keys: dict[str, cst.BaseExpression] | None = None) -> DictView:
    return DictView([dict(keys or {})], True)


# Dataset base classes: a project class deriving from one is a dataset.
DATASET_BASES = frozenset(
    {
        "torch.utils.data.Dataset",
        "torch.utils.data.IterableDataset",
        "torch.utils.data.TensorDataset",
        "torch_geometric.data.Dataset",
        "torch_geometric.data.InMemoryDataset",
    }
)
DATASET_PREFIXES = ("torchvision.datasets.",)

_DERIVES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_EXTERNAL_ROOTS = frozenset(
    "torch numpy random os sys builtins time math datetime json logging argparse typing collections "
    "itertools functools pathlib re shutil subprocess glob io abc dataclasses enum copy pickle sklearn "
    "torchvision torch_geometric transformers lightning pytorch_lightning timm PIL cv2 pandas scipy".split()
)


def derives_from(project, module, qualname: str | None, targets: frozenset[str], prefixes: tuple[str, ...] = ()):
    """Whether the class `qualname` (as `module` sees it) is one of `targets` (or starts with
    one of `prefixes`), directly (True) or as a project class deriving from one through
    project base classes (its Symbol). None otherwise. Cached per module."""
    if not qualname:
        return None
    if qualname in targets or (prefixes and qualname.startswith(prefixes)):
        return True
    if qualname.split(".")[0] in _EXTERNAL_ROOTS:
        return None
    cache = _DERIVES.setdefault(module, {})
    key = (qualname, targets, prefixes)
    if key not in cache:
        cache[key] = None  # cycles answer None
        cache[key] = _derives(project, module, qualname, targets, prefixes, 0)
    return cache[key]


def _derives(project, module, qualname, targets, prefixes, depth):
    if depth > 8:
        return None
    symbol = project.resolve(qualname, module)
    if symbol is None or symbol.klass is None:
        return None
    for base in symbol.klass.bases:
        if base in targets or (prefixes and base.startswith(prefixes)):
            return symbol
        if base.split(".")[0] not in _EXTERNAL_ROOTS and _derives(project, symbol.module, base, targets, prefixes, depth + 1):
            return symbol
    return None


# -- where the order of a collection goes -----------------------------------------------------
HAZARD, SORTED, SAFE, UNKNOWN = "hazard", "sorted", "safe", "unknown"


@dataclass(frozen=True)
class Verdict:
    kind: str  # HAZARD | SORTED | SAFE | UNKNOWN
    sink: str = ""  # what the order decides, for messages: "the numbers enumerate() assigns", ...
    node: cst.CSTNode | None = None  # where the order is consumed
    entry: cst.CSTNode | None = None  # the collection as it enters the first ordering construct
    materialized: bool = False  # the order was copied into a list on the way
    loop: cst.CSTNode | None = None  # the loop that accumulated it, for parallel lists


def combine(verdicts: list[Verdict]) -> Verdict:
    """Several uses of one variable: a sort anywhere wins (the order is fixed where it
    matters, the trap "sorted() later"), then the first hazard, then unknown, then safe."""
    for kind in (SORTED, HAZARD, UNKNOWN):
        for verdict in verdicts:
            if verdict.kind == kind:
                return verdict
    return verdicts[0] if verdicts else Verdict(SAFE)


INDEXING = "which element an index or slice picks"
SORTING_CALLS = frozenset({"builtins.sorted", "heapq.nsmallest", "heapq.nlargest", "natsort.natsorted", "natsort.os_sorted"})
ORDER_FREE_CALLS = frozenset(
    "builtins.set builtins.frozenset builtins.len builtins.sum builtins.min builtins.max builtins.any "
    "builtins.all builtins.bool collections.Counter math.fsum builtins.print".split()
)
MATERIALIZING_CALLS = frozenset(
    "builtins.list builtins.tuple builtins.iter builtins.reversed builtins.filter numpy.array numpy.asarray "
    "torch.tensor torch.as_tensor torch.LongTensor torch.Tensor itertools.chain dict.fromkeys "
    "collections.OrderedDict.fromkeys".split()
)
SELECTING_CALLS = {
    "builtins.enumerate": "the numbers enumerate() assigns",
    "builtins.zip": "which elements zip() pairs",
    "builtins.next": "which entry next() picks first",
    "random.shuffle": "what a seeded random.shuffle returns (it permutes by position)",
    "random.choice": "what a seeded random.choice picks (by position)",
    "random.sample": "what a seeded random.sample picks (by position)",
    "numpy.random.shuffle": "what a seeded np.random.shuffle returns (it permutes by position)",
    "numpy.random.choice": "what a seeded np.random.choice picks (by position)",
    "numpy.random.permutation": "what a seeded np.random.permutation returns (it permutes by position)",
}
NEUTRAL_METHODS = frozenset(
    "add update remove discard append extend insert clear issubset issuperset isdisjoint count "
    "__contains__ intersection_update difference_update".split()
)
SET_METHODS = frozenset("union intersection difference symmetric_difference copy".split())
LOG_CALLS = frozenset(
    "print debug info warning warn error exception critical log write set_description set_postfix".split()
)


class OrderFlow:
    """Follows a collection whose order is not stable to where its order is used.

    `extra_sink(call, qualname, at)` lets a rule name more order-sensitive consumers (a
    Dataset constructor, an optimizer); it returns a sink description or None.
    """

    def __init__(self, index: ModuleIndex, extra_sink: Callable | None = None) -> None:
        self.index = index
        self.flow = flow(index)
        self.extra_sink = extra_sink
        self._active: set[tuple] = set()

    def of(self, node: cst.BaseExpression) -> Verdict:
        """Where the order of the collection `node` evaluates to goes."""
        return self._from(node, Verdict(UNKNOWN), 0)

    def of_binding(self, target: cst.BaseExpression, statement: cst.CSTNode) -> Verdict:
        """The same for a collection bound to `target` (a name or `self.x`) by `statement`."""
        return self._into(target, statement, Verdict(UNKNOWN), 0)

    def _step(self, state: Verdict, node: cst.CSTNode, ordering: bool = True, materialized: bool = False) -> Verdict:
        """Carry `state` past `node`; `ordering` marks a construct that consumes the order."""
        entry = state.entry if state.entry is not None or not ordering else node
        return replace(state, entry=entry, materialized=state.materialized or materialized)

    def _end(self, state: Verdict, kind: str, node: cst.CSTNode, sink: str = "") -> Verdict:
        entry = state.entry if state.entry is not None else node
        return replace(state, kind=kind, sink=sink, node=node, entry=entry)

    def _from(self, node: cst.CSTNode, state: Verdict, depth: int) -> Verdict:
        if depth > 12:
            return self._end(state, UNKNOWN, node)
        parents = self.flow.parents
        parent = parents.get(node)
        index = self.index

        if isinstance(parent, cst.Arg):
            call = parents.get(parent)
            if not isinstance(call, cst.Call):
                return self._end(state, UNKNOWN, node)
            return self._argument(node, parent, call, state, depth)
        if isinstance(parent, cst.Attribute) and parent.value is node:
            call = parents.get(parent)
            if isinstance(call, cst.Call) and call.func is parent:
                method = parent.attr.value
                if method == "sort":
                    return self._end(state, SORTED, call)
                if method == "index":
                    return self._end(state, HAZARD, call, "the positions .index() finds")
                if method == "pop" and not call.args:
                    return self._end(state, HAZARD, call, "which element .pop() takes")
                if method in SET_METHODS:
                    return self._from(call, state, depth + 1)
                if method in NEUTRAL_METHODS:
                    return self._end(state, SAFE, call)
                if method == "join":
                    return self._end(state, UNKNOWN, call)
            return self._end(state, UNKNOWN, node)
        if isinstance(parent, cst.Attribute):  # `x.join(node)`-like forms arrive through Arg
            return self._end(state, UNKNOWN, node)
        if isinstance(parent, cst.Subscript) and parent.value is node:
            if self.flow._is_store(parent) or isinstance(parents.get(parent), cst.Del):
                return self._end(state, SAFE, parent)
            return self._end(state, HAZARD, parent, INDEXING)
        if isinstance(parent, cst.ComparisonTarget):
            if isinstance(parent.operator, (cst.In, cst.NotIn)):
                return self._end(state, SAFE, parent)
            return self._end(state, UNKNOWN, node)
        if isinstance(parent, cst.Comparison):
            first = parent.comparisons[0].operator if parent.comparisons else None
            return self._end(state, SAFE if isinstance(first, (cst.Is, cst.IsNot)) else UNKNOWN, node)
        if isinstance(parent, cst.CompFor) and parent.iter is node:
            comp = next(a for a in index.ancestors(parent) if not isinstance(a, cst.CompFor))
            if isinstance(comp, (cst.SetComp, cst.DictComp)):
                return self._end(state, SAFE, comp)
            if isinstance(comp, (cst.ListComp, cst.GeneratorExp)):
                first_match = self._comp_first_match(comp)
                step = self._step(state, node, materialized=True)
                if first_match:
                    return self._end(step, HAZARD, comp, first_match)
                return self._from(comp, step, depth + 1)
            return self._end(state, UNKNOWN, node)
        if isinstance(parent, cst.For) and parent.iter is node:
            return self._loop(parent, self._step(state, node), depth)
        if isinstance(parent, (cst.Assign, cst.AnnAssign, cst.NamedExpr)) and parent.value is node:
            return self._assigned(parent, node, state, depth)
        if isinstance(parent, cst.AugAssign) and parent.target is node:
            return self._end(state, SAFE, node)  # `acc += more`: the accumulator itself
        if isinstance(parent, cst.AugAssign) and parent.value is node:
            return self._into(parent.target, parent, self._step(state, node, materialized=True), depth)
        if isinstance(parent, cst.BinaryOperation):
            if isinstance(parent.operator, (cst.BitOr, cst.BitAnd, cst.Subtract, cst.BitXor)):
                return self._from(parent, state, depth + 1)
            if isinstance(parent.operator, cst.Add):
                return self._from(parent, self._step(state, node, materialized=True), depth + 1)
            return self._end(state, UNKNOWN, node)
        if isinstance(parent, cst.StarredElement):
            container = parents.get(parent)
            if isinstance(container, (cst.List, cst.Tuple)):
                return self._from(container, self._step(state, node, materialized=True), depth + 1)
            if isinstance(container, cst.Set):
                return self._end(state, SAFE, container)
            return self._end(state, UNKNOWN, node)
        if isinstance(parent, cst.DictElement) and parent.value is node:
            key = string_value(parent.key)
            container = parents.get(parent)
            if key == "params" and isinstance(container, cst.Dict):
                return self._from(container, self._step(state, node), depth + 1)
            return self._end(state, UNKNOWN, node)
        if isinstance(parent, cst.Element):
            container = parents.get(parent)
            if isinstance(container, (cst.List, cst.Tuple)) and isinstance(node, cst.Dict):
                return self._from(container, state, depth + 1)  # a list of param groups
            return self._end(state, UNKNOWN, node)
        if isinstance(parent, cst.Expr):
            return self._end(state, SAFE, node)
        if isinstance(parent, (cst.If, cst.While, cst.Assert)) and getattr(parent, "test", None) is node:
            return self._end(state, SAFE, node)
        if isinstance(parent, (cst.BooleanOperation,)):
            return self._end(state, SAFE, node)
        if isinstance(parent, cst.UnaryOperation) and isinstance(parent.operator, cst.Not):
            return self._end(state, SAFE, node)
        if isinstance(parent, cst.IfExp):
            if parent.test is node:
                return self._end(state, SAFE, node)
            return self._from(parent, state, depth + 1)
        if isinstance(parent, cst.WithItem) and parent.item is node and parent.asname is not None:
            return self._into(parent.asname.name, parent, state, depth)
        return self._end(state, UNKNOWN, node)

    def _argument(self, node, arg_node: cst.Arg, call: cst.Call, state: Verdict, depth: int) -> Verdict:
        index = self.index
        qualname = index.resolve(call.func, call) if isinstance(call.func, (cst.Name, cst.Attribute)) else None
        if self.extra_sink is not None:
            sink = self.extra_sink(call, qualname, arg_node)
            if sink:
                return self._end(self._step(state, node), HAZARD, call, sink)
        if arg_node.star == "*":
            return self._end(state, UNKNOWN, node)
        if arg_node.keyword is not None and arg_node.keyword.value not in ("iterable",):
            return self._end(state, UNKNOWN, node)
        if qualname in SORTING_CALLS:
            return self._end(state, SORTED, call)
        if qualname in ORDER_FREE_CALLS:
            return self._end(state, SAFE, call)
        if qualname in MATERIALIZING_CALLS:
            return self._from(call, self._step(state, node, materialized=True), depth + 1)
        if qualname == "builtins.map" and call.args and call.args[0] is not arg_node:
            return self._from(call, self._step(state, node, materialized=True), depth + 1)
        if qualname == "builtins.zip" and self._parallel(call, arg_node, state):
            # Lists accumulated side by side in one loop pair up in any order.
            return self._from(call, self._step(state, node, materialized=True), depth + 1)
        if qualname == "builtins.enumerate" and self._counter_only(call):
            return self._loop(self.flow.parents[call], self._step(state, node), depth)
        if qualname in SELECTING_CALLS:
            if qualname == "builtins.next" and call.args and call.args[0] is not arg_node:
                return self._end(state, UNKNOWN, node)  # the default of next()
            return self._end(self._step(state, node), HAZARD, call, SELECTING_CALLS[qualname])
        if isinstance(call.func, cst.Attribute) and call.func.attr.value in ("extend", "append", "insert"):
            if call.func.attr.value == "insert" and call.args and call.args[0] is arg_node:
                return self._end(state, SAFE, call)
            return self._into(call.func.value, call, self._step(state, node, materialized=True), depth)
        method = method_name(call)
        if method in ("union", "intersection", "difference", "symmetric_difference"):
            return self._from(call, state, depth + 1)  # `a.union(node)`: still a set
        if method in ("update", "issubset", "issuperset", "isdisjoint"):
            return self._end(state, SAFE, call)
        return self._end(state, UNKNOWN, node)

    def _parallel(self, call: cst.Call, arg_node: cst.Arg, state: Verdict) -> bool:
        """Every other argument of zip() is a list appended to in the loop that built ours."""
        if state.loop is None:
            return False
        appended = set()
        for node in self._body_nodes(state.loop.body):
            if isinstance(node, cst.Call) and method_name(node) in ("append", "extend", "insert"):
                appended.add(dotted(node.func.value))
        others = [a for a in call.args if a is not arg_node]
        return bool(others) and all(a.keyword is None and not a.star and dotted(a.value) in appended for a in others)

    def _counter_only(self, call: cst.Call) -> bool:
        """`for i, x in enumerate(c):` where `i` only feeds log messages (or nothing)."""
        loop = self.flow.parents.get(call)
        if not (isinstance(loop, cst.For) and loop.iter is call and isinstance(loop.target, cst.Tuple)):
            return False
        first = loop.target.elements[0].value if loop.target.elements else None
        if not isinstance(first, cst.Name):
            return False
        for node in self._body_nodes(loop.body):
            if isinstance(node, cst.Name) and node.value == first.value and self.flow.is_load(node):
                if not self._in_log_call(node, loop):
                    return False
        return True

    def _in_log_call(self, node: cst.CSTNode, stop: cst.CSTNode) -> bool:
        for ancestor in self.index.ancestors(node):
            if ancestor is stop:
                return False
            if isinstance(ancestor, cst.Call):
                func = ancestor.func
                name = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else ""
                if name in LOG_CALLS:
                    return True
        return False

    def _assigned(self, statement, node, state: Verdict, depth: int) -> Verdict:
        targets = assign_targets(statement)
        verdicts = []
        for target in targets:
            verdicts.append(self._into(target, statement, state, depth))
        return combine(verdicts) if verdicts else self._end(state, UNKNOWN, node)

    def _into(self, target: cst.BaseExpression, statement: cst.CSTNode, state: Verdict, depth: int) -> Verdict:
        """The collection now lives in a variable: combine what happens at each of its uses."""
        attr = self_attribute(target)
        if isinstance(target, cst.Name):
            owner = self.flow.owner(statement)
            key = ("name", id(owner), target.value)
            if key in self._active:
                return self._end(state, SAFE, target)
            self._active.add(key)
            try:
                after = statement if not self._accumulating(statement) else None
                uses = self.flow.name_uses(target.value, owner, after)
                uses = [u for u in uses if not self._rebound_before(target.value, owner, statement, u)]
                return self._uses(uses, owner, state, depth, target)
            finally:
                self._active.discard(key)
        if attr is not None:
            klass = self.flow.enclosing_class(statement)
            if klass is None:
                return self._end(state, UNKNOWN, target)
            key = ("attr", id(klass), attr)
            if key in self._active:
                return self._end(state, SAFE, target)
            self._active.add(key)
            try:
                return self._uses(self.flow.self_attr_uses(klass, attr), klass, state, depth, target)
            finally:
                self._active.discard(key)
        return self._end(state, UNKNOWN, target)

    def _accumulating(self, statement: cst.CSTNode) -> bool:
        return isinstance(statement, (cst.Call, cst.AugAssign))

    def _rebound_before(self, name: str, owner, statement, use) -> bool:
        """Another plain assignment to `name` between the binding and this use."""
        start, end = self.flow.pos(statement), self.flow.pos(use)
        for other, value in self.flow.bindings(name, owner):
            if other is statement or not isinstance(other, (cst.Assign, cst.AnnAssign)):
                continue
            if start < self.flow.pos(other) < end and not self.flow.inside(use, other):
                return True
        return False

    def _uses(self, uses, scope, state: Verdict, depth: int, target) -> Verdict:
        if not uses:
            return self._end(state, UNKNOWN, target)
        verdicts = [self._from(use, state, depth + 1) for use in uses]
        if any(v.kind == HAZARD and v.sink == INDEXING for v in verdicts) and self._single_asserted(uses):
            verdicts = [v for v in verdicts if not (v.kind == HAZARD and v.sink == INDEXING)] or [Verdict(SAFE)]
        return combine(verdicts)

    def _single_asserted(self, uses) -> bool:
        """`len(x) == 1` (or != 1, > 1, ...) checked somewhere: a single, asserted result."""
        for use in uses:
            arg_node = self.flow.parents.get(use)
            call = self.flow.parents.get(arg_node)
            if not (isinstance(call, cst.Call) and self.index.resolve(call.func, call) == "builtins.len"):
                continue
            comparison = self.flow.parents.get(call)
            if isinstance(comparison, cst.Comparison) and any(int_value(t.comparator) == 1 for t in comparison.comparisons):
                return True
            if isinstance(comparison, cst.ComparisonTarget) and int_value(self.flow.parents[comparison].left) == 1:
                return True
        return False

    def _loop(self, loop: cst.For, state: Verdict, depth: int) -> Verdict:
        """`for x in <collection>:` — what the body does with the order."""
        first_match = self._loop_first_match(loop)
        if first_match:
            return self._end(state, HAZARD, loop.iter, first_match)
        verdicts = []
        for node in self._body_nodes(loop.body):
            if isinstance(node, (cst.Yield,)):
                return self._end(state, UNKNOWN, node)
            accumulated = replace(self._step(state, loop.iter, materialized=True), loop=loop)
            if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
                if node.func.attr.value in ("append", "extend", "insert") and self._outer_target(node.func.value, loop):
                    verdicts.append(self._into(node.func.value, node, accumulated, depth + 1))
            elif isinstance(node, cst.AugAssign) and isinstance(node.operator, cst.AddAssign):
                if self._outer_target(node.target, loop) and isinstance(node.value, (cst.List, cst.ListComp, cst.Tuple)):
                    verdicts.append(self._into(node.target, node, accumulated, depth + 1))
            elif isinstance(node, cst.Assign) and self._counter_index(node, loop):
                return self._end(state, HAZARD, node, "an index map built in iteration order")
        if not verdicts:
            return self._end(state, SAFE, loop)
        return combine(verdicts)

    def _body_nodes(self, body: cst.CSTNode) -> list[cst.CSTNode]:
        """Nodes of a loop body in source order, nested functions and classes left out."""
        return list(subtree(body, skip=(cst.FunctionDef, cst.ClassDef, cst.Lambda)))[1:]

    def _outer_target(self, target: cst.BaseExpression, loop: cst.For) -> bool:
        return isinstance(target, cst.Name) or self_attribute(target) is not None

    def _loop_variables(self, loop: cst.For | cst.CompFor) -> set[str]:
        names = set()
        stack = [loop.target]
        while stack:
            node = stack.pop()
            if isinstance(node, cst.Name):
                names.add(node.value)
            elif isinstance(node, (cst.Tuple, cst.List)):
                stack.extend(e.value for e in node.elements)
        return names

    def _loop_first_match(self, loop: cst.For) -> str | None:
        """`for x in c: ... return x` or `... y = x; break`: the first match in an unstable order."""
        variables = self._loop_variables(loop)
        for node in self._body_nodes(loop.body):
            if isinstance(node, cst.Return) and node.value is not None and _mentions(node.value, variables):
                if self._innermost_loop(node) is loop:
                    return "which entry the loop returns first"
            if isinstance(node, cst.Break) and self._innermost_loop(node) is loop:
                block = self.flow.parents.get(self.flow.parents.get(node))
                siblings = getattr(block, "body", ())
                for statement in siblings:
                    for small in getattr(statement, "body", ()) if isinstance(statement, cst.SimpleStatementLine) else ():
                        if isinstance(small, cst.Assign) and _mentions(small.value, variables):
                            return "which entry the loop keeps before it breaks"
        return None

    def _comp_first_match(self, comp) -> str | None:
        parent = self.flow.parents.get(comp)
        if isinstance(comp, cst.GeneratorExp) and isinstance(parent, cst.Arg):
            call = self.flow.parents.get(parent)
            if isinstance(call, cst.Call) and self.index.resolve(call.func, call) == "builtins.next" and call.args[0] is parent:
                return SELECTING_CALLS["builtins.next"]
        return None

    def _innermost_loop(self, node) -> cst.CSTNode | None:
        for ancestor in self.index.ancestors(node):
            if isinstance(ancestor, (cst.For, cst.While)):
                return ancestor
            if isinstance(ancestor, (cst.FunctionDef, cst.Lambda)):
                return None
        return None

    def _counter_index(self, statement: cst.Assign, loop: cst.For) -> bool:
        """`d[x] = len(d)` or `d[x] = i` with `i += 1` in the loop: indices in iteration order."""
        for target in statement.targets:
            sub = target.target
            if not isinstance(sub, cst.Subscript):
                continue
            value = statement.value
            if isinstance(value, cst.Call) and self.index.resolve(value.func, value) == "builtins.len" and value.args:
                if dotted(value.args[0].value) == dotted(sub.value) and dotted(sub.value):
                    return True
            if isinstance(value, cst.Name):
                for node in self._body_nodes(loop.body):
                    if isinstance(node, cst.AugAssign) and isinstance(node.target, cst.Name) and node.target.value == value.value:
                        return True
        return False


def subtree(node: cst.CSTNode, skip: tuple[type, ...] = ()):
    """`node` and its descendants in source order, not entering nested `skip` nodes."""
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        if current is not node and isinstance(current, skip):
            continue
        stack.extend(reversed(current.children))


def _mentions(expr: cst.CSTNode, names: set[str]) -> bool:
    if isinstance(expr, cst.Name):
        return expr.value in names
    return any(_mentions(child, names) for child in expr.children)


# -- what a collection holds (for hash order) ------------------------------------------------
STR, PARAM = "str", "param"  # hash-randomized strings; parameters/modules (hashed by identity)
MODULE_ITERATORS = frozenset(
    "parameters named_parameters modules named_modules children named_children buffers named_buffers".split()
)
_STR_METHODS = frozenset(
    "lower upper strip lstrip rstrip replace format title casefold capitalize removeprefix removesuffix "
    "zfill ljust rjust center join decode swapcase expandtabs format_map".split()
)
_SPLITTING = frozenset("split rsplit splitlines partition rpartition readlines".split())
_STR_PATH_FUNCS = frozenset(
    "os.path.basename os.path.dirname os.path.join os.path.abspath os.path.normpath os.path.relpath "
    "os.path.expanduser os.path.realpath builtins.str builtins.repr".split()
)
_STR_ITERABLES = frozenset({"builtins.open", "os.listdir", "glob.glob", "glob.iglob", "io.open", "codecs.open"})
_PASSING = frozenset(
    "builtins.sorted builtins.list builtins.tuple builtins.set builtins.frozenset builtins.reversed "
    "itertools.chain builtins.iter".split()
)
_COUNTERS = frozenset({"collections.Counter", "typing.Counter"})
_CSV_READERS = frozenset({"csv.reader", "csv.DictReader"})
_STR_ANNOTATIONS = frozenset({"str", "builtins.str"})
_CONTAINER_ANNOTATIONS = frozenset(
    "list List set Set frozenset FrozenSet Sequence Iterable Collection tuple Tuple Iterator".split()
)
SET_CALLS = frozenset({"builtins.set", "builtins.frozenset"})
SET_OPERATORS = (cst.BitOr, cst.BitAnd, cst.Subtract, cst.BitXor)
_SET_OPERATOR_TYPES = frozenset(SET_OPERATORS)  # is_set of a BinaryOperation needs one of these


class Elements:
    """The kind of elements a collection holds, from local evidence: STR, PARAM or None."""

    def __init__(self, index: ModuleIndex) -> None:
        self.index = index
        self.flow = flow(index)
        self._active: set[int] = set()

    def _guard(self, node, compute):
        if id(node) in self._active or len(self._active) > 24:
            return None
        self._active.add(id(node))
        try:
            return compute()
        finally:
            self._active.discard(id(node))

    def _q(self, call: cst.Call) -> str | None:
        return self.index.resolve(call.func, call) if isinstance(call.func, (cst.Name, cst.Attribute)) else None

    # -- sets ---------------------------------------------------------------------------------
    def is_set(self, expr: cst.BaseExpression) -> bool:
        if isinstance(expr, (cst.Set, cst.SetComp)):
            return True
        if isinstance(expr, cst.Call):
            if self._q(expr) in SET_CALLS:
                return True
            method = method_name(expr)
            return bool(method in SET_METHODS and self.is_set(expr.func.value))
        if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, SET_OPERATORS):
            return self._guard(expr, lambda: self.is_set(expr.left) or self.is_set(expr.right)) or False
        if isinstance(expr, cst.Name):
            value = self.flow.reaching_value(expr)
            return value is not None and (self._guard(expr, lambda: self.is_set(value)) or False)
        return False

    def of_set(self, expr: cst.BaseExpression) -> str | None:
        """What a set-valued expression holds, including what `.add`/`.update` put in later."""
        return self._guard(expr, lambda: self._of_set(expr))

    def _of_set(self, expr) -> str | None:
        kinds: list[str | None] = []
        if isinstance(expr, cst.Set):
            kinds = [self.element(e.value) for e in expr.elements]
        elif isinstance(expr, cst.SetComp):
            kinds = [self.element(expr.elt)]
        elif isinstance(expr, cst.Call):
            method = method_name(expr)
            if method in SET_METHODS:
                kinds = [self.of_set(expr.func.value)] + [self.iterable(a.value) for a in expr.args]
            else:
                kinds = [self.iterable(a.value) for a in expr.args if not a.keyword]
                kinds += self._later_additions(expr)
        elif isinstance(expr, cst.BinaryOperation):
            kinds = [self.of_set(expr.left) if self.is_set(expr.left) else self.iterable(expr.left),
                     self.of_set(expr.right) if self.is_set(expr.right) else self.iterable(expr.right)]
        elif isinstance(expr, cst.Name):
            value = self.flow.reaching_value(expr)
            kinds = [self.of_set(value)] if value is not None else []
        return combine_kinds(kinds)

    def _later_additions(self, expr: cst.CSTNode, keys: bool = False) -> list[str | None]:
        """`s = set()` then `s.add(x)` / `s.update(xs)` / `s |= xs` (`.append`/`.extend` for a list)
        in the same function; with `keys`, also `counts[x] += 1` (a Counter's keys)."""
        parent = self.flow.parents.get(expr)
        targets = assign_targets(parent) if isinstance(parent, (cst.Assign, cst.AnnAssign)) else []
        kinds: list[str | None] = []
        for target in targets:
            if isinstance(target, cst.Name):
                uses = self.flow.name_uses(target.value, self.flow.owner(parent))
            elif self_attribute(target) is not None and self.flow.enclosing_class(parent) is not None:
                uses = self.flow.self_attr_uses(self.flow.enclosing_class(parent), self_attribute(target))
            else:
                continue
            for use in uses:
                holder = self.flow.parents.get(use)
                call = self.flow.parents.get(holder)
                if isinstance(holder, cst.Attribute) and isinstance(call, cst.Call) and call.func is holder and call.args:
                    if holder.attr.value in ("add", "append"):
                        kinds.append(self.element(call.args[0].value))
                    elif holder.attr.value in ("update", "extend"):
                        kinds.extend(self.iterable(a.value) for a in call.args if not a.keyword)
                elif isinstance(holder, cst.Subscript) and keys and holder.value is use and _is_key_store(self.flow, holder):
                    kinds.append(self.element(holder.slice[0].slice.value))  # `counts[word] += 1`
                elif isinstance(holder, cst.AugAssign) and holder.target is use:
                    kinds.append(self.iterable(holder.value))
        return kinds

    # -- iterables and their elements ---------------------------------------------------------
    def iterable(self, expr: cst.BaseExpression | None) -> str | None:
        """What iterating `expr` yields."""
        if expr is None:
            return None
        return self._guard(expr, lambda: self._iterable(expr))

    def _iterable(self, expr) -> str | None:
        if isinstance(expr, (cst.SimpleString, cst.FormattedString, cst.ConcatenatedString)):
            return STR
        if isinstance(expr, (cst.List, cst.Tuple, cst.Set)):
            kinds = [self.element(e.value) for e in expr.elements if isinstance(e, cst.Element)]
            if isinstance(expr, cst.List):
                kinds += self._later_additions(expr)  # `labels = []` then `labels.append(row[1])`
            return combine_kinds(kinds)
        if isinstance(expr, (cst.ListComp, cst.GeneratorExp, cst.SetComp)):
            return self.element(expr.elt)
        if isinstance(expr, cst.Call):
            method = method_name(expr)
            if method in MODULE_ITERATORS:
                return PARAM
            if method in _SPLITTING:
                return STR
            if method == "keys" and not expr.args:  # a Counter's (or dict's) keys
                return self.iterable(expr.func.value)
            qualname = self._q(expr)
            if qualname in _STR_ITERABLES:
                return STR
            if qualname in _COUNTERS:  # iterating a Counter yields what it counted
                kinds = [self.iterable(a.value) for a in expr.args[:1] if not a.keyword]
                return combine_kinds(kinds + self._later_additions(expr, keys=True))
            if qualname == "builtins.next" and expr.args and self._csv_rows(expr.args[0].value):
                return STR  # a csv header row
            if qualname in _PASSING:
                return combine_kinds([self.iterable(a.value) for a in expr.args if not a.keyword])
            if qualname == "builtins.filter" and len(expr.args) == 2:
                return self.iterable(expr.args[1].value)
            if _str_dtype(self.index, expr):
                return STR
            if self.is_set(expr):
                return self.of_set(expr)
            return None
        if isinstance(expr, cst.Subscript):
            return self.iterable(expr.value) if not _str_dtype_name(self, expr.value) else STR
        if isinstance(expr, cst.BinaryOperation):
            if isinstance(expr.operator, cst.Add) or isinstance(expr.operator, SET_OPERATORS):
                return combine_kinds([self.iterable(expr.left), self.iterable(expr.right)])
            return None
        if isinstance(expr, cst.Name):
            param = self.flow.parameter(expr)
            if param is not None:
                return _annotation_elements(self.index, param) or self._from_callers(param)
            loop = self._loop_binding(expr)
            if loop is not None:
                if isinstance(loop.target, cst.Name) and self._csv_rows(loop.iter):
                    return STR  # a csv row: its cells (or a DictReader row's keys)
                return self._loop_element(expr, loop)
            value = self.flow.reaching_value(expr)
            if value is None:
                return self._unpacked(expr, as_element=False)
            return self.iterable(value)
        return None

    def _csv_rows(self, expr: cst.BaseExpression, depth: int = 0) -> bool:
        """Whether iterating `expr` yields csv rows (lists or dicts of strings)."""
        if depth > 6:
            return False
        if isinstance(expr, cst.Call):
            qualname = self._q(expr)
            if qualname in _CSV_READERS:
                return True
            if qualname in _PASSING and expr.args and not expr.args[0].keyword:
                return self._csv_rows(expr.args[0].value, depth + 1)
            return False
        if isinstance(expr, cst.Name):
            value = self.flow.reaching_value(expr)
            return value is not None and self._csv_rows(value, depth + 1)
        return False

    def _csv_row(self, expr: cst.BaseExpression) -> bool:
        """Whether `expr` is one csv row: a loop variable over a reader, or `next(reader)`."""
        if isinstance(expr, cst.Call):
            return self._q(expr) == "builtins.next" and bool(expr.args) and self._csv_rows(expr.args[0].value)
        if isinstance(expr, cst.Name):
            loop = self._loop_binding(expr)
            if loop is not None:
                return isinstance(loop.target, cst.Name) and self._csv_rows(loop.iter)
            value = self.flow.reaching_value(expr)
            return value is not None and isinstance(value, cst.Call) and self._csv_row(value)
        return False

    def _unpacked(self, name: cst.Name, as_element: bool) -> str | None:
        """`a, b = line.split(",")`: what `name` holds when the nearest binding before it unpacks
        a value; a display unpacks position by position, anything else yields its elements."""
        here = self.flow.pos(name)
        best = None
        for statement, _ in self.flow.bindings(name.value, self.flow.owner(name)):
            if self.flow.pos(statement) < here and not self.flow.inside(name, statement):
                best = statement
        if not isinstance(best, cst.Assign) or len(best.targets) != 1:
            return None
        target = best.targets[0].target
        if not isinstance(target, (cst.Tuple, cst.List)):
            return None
        names = [e.value for e in target.elements]
        position = next((i for i, n in enumerate(names) if isinstance(n, cst.Name) and n.value == name.value), None)
        if position is None or any(isinstance(e, cst.StarredElement) for e in target.elements):
            return None
        value = best.value
        if isinstance(value, (cst.Tuple, cst.List)):
            elements = value.elements
            if len(elements) != len(names) or any(isinstance(e, cst.StarredElement) for e in elements):
                return None
            return self.element(elements[position].value) if as_element else self.iterable(elements[position].value)
        return self.iterable(value) if as_element else None

    def _from_callers(self, param: cst.Param) -> str | None:
        """A module-level function's parameter: what every call of it in this module passes."""
        function = self.flow.parents.get(self.flow.parents.get(param))
        if not isinstance(function, cst.FunctionDef) or self.flow.owner(function) is not self.index.module:
            return None
        if self.flow.enclosing_class(function) is not None:
            return None
        params = function.params
        if param not in params.params:
            return None
        position = list(params.params).index(param)
        kinds = []
        for site in self.index.calls_to("@." + function.name.value):
            passed = arg(site.node, position, param.name.value)
            if passed is None or any(a.star for a in site.node.args):
                return None
            kinds.append(self.iterable(passed))
        if kinds and all(k == kinds[0] for k in kinds):
            return kinds[0]
        return None

    def element(self, expr: cst.BaseExpression) -> str | None:
        """What kind of value `expr` is, as an element of a collection."""
        return self._guard(expr, lambda: self._element(expr))

    def _element(self, expr) -> str | None:
        if isinstance(expr, (cst.SimpleString, cst.FormattedString, cst.ConcatenatedString)):
            return STR
        if isinstance(expr, cst.Tuple):
            return combine_kinds([self.element(e.value) for e in expr.elements])
        if isinstance(expr, cst.Call):
            method = method_name(expr)
            if method in _STR_METHODS:
                return STR
            if self._q(expr) in _STR_PATH_FUNCS:
                return STR
            return None
        if isinstance(expr, cst.Subscript):
            inner = expr.value
            splits = isinstance(inner, cst.Call) and (
                method_name(inner) in _SPLITTING or self._q(inner) in ("os.path.splitext", "os.path.split")
            )
            if splits:
                return STR
            if _str_dtype_name(self, inner):
                return STR
            if self._csv_row(inner):
                return STR  # `row[1]`, `row["label"]`
            return None
        if isinstance(expr, cst.Name):
            param = self.flow.parameter(expr)
            if param is not None:
                annotation = param.annotation.annotation if param.annotation is not None else None
                return STR if annotation is not None and self.index.resolve(annotation, param) in ("builtins.str",) else None
            loop = self._loop_binding(expr)
            if loop is not None:
                return self._loop_element(expr, loop)
            value = self.flow.reaching_value(expr)
            if value is None:
                return self._unpacked(expr, as_element=True)
            return self.element(value)
        return None

    def _loop_binding(self, name: cst.Name) -> cst.For | cst.CompFor | None:
        """The `for` (statement or comprehension) that binds `name` where it is read."""
        for ancestor in self.index.ancestors(name):
            if isinstance(ancestor, (cst.ListComp, cst.SetComp, cst.GeneratorExp, cst.DictComp)):
                comp_for = ancestor.for_in
                while comp_for is not None:
                    if _binds(comp_for.target, name.value):
                        return comp_for
                    comp_for = comp_for.inner_for_in
            if isinstance(ancestor, cst.For) and _binds(ancestor.target, name.value):
                return ancestor
            if isinstance(ancestor, (cst.FunctionDef, cst.Lambda)):
                return None
        return None

    def _loop_element(self, name: cst.Name, loop) -> str | None:
        target = loop.target
        if isinstance(target, cst.Name):
            return self.iterable(loop.iter)
        if isinstance(target, cst.Tuple):
            position = next(
                (i for i, e in enumerate(target.elements) if isinstance(e.value, cst.Name) and e.value.value == name.value), None
            )
            source = loop.iter
            if position is None or not isinstance(source, cst.Call):
                return None
            method = method_name(source)
            if method in MODULE_ITERATORS and method.startswith("named_"):
                return STR if position == 0 else PARAM
            if method in ("most_common", "items") and position == 0 and len(target.elements) == 2:
                return self.iterable(source.func.value)  # `for word, n in counts.most_common()`
            qualname = self._q(source)
            if qualname == "builtins.enumerate" and position == 1 and source.args:
                return self.iterable(source.args[0].value)
            if qualname == "builtins.zip" and position < len(source.args):
                return self.iterable(source.args[position].value)
        return None


def _is_key_store(flow, subscript: cst.Subscript) -> bool:
    """`d[key] = ...` or `d[key] += ...`: a key put into a mapping (one plain index)."""
    parent = flow.parents.get(subscript)
    stored = isinstance(parent, cst.AssignTarget) or (isinstance(parent, cst.AugAssign) and parent.target is subscript)
    return stored and len(subscript.slice) == 1 and isinstance(subscript.slice[0].slice, cst.Index)


def combine_kinds(kinds) -> str | None:
    kinds = [k for k in kinds if k]
    if PARAM in kinds:
        return PARAM
    return STR if STR in kinds else None


def _binds(target: cst.BaseExpression, name: str) -> bool:
    if isinstance(target, cst.Name):
        return target.value == name
    if isinstance(target, (cst.Tuple, cst.List)):
        return any(_binds(e.value, name) for e in target.elements)
    return False


def _str_dtype(index: ModuleIndex, call: cst.Call) -> bool:
    """`np.genfromtxt(..., dtype=str)`, `np.array(x, dtype="U10")`: an array of strings."""
    dtype = arg(call, None, "dtype")
    if dtype is None:
        return False
    text = string_value(dtype)
    if text is not None:
        return text.lstrip("<>=|").startswith(("U", "str"))
    if isinstance(dtype, cst.Call) and dtype.args:
        return _str_dtype_value(index, dtype.args[0].value)
    return _str_dtype_value(index, dtype)


def _str_dtype_value(index: ModuleIndex, expr: cst.BaseExpression) -> bool:
    if isinstance(expr, (cst.Name, cst.Attribute)):
        return index.resolve(expr, expr) in ("builtins.str", "numpy.str_", "numpy.unicode_")
    return False


def _str_dtype_name(elements: Elements, expr: cst.BaseExpression) -> bool:
    if isinstance(expr, cst.Call):
        return _str_dtype(elements.index, expr)
    if isinstance(expr, cst.Subscript):
        return _str_dtype_name(elements, expr.value)
    if isinstance(expr, cst.Name):
        value = elements.flow.reaching_value(expr)
        return value is not None and _str_dtype_name(elements, value)
    return False


def _annotation_elements(index: ModuleIndex, param: cst.Param) -> str | None:
    """`names: list[str]` -> STR; `text: str` -> STR (its characters)."""
    if param.annotation is None:
        return None
    annotation = param.annotation.annotation
    if isinstance(annotation, cst.Name) and annotation.value == "str":
        return STR
    if isinstance(annotation, cst.Subscript):
        base = dotted(annotation.value) or ""
        if base.rsplit(".", 1)[-1] in _CONTAINER_ANNOTATIONS and annotation.slice:
            inner = annotation.slice[0].slice
            if isinstance(inner, cst.Index) and isinstance(inner.value, cst.Name) and inner.value.value == "str":
                return STR
    return None


# -- sets whose order is used (TRP602, TRP603) -------------------------------------------------
_SET_PRESERVING_METHODS = frozenset({"union", "intersection", "difference", "symmetric_difference", "copy"})


def set_sources(index: ModuleIndex, elements: Elements):
    """Set-valued expressions that are not part of a bigger set expression, in source order."""
    data = flow(index)
    for node in index.nodes_of(cst.Set, cst.SetComp, cst.Call, cst.BinaryOperation):
        kind = type(node)
        # A call's site holds `index.resolve(node.func, node)`, resolved once when indexed.
        if kind is cst.Call and index.call_site(node).qualname not in ("builtins.set", "builtins.frozenset"):
            if not (method_name(node) in _SET_PRESERVING_METHODS and elements.is_set(node)):
                continue
        if kind is cst.BinaryOperation and (type(node.operator) not in _SET_OPERATOR_TYPES or not elements.is_set(node)):
            continue
        if _inside_bigger_set(index, data, elements, node):
            continue
        yield node


def _inside_bigger_set(index, data, elements: Elements, node) -> bool:
    parent = data.parents.get(node)
    if isinstance(parent, cst.BinaryOperation) and elements.is_set(parent):
        return True
    if isinstance(parent, cst.Arg):
        call = data.parents.get(parent)
        if isinstance(call, cst.Call) and index.resolve(call.func, call) in ("builtins.set", "builtins.frozenset"):
            return True
        if isinstance(call, cst.Call) and method_name(call) in _SET_PRESERVING_METHODS and elements.is_set(call):
            return True
    if isinstance(parent, cst.Attribute) and parent.value is node:
        call = data.parents.get(parent)
        if isinstance(call, cst.Call) and call.func is parent and parent.attr.value in _SET_PRESERVING_METHODS:
            return True
    return False


def ordered(verdict: Verdict) -> bool:
    """The set's order is used: an order-sensitive sink, or copied into a list that goes
    somewhere we cannot follow (its order is then the set's hash order)."""
    return verdict.kind == HAZARD or (verdict.kind == UNKNOWN and verdict.materialized)


def sink_text(verdict: Verdict) -> str:
    return verdict.sink or "the order of a list built from it"


def ordered_sets(index: ModuleIndex, elements: Elements, order: OrderFlow, kind, reported: set[int]):
    """(where to report, verdict) for each set holding `kind` whose iteration order is used,
    once per reporting node (TRP602 for strings, TRP603 for parameters)."""
    for node in set_sources(index, elements):
        if elements.of_set(node) != kind:
            continue
        verdict = order.of(node)
        if not ordered(verdict):
            continue
        at = verdict.entry if verdict.entry is not None else node
        if id(at) not in reported:
            reported.add(id(at))
            yield at, verdict

