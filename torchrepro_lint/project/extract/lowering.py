"""Lower one module's CST into the program-model IR (see ir.py).

`Lowering` walks the module's top level, functions and classes: statements become IR statements
(branches, `try` blocks, assignments, imports, returns, raises), with the calls each one makes lowered by the methods
in calls.py. Nodes are referred to by index in `Lowering.nodes`, so findings can be located
later without keeping the IR tied to the tree.
"""

from __future__ import annotations

import libcst as cst

from torchrepro_lint.analysis.literals import MISSING, is_none, literal_value
from torchrepro_lint.analysis.module_index import ModuleIndex
from torchrepro_lint.analysis.names import LOCAL, dotted
from torchrepro_lint.analysis.syntax import evaluated_string, expression_code
from torchrepro_lint.project import ir
from torchrepro_lint.project.extract import attributes
from torchrepro_lint.project.extract.autotune import config_assignment, decorator_effects, environment_effects  # TRP207
from torchrepro_lint.project.extract.call_syntax import EXTERNAL_ROOTS, root
from torchrepro_lint.project.extract.calls import CallLowering
from torchrepro_lint.project.extract.cli_apps import app_body, app_functions
from torchrepro_lint.project.extract.empty_init import contexts_entered, is_turn_test, spared_block, turn_variable
from torchrepro_lint.project.extract.function_reuse import FunctionReuse, RefLayout, shifted, shifted_statements
from torchrepro_lint.project.known_apis import CUDNN, KNOWN_HELPERS, Helper, Kind


def is_main_guard(node: cst.CSTNode) -> bool:
    return isinstance(node, cst.If) and is_main_test(node.test)


def is_main_test(test: cst.BaseExpression) -> bool:
    """`__name__ == "__main__"` in either operand order."""
    if not isinstance(test, cst.Comparison):
        return False
    if len(test.comparisons) != 1 or not isinstance(test.comparisons[0].operator, cst.Equal):
        return False
    sides = {_literal_text(test.left), _literal_text(test.comparisons[0].comparator)}
    return sides == {"__name__", "'__main__'"}


def _literal_text(node: cst.BaseExpression) -> str | None:
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.SimpleString):
        return repr(evaluated_string(node))
    return None


