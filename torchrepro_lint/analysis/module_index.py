"""The one walk over a parsed file: parents, scopes, definitions and every call, resolved.

Rules query this index instead of walking the tree again, so a file costs one parse and one
traversal however many rules are enabled.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections import defaultdict
from dataclasses import dataclass

import libcst as cst

from torchrepro_lint.analysis.names import LOCAL, SHADOWED, NameResolver, Scope, dotted
from torchrepro_lint.analysis.walk_reuse import END, TakenTwice, Walk
from torchrepro_lint.parsing.source import SourceFile

Statement = cst.CSTNode  # a small statement (Expr, Assign, ...) or a compound statement


@dataclass(eq=False)
class CallSite:
    node: cst.Call
    qualname: str | None  # "torch.manual_seed", "@.set_seed", "utils.seed_all", or None
    scope: Scope
    statement: Statement | None


@dataclass(eq=False)
class ImportRecord:
    module: str  # absolute dotted module named by the statement ("" when unresolvable)
    names: tuple[str, ...]  # for `from m import a, b`: ("a", "b"); empty for `import m`
    node: cst.CSTNode
    scope: Scope


class _SameBindings:
    """Whether a scope, and every scope around it, binds the same names to the same values as
    the previous walk's scope it stands for (ModuleIndex.scope_origins); memoised per scope."""

    def __init__(self, origins: dict[int, tuple]) -> None:
        self.origins = origins
        self.memo: dict[int, bool] = {}

    def __call__(self, scope: Scope) -> bool:
        found = self.memo.get(id(scope))
        if found is None:
            found = self.memo[id(scope)] = self._same(scope)
        return found

    def _same(self, scope: Scope) -> bool:
        entry = self.origins.get(id(scope))
        if entry is None or entry[0] is not scope or entry[1] is None:
            return False
        old = entry[1]
        if scope.parent is None or old.parent is None:
            return scope.parent is old.parent and scope.bindings == old.bindings
        parent = self.origins.get(id(scope.parent))
        return parent is not None and parent[1] is old.parent and scope.bindings == old.bindings and self(scope.parent)


