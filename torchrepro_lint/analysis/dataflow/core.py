"""The Flow of one module, computed lazily from its index.

`flow(index)` returns the module's `Flow` (cached on the index): source order of nodes, the
function that owns a node, the uses of a local name or of `self.<attr>` across a class, the
bindings of a name and the value that reaches it; `named(index, name)`, the loads of `name`
and of `<expr>.name` together. The other modules of this package build their views on it.
"""

from __future__ import annotations

from functools import cached_property

import libcst as cst

from torchrepro_lint.analysis.module_index import ModuleIndex

Owner = cst.CSTNode  # a FunctionDef, a Lambda, or the Module: the scope a local name lives in


def flow(index: ModuleIndex) -> Flow:
    """The module's Flow, built once per index (and kept on it)."""
    found = index.derived.get("flow")
    if found is None:
        found = index.derived["flow"] = Flow(index)
    return found


def named(index: ModuleIndex, name: str) -> list[cst.CSTNode]:
    """The Name nodes `name` and the Attribute nodes `<expr>.name` of the module, together in
    source order."""
    fl = flow(index)
    names, attributes = fl.names_called(name), fl.attribute_names.get(name, ())
    if not attributes or not names:
        return list(names or attributes)
    return sorted([*names, *attributes], key=fl.pos)


_NO_NAMES: list = []
_STATEMENT_KINDS: dict[type, bool] = {}


def _is_statement(node: cst.CSTNode) -> bool:
    """isinstance(node, (BaseSmallStatement, BaseCompoundStatement)), cached per class."""
    kind = type(node)
    found = _STATEMENT_KINDS.get(kind)
    if found is None:
        found = _STATEMENT_KINDS[kind] = issubclass(kind, (cst.BaseSmallStatement, cst.BaseCompoundStatement))
    return found


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
        order, skipping those in another branch of an `if` than the name: `if torch.is_tensor(a):
        a = a.index_select(...)` / `else: a.take(...)`); falls back to the module-level binding.
        None if it is bound by anything else (a parameter, a loop, an augmented assignment,
        unpacking)."""
        owner = self.owner(name)
        here = self.pos(name)
        best = None
        for statement, value in self.bindings(name.value, owner):
            if self.pos(statement) < here and not self.inside(name, statement) and not self.other_branch(statement, name):
                best = (statement, value)
        if best is not None:
            return best[1]
        if owner is not self.index.module and not self.bindings(name.value, owner):
            for statement, value in self.bindings(name.value, self.index.module):
                best = (statement, value)
            return best[1] if best is not None else None
        return None

    def other_branch(self, statement: cst.CSTNode, use: cst.CSTNode) -> bool:
        """`statement` and `use` lie in different branches of one `if` (its body, and its
        `elif`/`else`): the statement never runs on the way to the use."""
        child = statement
        for ancestor in self.index.ancestors(statement):
            if isinstance(ancestor, (cst.FunctionDef, cst.Lambda)):
                return False
            if isinstance(ancestor, cst.If) and self.inside(use, ancestor):
                if child is not ancestor.body and child is not ancestor.orelse:
                    return False  # bound in the test (`if (m := ...)`), which runs first
                other = ancestor.orelse if child is ancestor.body else ancestor.body
                return other is not None and self.inside(use, other)
            child = ancestor
        return False

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