class Lowering(CallLowering):
    def __init__(
        self, index: ModuleIndex, extra_helpers: dict[str, Helper] | None = None, texts_before: ExpressionTexts | None = None
    ) -> None:
        self.index = index
        self.helpers = {**KNOWN_HELPERS, **(extra_helpers or {})}
        self.nodes: list[cst.CSTNode] = []
        self._attribute_values: dict[tuple, list] = {}  # (class, construction, attribute, instance) -> values
        self._pending: list[ir.AttributeOnCuda] = []
        self._returns: dict[int, list[cst.Return]] | None = None  # id(function) -> its returns (_returns_of)
        # Given (the language server): the texts lowering the file's previous text generated,
        # and the ones this lowering generates, to hand to the next (see ExpressionTexts).
        self.texts = ExpressionTexts.following(texts_before, index.module) if texts_before is not None else None
        # The language server: what is taken from the previous lowering of the buffer
        # (function_reuse.py), and where this one puts its refs, for the next one's
        self.reuse: FunctionReuse | None = None
        self.layout = RefLayout(0)
        # statements taken from the previous lowering (function_reuse.statement_reuse)
        self._taking: dict | None = None
        self.statements_taken = 0  # (counted for tests)

    def ref(self, node: cst.CSTNode) -> int:
        self.nodes.append(node)
        return len(self.nodes) - 1

    # -- module ------------------------------------------------------------------------
    def build(self) -> ir.ModuleIR:
        reuse = self.reuse
        if reuse is not None and self.texts is not None:
            self.texts.keep_taken(reuse.gone)
        if reuse is not None and reuse.top:
            self.nodes.extend(reuse.nodes[: reuse.layout.top])
            top, guard, work = reuse.module.top, reuse.module.main_guard, reuse.module.has_top_level_work
        else:
            top, guard, work = self._top_level()
        self.layout.top = len(self.nodes)
        functions = {path: self._function(path, node) for path, node in self.index.functions.items()}
        functions.update(app_functions(self.cli_apps, self.ref, functions))  # `app = typer.Typer()`: what app() runs
        classes = {path: self.klass(path, node) for path, node in self.index.classes.items()}
        aliases = {}
        for name in self.index.scope.bindings:
            target = self.index.resolver.lookup(name, self.index.scope)
            if target is not None and not target.startswith("builtins."):
                aliases[name] = target
        imported = tuple((rec.module, rec.names) for rec in self.index.imports if rec.module)
        return ir.ModuleIR(tuple(top), guard, functions, classes, aliases, imported, work)

    def _top_level(self) -> tuple:
        top: list[ir.Stmt] = []
        guard = None
        work = False
        for statement in self.index.module.body:
            if is_main_guard(statement) and guard is None:
                guard = self.ref(statement)  # the program's anchor; every guard runs in place
            top.extend(self.statement(statement))
            work = work or self._is_work(statement)
        return live(top), guard, work

    def _unpacked_instances(self, target: cst.Tuple | cst.List, value: cst.BaseExpression) -> list[ir.Stmt]:
        """`model, diffusion = create_model_and_diffusion(...)`: each name is that item of what
        the project function returns (the interpreter looks at its FunctionIR.returns)."""
        callee = self._maker(value)
        if callee is None:
            return []
        return [
            ir.Assign(e.value.value, ir.Instance(callee, position))
            for position, e in enumerate(target.elements)
            if isinstance(e, cst.Element) and isinstance(e.value, cst.Name)
        ]

    def _is_work(self, statement: cst.CSTNode) -> bool:
        """Top-level work makes a guard-less file a script: calls, loops, `with` blocks."""
        if isinstance(statement, (cst.For, cst.While, cst.With)):
            return True
        if isinstance(statement, cst.SimpleStatementLine):
            for small in statement.body:
                if isinstance(small, cst.Expr) and isinstance(small.value, (cst.Call, cst.Await)):
                    return True
                if isinstance(small, (cst.Assign, cst.AnnAssign, cst.AugAssign)):
                    for site in self.index.calls_by_statement.get(small, ()):
                        if site.qualname is None or root(site.qualname) in ("torch", "numpy", "random"):
                            return True
                        if site.qualname.startswith(LOCAL) or root(site.qualname) not in EXTERNAL_ROOTS:
                            return True
        return False

    def _function(self, path: str, node: cst.FunctionDef) -> ir.FunctionIR:
        first = len(self.nodes)
        reuse = self.reuse
        # (a click group's IR holds its commands, which may be filed outside it: lowered again)
        if reuse is not None and path in reuse.paths and path not in self.cli_apps.apps:
            start, end = reuse.layout.functions[path]
            self.nodes.extend(reuse.nodes[start:end])
            found = shifted(reuse.module.functions[path], first - start)
        else:
            self._taking = reuse.layout.statements if reuse is not None and path in reuse.in_functions else None
            try:
                found = self.function(path, node)
            finally:
                self._taking = None
        self.layout.functions[path] = (first, len(self.nodes))
        return found

    def function(self, path: str, node: cst.FunctionDef) -> ir.FunctionIR:
        params = node.params
        names = tuple(p.name.value for p in (*params.posonly_params, *params.params, *params.kwonly_params))
        defaults = {}
        for param in (*params.posonly_params, *params.params, *params.kwonly_params):
            if param.default is not None:
                value = self.value(param.default)
                if isinstance(value, ir.Const):
                    defaults[param.name.value] = value
        parent = path.rpartition(".")[0]
        patched = decorator_effects(self.index, node, self.value, self.ref, in_body=True) if node.decorators else []  # TRP207
        body = live((*patched, *self.block(node.body.body)))
        group = self.cli_apps.apps.get(path)
        if group is not None and group.group:  # a click group: its commands run after its own body
            body = (ir.Try(body, (), (), app_body(group, self.ref)),)
        returns = tuple(self._made_by(r.value) for r in self._returns_of(node))
        returns = returns if any(name for made in returns for name in made) else ()
        return ir.FunctionIR(path, self.ref(node), names, defaults, body, parent in self.index.classes, returns)

    def _returns_of(self, function: cst.FunctionDef) -> list[cst.Return]:
        """The return statements of `function` (not of functions nested in it), in source order:
        the index's Return nodes grouped once per module by their nearest function."""
        if self._returns is None:
            self._returns = {}
            for node in self.index.nodes_of(cst.Return):
                self._returns.setdefault(id(self.index.enclosing(node, cst.FunctionDef)), []).append(node)
        return self._returns.get(id(function), [])

    def _made_by(self, value: cst.BaseExpression | None) -> tuple[str | None, ...]:
        """For a returned value: the project callee that made it (through the function's last
        assignment of a returned name), per element of a returned tuple."""
        if isinstance(value, cst.Tuple):
            return tuple(self._maker(e.value) for e in value.elements)
        return (self._maker(value),)

    def _maker(self, value: cst.BaseExpression | None) -> str | None:
        if isinstance(value, cst.Name):
            value = self.index.assigned_value(value.value, value)
        if not isinstance(value, cst.Call):
            return None
        callee = self.index.resolve(value.func, value)
        return callee if callee and (callee.startswith(LOCAL) or root(callee) not in EXTERNAL_ROOTS) else None

    def klass(self, path: str, node: cst.ClassDef) -> ir.ClassIR:
        bases = tuple(q for q in (self.index.resolve(arg.value) for arg in node.bases if arg.keyword is None) if q)
        # a tuple in source order, not a set: the IR's digest is its pickle (cache.structural_digest)
        methods = tuple(dict.fromkeys(s.name.value for s in node.body.body if isinstance(s, cst.FunctionDef)))
        return ir.ClassIR(path, bases, methods, attributes.device_summary(self.index, node, self._names_cuda_here))

    # -- statements --------------------------------------------------------------------
    def block(self, statements) -> tuple[ir.Stmt, ...]:
        # In a lowering after an edit (the language server), each statement of a function
        # lowered again is kept with its refs and IR, for the next edit of the function.
        recorded = self.layout.statements if self.reuse is not None else None
        taking = self._taking
        out: list[ir.Stmt] = []
        for statement in statements:
            first = len(self.nodes)
            found = taking.get(id(statement)) if taking is not None else None
            if found is not None and found[0] is statement:
                _, start, end, lowered = found
                self.statements_taken += 1
                self.nodes.extend(self.reuse.nodes[start:end])
                if first != start:
                    lowered = shifted_statements(lowered, first - start)
            else:
                lowered = tuple(self.statement(statement))
            if recorded is not None:
                recorded[id(statement)] = (statement, first, len(self.nodes), lowered)
            out.extend(lowered)
        return tuple(out)

    def _in_turns(self, statements, variable: str) -> tuple[ir.Stmt, ...]:
        """A loop over the processes (`for rank in range(world_size)`): an `if` on this process's
        turn (`if fabric.global_rank == rank:`) runs on every path; its `else` maybe."""
        out: list[ir.Stmt] = []
        for statement in statements:
            if isinstance(statement, cst.If) and is_turn_test(self.index, statement.test, variable):
                header, body = self.calls_of(statement), self.block(statement.body.body)
                orelse = self.orelse(statement.orelse)
                out += [*header, *body, *([ir.Branch(ir.UNKNOWN, orelse, ())] if orelse else [])]
            else:
                out += self.block((statement,))
        return tuple(out)

    def orelse(self, orelse) -> tuple[ir.Stmt, ...]:
        if orelse is None:
            return ()
        if isinstance(orelse, cst.If):  # elif
            return tuple(self.statement(orelse))
        return self.block(orelse.body.body)

    def statement(self, node: cst.CSTNode) -> list[ir.Stmt]:
        if isinstance(node, cst.SimpleStatementLine):
            out: list[ir.Stmt] = []
            for small in node.body:
                out.extend(self.small_statement(small))
            return out
        if isinstance(node, cst.FunctionDef) and node.decorators:
            return decorator_effects(self.index, node, self.value, self.ref, in_body=False)  # TRP207: `@torch.compile(mode=...)`
        if isinstance(node, (cst.FunctionDef, cst.ClassDef)):
            return []  # definitions run nothing until called
        header = self.calls_of(node)
        if isinstance(node, cst.If):
            return [*header, ir.Branch(self.value(node.test), self.block(node.body.body), self.orelse(node.orelse))]
        if isinstance(node, (cst.For, cst.While)):
            # A loop body is taken to run (once): what it does is on the path. Its `else` runs
            # unless a `break` left the loop (`for ...: if found: break` / `else: raise`): maybe.
            orelse = self.orelse(node.orelse)
            turn = turn_variable(self.index, node) if isinstance(node, cst.For) else None
            body = self.block(node.body.body) if turn is None else self._in_turns(node.body.body, turn)
            return [*header, *body, *([ir.Branch(ir.UNKNOWN, orelse, ())] if orelse else [])]
        if isinstance(node, cst.With):  # (one that builds models sparing their init: empty_init.py)
            contexts = contexts_entered(self.index, node, self.value)
            return [*header, *spared_block(contexts, self.block(node.body.body), self.ref(node) if contexts else 0)]
        if isinstance(node, (cst.Try, cst.TryStar)):
            handlers = tuple(ir.Branch(ir.UNKNOWN, self.block(handler.body.body), ()) for handler in node.handlers)
            final = self.block(node.finalbody.body.body) if node.finalbody is not None else ()
            return [*header, ir.Try(self.block(node.body.body), handlers, self.orelse(node.orelse), final)]
        if isinstance(node, cst.Match):
            out = list(header)
            for case in reversed(node.cases):
                out = [ir.Branch(ir.UNKNOWN, self.block(case.body.body), tuple(out))]
            return out
        return list(header)

    def small_statement(self, node: cst.BaseSmallStatement) -> list[ir.Stmt]:
        targets = _assigned_names(node)
        out = self.calls_of(node, targets)
        if isinstance(node, cst.Return):
            out.append(ir.Return())
        elif isinstance(node, cst.Raise):
            out.append(ir.Raise())
        elif isinstance(node, (cst.Import, cst.ImportFrom)):
            for record in self.index.imports:
                if record.node is node and record.module:
                    out.append(ir.ImportModule(self.ref(node), record.module, record.names))
        elif isinstance(node, (cst.Assign, cst.AnnAssign)) and node.value is not None:
            out.extend(self.assignment(node))
        return out

    def assignment(self, node: cst.Assign | cst.AnnAssign) -> list[ir.Stmt]:
        out: list[ir.Stmt] = []
        targets = [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target]
        pairs = [(target, node.value) for target in targets]
        for target, value in list(pairs):
            if isinstance(target, (cst.Tuple, cst.List)):
                # `cudnn.benchmark, cudnn.deterministic = (False, True) if seed == 0 else (True, False)`
                pairs.remove((target, value))
                out.extend(self._unpacked_instances(target, value))
                for position, element in enumerate(target.elements):
                    part = _element(value, position, len(target.elements))
                    if part is not None:
                        pairs.append((element.value, part))
        for target, value in pairs:
            if isinstance(target, cst.Attribute):
                qualname = self.index.resolve(target)
                if qualname == CUDNN + ".benchmark":
                    out.append(ir.Effect(Kind.BENCHMARK, self.ref(node), self.value(value)))
                elif qualname == CUDNN + ".deterministic":
                    out.append(ir.Effect(Kind.CUDNN_DETERMINISTIC, self.ref(node), self.value(value)))
                elif (tuned := config_assignment(qualname, value, node, self.value, self.ref)) is not None:
                    out.extend(tuned)  # TRP207: torch._inductor.config's tuners
                else:
                    out.extend(self.device_store(target, value, node))
            elif isinstance(target, cst.Subscript) and self.index.resolve(target.value) == "os.environ":
                key = _subscript_string(target)
                if key:
                    out.append(ir.Effect(Kind.ENV_SET, self.ref(node), detail=_env_detail(key, value)))
                    out.extend(environment_effects(self.index, node, key, value, node, self.ref))  # TRP207
            elif isinstance(target, cst.Name):
                if isinstance(value, cst.Call):
                    callee = self.index.resolve(value.func)
                    if callee and (callee.startswith(LOCAL) or root(callee) not in EXTERNAL_ROOTS):
                        out.append(ir.Assign(target.value, ir.Instance(callee)))
                        continue
                out.append(ir.Assign(target.value, self.value(value, name=target.value)))
        return out

    def device_store(self, target: cst.Attribute, value: cst.BaseExpression, node: cst.CSTNode) -> list[ir.Stmt]:
        """`trainer.device = "cuda"` on an object of a project class, from outside the class: an
        ir.Assign to the dotted name, of whether it names CUDA, which the run hands to the
        object's methods as `self.device` (a string that does not: False, it replaces what the
        class set; any other value: nothing, the class's own values stand)."""
        owner = target.value
        if not isinstance(owner, cst.Name) or owner.value == "self":
            return []
        built = self.index.assigned_value(owner.value, node)
        if not isinstance(built, cst.Call):
            return []
        callee = self.index.resolve(built.func, built)
        if not callee or not (callee.startswith(LOCAL) or root(callee) not in EXTERNAL_ROOTS):
            return []
        on_cuda = self._cuda_value(value, node)
        if on_cuda is None and isinstance(literal_value(value), str):
            on_cuda = ir.Const(False)  # "cpu", "mps": numbers and flags are left alone (`.device = 0` is cuda:0)
        return [] if on_cuda is None else [ir.Assign(f"{owner.value}.{target.attr.value}", on_cuda)]

    # -- values ------------------------------------------------------------------------
    def value(self, expr: cst.BaseExpression, name: str | None = None) -> ir.Value:
        """`name`: for an assignment's value, an opaque result is keyed by the variable's name
        (`det = cfg.get("det")`, later `if det:`) instead of generating the expression's text."""
        literal = literal_value(expr, MISSING)
        if literal is not MISSING:
            return ir.Const(literal)
        if is_main_test(expr):
            return ir.IS_MAIN
        if isinstance(expr, cst.Name):
            return ir.Var(expr.value)
        if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Not):
            return ir.Not(self.value(expr.expression))
        if isinstance(expr, cst.Comparison) and len(expr.comparisons) == 1:
            comparison = expr.comparisons[0]
            if is_none(comparison.comparator) and isinstance(comparison.operator, (cst.Is, cst.IsNot)):
                return ir.IsNone(self.value(expr.left), isinstance(comparison.operator, cst.IsNot))
            if isinstance(comparison.operator, (cst.Equal, cst.NotEqual)):
                sides = (expr.left, comparison.comparator)
                literals = [literal_value(side, MISSING) for side in sides]
                names = [isinstance(side, cst.Name) for side in sides]
                if any(v is not MISSING for v in literals) and all(v is not MISSING or n for v, n in zip(literals, names)):
                    left, right = (self.value(side) for side in sides)
                    return ir.Equals(left, right, isinstance(comparison.operator, cst.NotEqual), self._text(expr))
        if isinstance(expr, cst.IfExp):
            # `True if c else False` is c; `False if c else True` is not c.
            body, orelse = literal_value(expr.body, MISSING), literal_value(expr.orelse, MISSING)
            if body is not MISSING and orelse is not MISSING:
                if bool(body) == bool(orelse):
                    return ir.Const(body)
                test = self.value(expr.test)
                return test if body else ir.Not(test)
        if isinstance(expr, cst.BooleanOperation):
            op = "and" if isinstance(expr.operator, cst.And) else "or"
            return ir.BoolOp(op, (self.value(expr.left), self.value(expr.right)), self._text(expr))
        return ir.Opaque(dotted(expr) or (name and f"<{name}>") or self._text(expr))

    def _text(self, expr: cst.BaseExpression) -> str:
        try:
            return self._code(expr)
        except RecursionError:
            return f"<expression {id(expr)}>"  # correlates with nothing

    def _code(self, expr: cst.BaseExpression) -> str:
        if self.texts is None:
            return expression_code(self.index.module, expr)
        return self.texts.code(expr, self.index.module)