class ModuleIndex:
    """Everything per-file rules and the project model need to know about one module."""

    def __init__(self, source: SourceFile, package: str | None = None) -> None:
        self.source = source
        self.module = source.module
        self.package = package  # dotted package containing this module, for relative imports
        # The language server's edited buffers: the statements an edit did not touch are the
        # same objects as in the previous text's tree, and what the previous walk recorded of
        # them is taken again instead of walking them (walk_reuse.py).
        before = source.walk_before()
        if before is not None and before.package != package:
            before = None
        try:
            self._build(before)
        except TakenTwice:
            self._build(None)

    def _build(self, before: Walk | None) -> None:
        source, package = self.source, self.package
        self.scope = Scope("module", None, "")
        self.resolver = NameResolver(self.scope)
        self.parents: dict[cst.CSTNode, cst.CSTNode] = {}
        source.parents = self.parents  # spans find a node's statement through it
        self.calls: list[CallSite] = []
        self.calls_by_statement: dict[Statement, list[CallSite]] = {}
        self.scope_of: dict[cst.CSTNode, Scope] = {}
        self.functions: dict[str, cst.FunctionDef] = {}
        self.classes: dict[str, cst.ClassDef] = {}
        self.imports: list[ImportRecord] = []
        self._by_qualname: dict[str, list[CallSite]] | None = None
        # Private tables filled by the walk or on first use: nodes by exact class in source
        # order, memoised nearest ancestors per class tuple, each node's place in source order
        # and the site of each Call.
        self._positions: dict[int, int] | None = None
        self._by_type: dict[type, list[cst.CSTNode]] = defaultdict(list)  # (walk_reuse.take fills it per node)
        self._nearest: dict[tuple, tuple[dict[int, cst.CSTNode | None], dict[type, bool]]] = {}
        self._sites: dict[int, CallSite] | None = None
        self._selected: dict[frozenset, list[cst.CSTNode]] = {}
        # What other analyses compute from this index (dataflow.core's Flow, the op matches), kept
        # here so it dies with the index: a global cache keyed by index kept every tree alive.
        self.derived: dict[str, object] = {}
        # What statements taken from `before` brought (walk_reuse.py): the ranges of `calls`
        # they filled, with the qualnames they had, and id(scope) -> (scope, the scope of
        # `before` it stands for)
        self.taken_calls: list[tuple[int, int]] = []
        self.scope_origins: dict[int, tuple] = {}
        walk = self.walk = Walk(package) if source.keeps_walk else None
        _IndexBuilder(self, walk, before).walk(self.module)
        if walk is not None:
            walk.finish(self)
            source.keep_walk(walk)
        self._resolve_calls()

    def _resolve_calls(self) -> None:
        """Each call's qualname. A call taken from the previous walk keeps the one it had where
        every scope around it binds what its counterpart bound: a name resolves through those
        bindings alone (NameResolver), so the answer is the same. (Resolving every call of an
        edited buffer again was 1-2 ms of an edit.)"""
        kept = bytearray(len(self.calls))
        for start, end in self.taken_calls:
            kept[start:end] = b"\x01" * (end - start)
        same = _SameBindings(self.scope_origins)
        resolve = self.resolver.resolve
        by_statement = self.calls_by_statement
        for site, taken in zip(self.calls, kept):
            if not (taken and same(site.scope)):
                site.qualname = resolve(site.node.func, site.scope)
            by_statement.setdefault(site.statement, []).append(site)
        self.taken_calls, self.scope_origins = [], {}  # (they hold the previous walk's scopes)

    def forget_derived(self) -> None:
        """Drop what was computed from the index on first use (rebuilt on the next), keeping the
        walk's own tables. A Flow points back at its index: clearing also breaks that cycle, so
        a released tree is freed by reference counting, without waiting for a garbage
        collection (which `gc.freeze` may never do)."""
        self.derived.clear()
        self._by_qualname = self._positions = self._sites = None
        self._nearest.clear()
        self._selected.clear()

    # -- queries -------------------------------------------------------------------------
    def calls_to(self, *qualnames: str) -> list[CallSite]:
        if self._by_qualname is None:
            self._by_qualname = {}
            for site in self.calls:
                if site.qualname:
                    self._by_qualname.setdefault(site.qualname, []).append(site)
        return [site for q in qualnames for site in self._by_qualname.get(q, ())]

    def call_site(self, node: cst.Call) -> CallSite | None:
        """The CallSite of a Call node of this module (None for a node not in it)."""
        if self._sites is None:
            self._sites = {id(site.node): site for site in self.calls}
        return self._sites.get(id(node))

    def nodes_of(self, *types: type) -> list[cst.CSTNode]:
        """The nodes of `parents` (every node but the Module) whose class is exactly one of
        `types` (concrete LibCST classes such as `cst.Name`, `cst.Call`), in source order.
        Shared: do not modify the list."""
        if len(types) == 1:
            return self._by_type.get(types[0], _EMPTY)
        key = frozenset(types)
        found = self._selected.get(key)
        if found is None:
            if self._positions is None:
                found = [node for node in self.parents if type(node) in key]
            else:  # the same list, from the buckets
                positions = self._positions
                found = [node for kind in key for node in self._by_type.get(kind, _EMPTY)]
                found.sort(key=lambda node: positions[id(node)])
            self._selected[key] = found
        return found

    def positions(self) -> dict[int, int]:
        """id(node) -> the node's place in source order: the Module 0, then the keys of
        `parents` from 1 (built on first use). Shared: do not modify."""
        if self._positions is None:
            positions = dict(zip(map(id, self.parents), itertools.count(1)))
            positions.setdefault(id(self.module), 0)
            self._positions = positions
        return self._positions

    def enclosing_scope(self, node: cst.CSTNode) -> Scope:
        # The scope of the nearest function, class or lambda around the node (they, and only
        # they, are the keys of scope_of).
        owner = self.enclosing(node, *_SCOPE_TYPES)
        return self.scope if owner is None else self.scope_of[owner]

    def resolve(self, expr: cst.BaseExpression, at: cst.CSTNode | None = None) -> str | None:
        """Qualified name of `expr` as seen from where `at` (default: `expr`) stands."""
        if type(at) is cst.Call and at.func is expr:
            site = self.call_site(at)
            if site is not None:  # resolved when indexed, from the same scope
                return site.qualname
        return self.resolver.resolve(expr, self.enclosing_scope(at if at is not None else expr))

    def assigned_value(self, name: str, at: cst.CSTNode) -> cst.BaseExpression | None:
        """The expression last bound to `name` in the scope chain seen from `at`, if any."""
        scope: Scope | None = self.enclosing_scope(at)
        while scope is not None:
            value = scope.bindings.get(name)
            if value is not None:
                return value if isinstance(value, cst.BaseExpression) else None
            scope = scope.parent
        return None

    def ancestors(self, node: cst.CSTNode):
        parents = self.parents
        current = parents.get(node)
        while current is not None:
            yield current
            current = parents.get(current)

    def enclosing(self, node: cst.CSTNode, *types: type) -> cst.CSTNode | None:
        """The nearest ancestor that is an instance of one of `types` (memoised per tuple)."""
        tables = self._nearest.get(types)
        if tables is None:
            tables = self._nearest[types] = ({}, {})
        memo, matches = tables
        parents = self.parents
        key = id(node)
        found = memo.get(key, _MISSING)
        if found is not _MISSING:
            return found
        # Walk up to a node whose answer is known (or to the matching ancestor), then record
        # the answer for every node passed: they all share it.
        path = []
        current = node
        while True:
            parent = parents.get(current)
            if parent is None:
                found = None
                break
            path.append(key)
            kind = type(parent)
            match = matches.get(kind)
            if match is None:
                match = matches[kind] = issubclass(kind, types)
            if match:
                found = parent
                break
            current = parent
            key = id(current)
            known = memo.get(key, _MISSING)
            if known is not _MISSING:
                found = known
                break
        for key in path:  # only nodes of this tree (they have a parent): their ids are stable
            memo[key] = found
        return found

    def absolute_module(self, level: int, module: str | None) -> str:
        """Resolve `from ..a import b`'s module part; "" when it cannot be resolved."""
        if level == 0:
            return module or ""
        if self.package is None:
            return ""
        parts = self.package.split(".") if self.package else []
        if level - 1 > len(parts):
            return ""
        base = parts[: len(parts) - (level - 1)]
        if module:
            base.append(module)
        return ".".join(base)


