"""The one walk over a parsed file: parents, scopes, definitions and every call, resolved.

Rules query this index instead of walking the tree again, so a file costs one parse and one
traversal however many rules are enabled.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import libcst as cst

from torchrepro_lint.analysis.names import LOCAL, SHADOWED, NameResolver, Scope, dotted
from torchrepro_lint.source import SourceFile

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


class ModuleIndex:
    """Everything per-file rules and the project model need to know about one module."""

    def __init__(self, source: SourceFile, package: str | None = None) -> None:
        self.source = source
        self.module = source.module
        self.package = package  # dotted package containing this module, for relative imports
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
        _IndexBuilder(self).walk(self.module)
        for site in self.calls:
            site.qualname = self.resolver.resolve(site.node.func, site.scope)
            self.calls_by_statement.setdefault(site.statement, []).append(site)

    # -- queries -------------------------------------------------------------------------
    def calls_to(self, *qualnames: str) -> list[CallSite]:
        if self._by_qualname is None:
            self._by_qualname = {}
            for site in self.calls:
                if site.qualname:
                    self._by_qualname.setdefault(site.qualname, []).append(site)
        return [site for q in qualnames for site in self._by_qualname.get(q, ())]

    def enclosing_scope(self, node: cst.CSTNode) -> Scope:
        current = self.parents.get(node)
        while current is not None:
            scope = self.scope_of.get(current)
            if scope is not None:
                return scope
            current = self.parents.get(current)
        return self.scope

    def resolve(self, expr: cst.BaseExpression, at: cst.CSTNode | None = None) -> str | None:
        """Qualified name of `expr` as seen from where `at` (default: `expr`) stands."""
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
        current = self.parents.get(node)
        while current is not None:
            yield current
            current = self.parents.get(current)

    def enclosing(self, node: cst.CSTNode, *types: type) -> cst.CSTNode | None:
        for ancestor in self.ancestors(node):
            if isinstance(ancestor, types):
                return ancestor
        return None

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


class _IndexBuilder:
    """Walks the tree through dataclass fields rather than LibCST's visitor machinery, which
    rebuilds every node's children and cost about 3x the parse here; trivia is skipped."""

    def __init__(self, index: ModuleIndex) -> None:
        self.index = index
        self.stack: list[cst.CSTNode] = []
        self.scopes: list[Scope] = [index.scope]
        self.statements: list[Statement] = []

    def walk(self, root: cst.CSTNode) -> None:
        # Iterative, so deeply nested code cannot hit the recursion limit: (node, leaving) pairs.
        pending: list[tuple[cst.CSTNode, bool]] = [(root, False)]
        while pending:
            node, leaving = pending.pop()
            if leaving:
                self.on_leave(node)
                continue
            self.on_visit(node)
            pending.append((node, True))
            children = []
            for name in _child_fields(type(node)):
                value = getattr(node, name)
                if isinstance(value, cst.CSTNode):
                    children.append(value)
                elif isinstance(value, (tuple, list)):
                    children.extend(v for v in value if isinstance(v, cst.CSTNode))
            pending.extend((child, False) for child in reversed(children))

    # Generic hooks keep parents and the statement stack; typed work happens in _enter.
    def on_visit(self, node: cst.CSTNode) -> bool:
        if self.stack:
            self.index.parents[node] = self.stack[-1]
        self.stack.append(node)
        if isinstance(node, (cst.BaseSmallStatement, cst.BaseCompoundStatement)):
            self.statements.append(node)
        self._enter(node)
        return True

    def on_leave(self, original_node: cst.CSTNode) -> None:
        node = original_node
        if isinstance(node, cst.Call):
            statement = self.statements[-1] if self.statements else None
            self.index.calls.append(CallSite(node, None, self.scopes[-1], statement))
        if node in self.index.scope_of:
            self.scopes.pop()
        if isinstance(node, (cst.BaseSmallStatement, cst.BaseCompoundStatement)):
            self.statements.pop()
        self.stack.pop()

    # -- bindings ------------------------------------------------------------------------
    def _enter(self, node: cst.CSTNode) -> None:
        scope = self.scopes[-1]
        if isinstance(node, cst.FunctionDef):
            path = _join(scope.qualpath, node.name.value)
            scope.bind(node.name.value, LOCAL + path)
            self.index.functions.setdefault(path, node)
            inner = self._push(node, "function", path)
            for param in _params(node.params):
                inner.bind(param, SHADOWED)
        elif isinstance(node, cst.ClassDef):
            path = _join(scope.qualpath, node.name.value)
            scope.bind(node.name.value, LOCAL + path)
            self.index.classes.setdefault(path, node)
            self._push(node, "class", path)
        elif isinstance(node, cst.Lambda):
            inner = self._push(node, "function", _join(scope.qualpath, "<lambda>"))
            for param in _params(node.params):
                inner.bind(param, SHADOWED)
        elif isinstance(node, cst.Import):
            for alias in node.names:
                name = dotted(alias.name) or ""
                if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                    scope.bind(alias.asname.name.value, name, is_import=True)
                else:
                    top = name.split(".")[0]
                    scope.bind(top, top, is_import=True)
                self.index.imports.append(ImportRecord(name, (), node, scope))
        elif isinstance(node, cst.ImportFrom):
            module = self.index.absolute_module(len(node.relative), dotted(node.module) if node.module else None)
            names: list[str] = []
            if not isinstance(node.names, cst.ImportStar):
                for alias in node.names:
                    name = dotted(alias.name) or ""
                    names.append(name)
                    local = name
                    if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                        local = alias.asname.name.value
                    scope.bind(local, f"{module}.{name}" if module else SHADOWED, is_import=True)
            self.index.imports.append(ImportRecord(module, tuple(names), node, scope))
        elif isinstance(node, cst.Assign):
            for target in node.targets:
                self._bind_target(target.target, node.value)
        elif isinstance(node, cst.AnnAssign) and node.value is not None:
            self._bind_target(node.target, node.value)
        elif isinstance(node, (cst.For, cst.CompFor)):
            self._bind_target(node.target, None)
        elif isinstance(node, cst.WithItem) and node.asname is not None:
            self._bind_target(node.asname.name, None)
        elif isinstance(node, cst.ExceptHandler) and node.name is not None:
            self._bind_target(node.name.name, None)
        elif isinstance(node, cst.NamedExpr):
            self._bind_target(node.target, None)

    def _push(self, node: cst.CSTNode, kind: str, path: str) -> Scope:
        scope = Scope(kind, self.scopes[-1], path)
        self.index.scope_of[node] = scope
        self.scopes.append(scope)
        return scope

    def _bind_target(self, target: cst.BaseExpression, value: cst.BaseExpression | None) -> None:
        scope = self.scopes[-1]
        if isinstance(target, cst.Name):
            # The value is kept: an alias (`npr = np.random`) is resolved lazily when asked, and
            # rules may look at what a variable was assigned (`device = "cuda" if ... else "cpu"`).
            scope.bind(target.value, value if value is not None else SHADOWED)
        elif isinstance(target, (cst.Tuple, cst.List)):
            for element in target.elements:
                self._bind_target(element.value, None)
        elif isinstance(target, cst.StarredElement):
            self._bind_target(target.value, None)


def _join(prefix: str, name: str) -> str:
    return f"{prefix}.{name}" if prefix else name


def _params(params: cst.Parameters) -> list[str]:
    names = [p.name.value for p in (*params.posonly_params, *params.params, *params.kwonly_params)]
    if isinstance(params.star_arg, cst.Param):
        names.append(params.star_arg.name.value)
    if params.star_kwarg is not None:
        names.append(params.star_kwarg.name.value)
    return names