class ExpressionTexts:
    """Source texts of expressions, by node, carried from one lowering of a file to the next in
    the language server. An edit keeps the untouched statements' node objects (reparse.py), and
    a node's text never changes (nodes are immutable; the newline and indent a tree leaves to
    its module are part of the key): generating texts is half of lowering a file with large
    literal tables (timm's resnet.py), so the next lowering takes them from here. Holds only
    the texts the last lowering used, so it never outgrows the current tree."""

    __slots__ = ("defaults", "before", "now")

    def __init__(self, defaults: tuple, before: dict) -> None:
        self.defaults = defaults
        self.before = before  # id(node) -> (node, text): the node is held, so its id is not reused
        self.now: dict = {}

    @classmethod
    def following(cls, previous: ExpressionTexts, module: cst.Module) -> ExpressionTexts:
        defaults = (module.default_newline, module.default_indent)
        return cls(defaults, previous.now if previous.defaults == defaults else {})

    @classmethod
    def start(cls) -> ExpressionTexts:
        return cls((None, None), {})

    def keep_taken(self, gone) -> None:
        """For a lowering that takes parts of the previous one (function_reuse.py), which asks
        no texts of them: keep the previous texts too, but those of the nodes the edit took out
        of the tree (`gone`), so the next lowering still finds them."""
        now = dict(self.before)
        for node in gone:
            now.pop(id(node), None)
        now.update(self.now)
        self.now = now

    def code(self, node: cst.BaseExpression, module: cst.Module) -> str:
        key = id(node)
        found = self.now.get(key) or self.before.get(key)
        if found is None or found[0] is not node:
            found = (node, expression_code(module, node))
        self.now[key] = found
        return found[1]