_TRIVIA_PREFIXES = (
    "whitespace", "lpar", "rpar", "lbrace", "rbrace", "lbracket", "rbracket", "comma", "semicolon",
    "colon", "first_colon", "second_colon", "equal", "dot", "leading_lines", "lines_after_decorators",
    "header", "footer", "empty_lines", "newline", "indent", "trailing_whitespace", "default_indent",
    "default_newline", "encoding", "has_trailing_newline", "asynchronous", "star", "posonly_ind",
    "operator", "relative", "comment", "conversion", "separator", "trailing_comma",
)
_FIELDS: dict[type, tuple[str, ...]] = {}


def _child_fields(cls: type) -> tuple[str, ...]:
    """The fields of a node class that can hold code (not whitespace, brackets or commas)."""
    fields = _FIELDS.get(cls)
    if fields is None:
        fields = tuple(f.name for f in dataclasses.fields(cls) if not f.name.startswith(_TRIVIA_PREFIXES))
        _FIELDS[cls] = fields
    return fields


_MISSING = object()
_EMPTY: list = []
_SCOPE_TYPES = (cst.FunctionDef, cst.ClassDef, cst.Lambda)
_STATEMENT_TYPES = (cst.BaseSmallStatement, cst.BaseCompoundStatement)
_LEAVE = object()  # marks a Call's leave event on the walk's stack
_NODE, _SEQUENCE, _OTHER = 1, 2, 0
_VALUE_KIND: dict[type, int] = {}  # type of a field value -> _NODE / _SEQUENCE / _OTHER


def _value_kind(kind: type) -> int:
    found = _VALUE_KIND.get(kind)
    if found is None:
        if issubclass(kind, cst.CSTNode):
            found = _NODE
        elif issubclass(kind, (tuple, list)):
            found = _SEQUENCE
        else:
            found = _OTHER
        _VALUE_KIND[kind] = found
    return found