def live(statements) -> tuple[ir.Stmt, ...]:
    """A body (a function's, or a module's top level) without the assignments that nothing in
    it reads. An assignment binds a name in the body's own frame, which only the body's own
    statements read (a called function starts from its parameters): as a value (ir.Var, the
    stored attribute an ir.AttributeOnCuda tests), as the object a method is called on, or,
    for `trainer.device = ...`, handed to the methods called on `trainer`. A line such as
    `total = 0` then leaves the IR as it was: the programs that run it are not run again for
    it as it is typed (the language server)."""
    names: set[str] = set()
    owners: set[str] = set()
    _names_read(statements, names, owners)
    return _without_dead(statements, names, owners)


def _names_read(statements, names: set, owners: set) -> None:
    """The frame's names `statements` read (interpreter/run.py: evaluate, callee, _stored_on,
    devices.attribute_on_cuda), and the objects whose stored attributes calls hand on."""
    for statement in statements:
        if isinstance(statement, ir.Branch):
            _value_names(statement.cond, names)
            _names_read(statement.then, names, owners)
            _names_read(statement.orelse, names, owners)
        elif isinstance(statement, ir.Try):
            for block in ir.blocks_of(statement):
                _names_read(block, names, owners)
        elif isinstance(statement, ir.Effect):
            _value_names(statement.value, names)
        elif isinstance(statement, ir.Assign):
            if not isinstance(statement.value, ir.Instance):
                _value_names(statement.value, names)
        elif isinstance(statement, ir.Call):
            for value in statement.args:
                _value_names(value, names)
            for _, value in statement.kwargs:
                _value_names(value, names)
            if statement.receiver is not None:
                names.add(statement.receiver)
                owners.add("self" if statement.receiver == "super" else statement.receiver)


def _value_names(value, names: set) -> None:
    if isinstance(value, ir.Var):
        names.add(value.name)
    elif isinstance(value, (ir.Not, ir.IsNone)):
        _value_names(value.operand, names)
    elif isinstance(value, ir.Equals):
        _value_names(value.left, names)
        _value_names(value.right, names)
    elif isinstance(value, ir.BoolOp):
        for operand in value.operands:
            _value_names(operand, names)
    elif isinstance(value, ir.AttributeOnCuda) and value.owner is not None:
        names.add(f"{value.owner}.{value.attribute}")


def _without_dead(statements, names: set, owners: set) -> tuple[ir.Stmt, ...]:
    out: list[ir.Stmt] = []
    for statement in statements:
        if isinstance(statement, ir.Assign):
            if statement.name not in names and not _handed_on(statement.name, owners):
                continue
        elif isinstance(statement, ir.Branch):
            then, orelse = _without_dead(statement.then, names, owners), _without_dead(statement.orelse, names, owners)
            if then != statement.then or orelse != statement.orelse:
                statement = ir.Branch(statement.cond, then, orelse)
        elif isinstance(statement, ir.Try):
            blocks = tuple(_without_dead(block, names, owners) for block in ir.blocks_of(statement))
            if blocks != ir.blocks_of(statement):
                statement = ir.Try(*blocks)
        out.append(statement)
    return tuple(out)