class _IndexBuilder:
    """Walks the tree through dataclass fields rather than LibCST's visitor machinery, which
    rebuilds every node's children and cost about 3x the parse here; trivia is skipped.

    Iterative (deeply nested code cannot hit the recursion limit). Each stack entry carries the
    node's parent, the scope it is read in and its nearest statement, so nothing is looked up
    again; typed work is dispatched on the node's exact class (LibCST's concrete node classes
    have no subclasses, and isinstance against their ABC bases is slow)."""

    def __init__(self, index: ModuleIndex, walk: Walk | None = None, before: Walk | None = None) -> None:
        self.index = index
        self.record = walk  # what this walk records of each statement, for the next text's
        self.before = before  # the previous text's record, whose statements are taken again

    def bind(self, scope: Scope, name: str, value: object, is_import: bool = False) -> None:
        scope.bind(name, value, is_import=is_import)
        if self.record is not None:
            self.record.binds.append((scope, name, value, is_import))

    def _handlers(self) -> dict:
        # Built per walk, not kept on the builder: bound methods held by the builder would make
        # it a reference cycle that keeps the index, and with it the whole tree, alive until a
        # garbage collection (the CLI runs with automatic collection off).
        return {
            cst.FunctionDef: self._function,
            cst.ClassDef: self._class,
            cst.Lambda: self._lambda,
            cst.Import: self._import,
            cst.ImportFrom: self._import_from,
            cst.Assign: self._assign,
            cst.AnnAssign: self._ann_assign,
            cst.For: self._loop,
            cst.CompFor: self._loop,
            cst.WithItem: self._with_item,
            cst.ExceptHandler: self._except_handler,
            cst.NamedExpr: self._named_expr,
        }

    def walk(self, root: cst.CSTNode) -> None:
        index = self.index
        parents = index.parents
        by_type = index._by_type
        calls = index.calls
        handlers = self._handlers()
        value_kind = _VALUE_KIND
        call_type = cst.Call
        record, before = self.record, self.before
        if before is not None:
            before.open()
        # Per class met in this walk: (code fields, binding handler, is a statement, its nodes,
        # is a statement of a block: the unit a record keeps).
        kinds: dict[type, tuple] = {}
        # (node, parent, scope, statement); (call, _LEAVE, scope, statement) records the call
        # once its arguments are done (calls are listed innermost first, as they run).
        pending: list[tuple] = [(root, None, index.scope, None)]
        pop = pending.pop
        push = pending.append
        while pending:
            node, parent, scope, statement = pop()
            if parent is _LEAVE:
                calls.append(CallSite(node, None, scope, statement))
                continue
            if parent is END:
                scope.end = record.lengths(index)  # (`scope` holds the statement's record here)
                continue
            kind = type(node)
            info = kinds.get(kind)
            if info is None:
                bucket = by_type.get(kind)
                if bucket is None:
                    bucket = by_type[kind] = []
                info = kinds[kind] = (
                    _child_fields(kind), handlers.get(kind), issubclass(kind, _STATEMENT_TYPES), bucket, issubclass(kind, cst.BaseStatement)
                )
            fields, handler, is_statement, bucket, is_unit = info
            if is_unit:
                if before is not None and before.take(node, parent, scope, index, record, pending):
                    continue
                if record is not None:
                    push((node, END, record.start(node, scope, index), None))
            if parent is not None:
                size = len(parents)
                parents[node] = parent
                if len(parents) != size:  # as in parents: a node met twice keeps its first place
                    bucket.append(node)
                    if record is not None:
                        record.keys.append(node)
                        record.values.append(parent)
            inner = scope
            if handler is not None:
                inner = handler(node, scope) or scope
            if kind is call_type:
                push((node, _LEAVE, scope, statement))
            below = node if is_statement else statement
            children = []
            for name in fields:
                value = getattr(node, name)
                what = value_kind.get(type(value))
                if what is None:
                    what = _value_kind(type(value))
                if what == _NODE:
                    children.append(value)
                elif what == _SEQUENCE:
                    for item in value:
                        item_kind = value_kind.get(type(item))
                        if item_kind is None:
                            item_kind = _value_kind(type(item))
                        if item_kind == _NODE:
                            children.append(item)
            for child in reversed(children):
                push((child, node, inner, below))

    # -- bindings (each handler gets the scope the node is read in; a new scope is returned) --
    def _function(self, node: cst.FunctionDef, scope: Scope) -> Scope:
        path = _join(scope.qualpath, node.name.value)
        self.bind(scope, node.name.value, LOCAL + path)
        self._define(self.index.functions, path, node)
        inner = self._push(node, scope, "function", path)
        for param in _params(node.params):
            self.bind(inner, param, SHADOWED)
        return inner

    def _class(self, node: cst.ClassDef, scope: Scope) -> Scope:
        path = _join(scope.qualpath, node.name.value)
        self.bind(scope, node.name.value, LOCAL + path)
        self._define(self.index.classes, path, node)
        return self._push(node, scope, "class", path)

    def _lambda(self, node: cst.Lambda, scope: Scope) -> Scope:
        inner = self._push(node, scope, "function", _join(scope.qualpath, "<lambda>"))
        for param in _params(node.params):
            self.bind(inner, param, SHADOWED)
        return inner

    def _import(self, node: cst.Import, scope: Scope) -> None:
        for alias in node.names:
            name = dotted(alias.name) or ""
            if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                self.bind(scope, alias.asname.name.value, name, True)
            else:
                top = name.split(".")[0]
                self.bind(scope, top, top, True)
            self.index.imports.append(ImportRecord(name, (), node, scope))

    def _import_from(self, node: cst.ImportFrom, scope: Scope) -> None:
        module = self.index.absolute_module(len(node.relative), dotted(node.module) if node.module else None)
        names: list[str] = []
        if not isinstance(node.names, cst.ImportStar):
            for alias in node.names:
                name = dotted(alias.name) or ""
                names.append(name)
                local = name
                if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                    local = alias.asname.name.value
                self.bind(scope, local, f"{module}.{name}" if module else SHADOWED, True)
        self.index.imports.append(ImportRecord(module, tuple(names), node, scope))

    def _assign(self, node: cst.Assign, scope: Scope) -> None:
        for target in node.targets:
            self._bind_target(scope, target.target, node.value)

    def _ann_assign(self, node: cst.AnnAssign, scope: Scope) -> None:
        if node.value is not None:
            self._bind_target(scope, node.target, node.value)

    def _loop(self, node: cst.For | cst.CompFor, scope: Scope) -> None:
        self._bind_target(scope, node.target, None)

    def _with_item(self, node: cst.WithItem, scope: Scope) -> None:
        if node.asname is not None:
            self._bind_target(scope, node.asname.name, None)

    def _except_handler(self, node: cst.ExceptHandler, scope: Scope) -> None:
        if node.name is not None:
            self._bind_target(scope, node.name.name, None)

    def _named_expr(self, node: cst.NamedExpr, scope: Scope) -> None:
        self._bind_target(scope, node.target, None)

    def _define(self, table: dict, path: str, node: cst.CSTNode) -> None:
        table.setdefault(path, node)  # the first definition of a path is the one kept
        if self.record is not None:
            self.record.definitions.append((table is self.index.classes, path, node))

    def _push(self, node: cst.CSTNode, outer: Scope, kind: str, path: str) -> Scope:
        scope = Scope(kind, outer, path)
        self.index.scope_of[node] = scope
        return scope

    def _bind_target(self, scope: Scope, target: cst.BaseExpression, value: cst.BaseExpression | None) -> None:
        if isinstance(target, cst.Name):
            # The value is kept: an alias (`npr = np.random`) is resolved lazily when asked, and
            # rules may look at what a variable was assigned (`device = "cuda" if ... else "cpu"`).
            self.bind(scope, target.value, value if value is not None else SHADOWED)
        elif isinstance(target, (cst.Tuple, cst.List)):
            for element in target.elements:
                self._bind_target(scope, element.value, None)
        elif isinstance(target, cst.StarredElement):
            self._bind_target(scope, target.value, None)


def _join(prefix: str, name: str) -> str:
    return f"{prefix}.{name}" if prefix else name


def _params(params: cst.Parameters) -> list[str]:
    names = [p.name.value for p in (*params.posonly_params, *params.params, *params.kwonly_params)]
    if isinstance(params.star_arg, cst.Param):
        names.append(params.star_arg.name.value)
    if params.star_kwarg is not None:
        names.append(params.star_kwarg.name.value)
    return names