def _handed_on(name: str, owners: set) -> bool:
    """Whether a call hands `name` (`a.b`) to a method as `self.b` (interpreter's _stored_on)."""
    return any(name.startswith(owner + ".") for owner in owners)


def _subscript_string(node: cst.Subscript) -> str | None:
    if len(node.slice) != 1 or not isinstance(node.slice[0].slice, cst.Index):
        return None
    value = literal_value(node.slice[0].slice.value)
    return value if isinstance(value, str) else None


def _element(value: cst.BaseExpression, position: int, size: int) -> cst.BaseExpression | None:
    """The `position`-th element a tuple-valued expression assigns, where it can be seen."""
    if isinstance(value, (cst.Tuple, cst.List)) and len(value.elements) == size:
        return value.elements[position].value
    if isinstance(value, cst.IfExp):
        body, orelse = _element(value.body, position, size), _element(value.orelse, position, size)
        if body is not None and orelse is not None:
            return cst.IfExp(test=value.test, body=body, orelse=orelse)
    return None


def _assigned_names(node: cst.CSTNode) -> tuple[str, ...]:
    if isinstance(node, cst.Assign):
        return tuple(t.target.value for t in node.targets if isinstance(t.target, cst.Name))
    if isinstance(node, cst.AnnAssign) and isinstance(node.target, cst.Name):
        return (node.target.value,)
    return ()


def _env_detail(key: str, value: cst.BaseExpression) -> tuple:
    """An ENV_SET's detail: the variable, and for CUDA_VISIBLE_DEVICES its literal value (a
    program that sets it to "" or "-1" hides every GPU: rules/_ops.py)."""
    if key == "CUDA_VISIBLE_DEVICES":
        value = literal_value(value, MISSING)
        if isinstance(value, str):
            return (key, value.strip())
    return (key,)
