"""Lower one module's CST into the program-model IR (see ir.py).

Calls are classified with the tables in known_apis.py; anything that may be project code
becomes an ir.Call for the interpreter to resolve. Nodes are referred to by index in
`Lowering.nodes`, so findings can be located later without keeping the IR tied to the tree.
"""

from __future__ import annotations

import libcst as cst

from torchrepro_lint.analysis.module_index import CallSite, ModuleIndex
from torchrepro_lint.analysis.names import LOCAL, dotted
from torchrepro_lint.analysis.syntax import arg as _arg
from torchrepro_lint.analysis.syntax import evaluated_string, expression_code
from torchrepro_lint.project import ir
from torchrepro_lint.project.known_apis import (
    ACCELERATOR_CALLS,
    ACCELERATOR_DEVICE,
    CHECKPOINT_CALLS,
    CHECKPOINT_METHODS,
    CUDA_CALLS,
    CUDNN,
    DEFERRED_RANDOMNESS,
    DEVICE_ARGUMENT_CALLS,
    DEVICE_PROBES,
    HF_TRAINING_ARGUMENTS,
    KNOWN_HELPERS,
    LIGHTNING_FABRIC,
    LIGHTNING_TRAINER,
    MODEL_FACTORIES,
    MODEL_FACTORY_PREFIXES,
    NUMPY_NOT_DRAWS,
    PY_RANDOM_DRAWS,
    RANDOM_INIT_MODULES,
    RANDOM_TRANSFORM_PREFIXES,
    RANDOM_TRANSFORMS,
    SPAWN_FUNCTIONS,
    TENSOR_RANDOM_METHODS,
    TORCH_DRAWS,
    TRAINING_METHODS,
    Helper,
    Kind,
)

# Roots that are never project code: calls into them are classified, not followed.
EXTERNAL_ROOTS = frozenset(
    "torch numpy random os sys builtins time math datetime json logging argparse typing "
    "collections itertools functools pathlib re shutil subprocess multiprocessing threading "
    "warnings copy pickle glob io abc dataclasses enum contextlib inspect uuid secrets hashlib "
    "tqdm wandb yaml PIL cv2 pandas scipy sklearn matplotlib torchvision".split()
)
TRACING_CALLS = frozenset(
    {"torch.jit.trace", "torch.jit.trace_module", "torch.onnx.export", "torch.export.export", "torch.fx.symbolic_trace"}
)
# Calls that write an exported model: their example inputs do not change what is written.
EXPORT_CALLS = frozenset({"torch.onnx.export", "torch.onnx.dynamo_export", "torch.jit.save", "torch.export.save"})
SEED_CALLS = frozenset({"torch.manual_seed", "torch.cuda.manual_seed", "torch.cuda.manual_seed_all"})


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


class Lowering:
    def __init__(self, index: ModuleIndex, extra_helpers: dict[str, Helper] | None = None) -> None:
        self.index = index
        self.helpers = {**KNOWN_HELPERS, **(extra_helpers or {})}
        self.nodes: list[cst.CSTNode] = []
        self._attribute_values: dict[tuple[int, str], list[cst.BaseExpression]] = {}

    def ref(self, node: cst.CSTNode) -> int:
        self.nodes.append(node)
        return len(self.nodes) - 1

    # -- module ------------------------------------------------------------------------
    def build(self) -> ir.ModuleIR:
        body = self.index.module.body
        top: list[ir.Stmt] = []
        guard = None
        work = False
        for statement in body:
            if is_main_guard(statement) and guard is None:
                guard = self.ref(statement)  # the program's anchor; every guard runs in place
            top.extend(self.statement(statement))
            work = work or self._is_work(statement)
        functions = {path: self.function(path, node) for path, node in self.index.functions.items()}
        classes = {path: self.klass(path, node) for path, node in self.index.classes.items()}
        aliases = {}
        for name in self.index.scope.bindings:
            target = self.index.resolver.lookup(name, self.index.scope)
            if target is not None and not target.startswith("builtins."):
                aliases[name] = target
        imported = tuple((rec.module, rec.names) for rec in self.index.imports if rec.module)
        return ir.ModuleIR(tuple(top), guard, functions, classes, aliases, imported, work)

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
                        if site.qualname is None or _root(site.qualname) in ("torch", "numpy", "random"):
                            return True
                        if site.qualname.startswith(LOCAL) or _root(site.qualname) not in EXTERNAL_ROOTS:
                            return True
        return False

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
        return ir.FunctionIR(path, self.ref(node), names, defaults, self.block(node.body.body), parent in self.index.classes)

    def klass(self, path: str, node: cst.ClassDef) -> ir.ClassIR:
        bases = tuple(q for q in (self.index.resolve(arg.value) for arg in node.bases if arg.keyword is None) if q)
        # a tuple in source order, not a set: the IR's digest is its pickle (cache.structural_digest)
        methods = tuple(dict.fromkeys(s.name.value for s in node.body.body if isinstance(s, cst.FunctionDef)))
        return ir.ClassIR(path, bases, methods)

    # -- statements --------------------------------------------------------------------
    def block(self, statements) -> tuple[ir.Stmt, ...]:
        out: list[ir.Stmt] = []
        for statement in statements:
            out.extend(self.statement(statement))
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
        if isinstance(node, (cst.FunctionDef, cst.ClassDef)):
            return []  # definitions run nothing until called
        header = self.calls_of(node)
        if isinstance(node, cst.If):
            return [*header, ir.Branch(self.value(node.test), self.block(node.body.body), self.orelse(node.orelse))]
        if isinstance(node, (cst.For, cst.While)):
            # A loop body is taken to run (once): what it does is on the path.
            return [*header, *self.block(node.body.body), *self.orelse(node.orelse)]
        if isinstance(node, cst.With):
            return [*header, *self.block(node.body.body)]
        if isinstance(node, (cst.Try, cst.TryStar)):
            out = [*header, *self.block(node.body.body)]
            for handler in node.handlers:
                out.append(ir.Branch(ir.UNKNOWN, self.block(handler.body.body), ()))
            out.extend(self.orelse(node.orelse))
            if node.finalbody is not None:
                out.extend(self.block(node.finalbody.body.body))
            return out
        if isinstance(node, cst.Match):
            out = list(header)
            for case in reversed(node.cases):
                out = [ir.Branch(ir.UNKNOWN, self.block(case.body.body), tuple(out))]
            return out
        return list(header)

    def small_statement(self, node: cst.BaseSmallStatement) -> list[ir.Stmt]:
        targets = _assigned_names(node)
        out = self.calls_of(node, targets)
        if isinstance(node, (cst.Return, cst.Raise)):
            out.append(ir.Return())
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
            elif isinstance(target, cst.Subscript) and self.index.resolve(target.value) == "os.environ":
                key = _subscript_string(target)
                if key:
                    out.append(ir.Effect(Kind.ENV_SET, self.ref(node), detail=(key,)))
            elif isinstance(target, cst.Name):
                if isinstance(value, cst.Call):
                    callee = self.index.resolve(value.func)
                    if callee and (callee.startswith(LOCAL) or _root(callee) not in EXTERNAL_ROOTS):
                        out.append(ir.Assign(target.value, ir.Instance(callee)))
                        continue
                out.append(ir.Assign(target.value, self.value(value, name=target.value)))
        return out

    # -- calls -------------------------------------------------------------------------
    def calls_of(self, statement: cst.CSTNode, targets: tuple[str, ...] = ()) -> list[ir.Stmt]:
        out: list[ir.Stmt] = []
        for site in self.index.calls_by_statement.get(statement, ()):
            out.extend(self.call(site, targets))
        return out

    def call(self, site: CallSite, targets: tuple[str, ...]) -> list[ir.Stmt]:
        node, q = site.node, site.qualname
        method = node.func.attr.value if isinstance(node.func, cst.Attribute) else None
        out: list[ir.Stmt] = []
        effect = lambda kind, value=ir.TRUE, detail=(): out.append(ir.Effect(kind, self.ref(node), value, detail))  # noqa: E731
        spawned = None  # the target of a call that surely spawns: it runs in the child, not here

        if q in self.helpers:
            self.helper_effects(site, self.helpers[q], out)
        elif q == "torch.manual_seed":
            effect(Kind.SEED_TORCH, detail=self.seed_detail(node))
        elif q in ("torch.cuda.manual_seed", "torch.cuda.manual_seed_all"):
            effect(Kind.SEED_CUDA, detail=self.seed_detail(node))
        elif q in ("random.seed", "numpy.random.seed"):
            arg = _arg(node, 0, "a" if q == "random.seed" else "seed")
            if arg is not None and not _is_none(arg):
                effect(Kind.SEED_RANDOM if q == "random.seed" else Kind.SEED_NUMPY, detail=self.seed_detail(node))
        elif q == "torch.use_deterministic_algorithms":
            mode = _arg(node, 0, "mode")
            warn = _arg(node, 1, "warn_only")
            kind = Kind.DET_MODE if warn is None or _is_false(warn) else Kind.DET_MODE_WARN
            effect(kind, self.value(mode) if mode is not None else ir.UNKNOWN)
        elif q == "torch.set_deterministic_debug_mode":
            mode = _arg(node, 0, "debug_mode")
            literal = _literal(mode) if mode is not None else None
            if literal in (2, "error"):
                effect(Kind.DET_MODE)
            elif literal in (1, "warn") or mode is not None and literal is None:
                effect(Kind.DET_MODE_WARN, ir.TRUE if literal is not None else self.value(mode))
        elif q == LIGHTNING_TRAINER:
            deterministic = _arg(node, None, "deterministic")
            if deterministic is not None:
                kind = Kind.DET_MODE_WARN if _literal(deterministic) == "warn" else Kind.DET_MODE
                value = ir.TRUE if _literal(deterministic) == "warn" else self.value(deterministic)
                effect(kind, value)
                effect(Kind.ENV_SET, value, ("CUBLAS_WORKSPACE_CONFIG",))
            benchmark = _arg(node, None, "benchmark")
            if benchmark is not None:
                effect(Kind.BENCHMARK, self.value(benchmark))
            elif deterministic is not None:  # Lightning sets benchmark = False when deterministic
                out.append(ir.Branch(self.value(deterministic), (ir.Effect(Kind.BENCHMARK, self.ref(node), ir.Const(False)),), ()))
            if _lightning_on_gpu(node):
                effect(Kind.CUDA)
        elif q in LIGHTNING_FABRIC:
            if _lightning_on_gpu(node):  # Fabric(accelerator="cuda"|"gpu"); no determinism switch
                effect(Kind.CUDA)
        elif q in HF_TRAINING_ARGUMENTS:
            full = _arg(node, None, "full_determinism")
            if full is not None:
                effect(Kind.DET_MODE, self.value(full))
                effect(Kind.ENV_SET, self.value(full), ("CUBLAS_WORKSPACE_CONFIG",))
        elif q == CUDNN + ".flags":
            for keyword, kind in (("benchmark", Kind.BENCHMARK), ("deterministic", Kind.CUDNN_DETERMINISTIC)):
                arg = _arg(node, None, keyword)
                if arg is not None:
                    effect(kind, self.value(arg))
        elif q in TORCH_DRAWS:
            if _own_generator(node):
                pass  # `generator=g`: draws from g, not from torch's global generator
            elif not self._feeds_seed(node, site.statement) and not self._only_traced(targets, site):
                effect(Kind.DRAW, detail=targets)
        elif q in RANDOM_INIT_MODULES or q in MODEL_FACTORIES or (q and q.startswith(MODEL_FACTORY_PREFIXES)):
            effect(Kind.MODULE_INIT, detail=("pretrained",) if _loads_pretrained(node) else ())
        elif q in DEFERRED_RANDOMNESS or _is_random_transform(q):
            effect(Kind.RANDOMNESS)
        elif q == "torch.utils.data.DataLoader":
            shuffle = _arg(node, 2, "shuffle")
            if shuffle is not None and not _is_false(shuffle) and not _is_none(shuffle):
                effect(Kind.RANDOMNESS)
        elif q in PY_RANDOM_DRAWS:
            effect(Kind.DRAW_RANDOM)
        elif q and q.startswith("numpy.random.") and q.count(".") == 2 and q.rsplit(".", 1)[1] not in NUMPY_NOT_DRAWS:
            effect(Kind.DRAW_NUMPY)
        elif q in SPAWN_FUNCTIONS:
            target = _arg(node, 0, "fn")
            start_method = _arg(node, None, "start_method")
            spawn = q.endswith(".spawn") or start_method is None or _literal(start_method) == "spawn"
            if target is not None and spawn:
                self.spawn(node, target, False, out)
                spawned = target
        elif q in ("multiprocessing.spawn_context.Process", "multiprocessing.Process"):
            target = _arg(node, None, "target")
            if target is not None:
                self.spawn(node, target, q == "multiprocessing.Process", out)
                if q != "multiprocessing.Process":  # forked unless the start method is spawn: it may run as a callback
                    spawned = target
        elif q == "multiprocessing.set_start_method":
            if _literal(_arg(node, 0, "method")) == "spawn":
                effect(Kind.SPAWN_METHOD)
        elif q in ACCELERATOR_CALLS:
            effect(Kind.CUDA)
        elif q == ACCELERATOR_DEVICE:
            if not self._only_inspected(node, site.statement):
                effect(Kind.CUDA)
        elif q in DEVICE_ARGUMENT_CALLS:
            position, keyword, default = DEVICE_ARGUMENT_CALLS[q]
            device = _arg(node, position, keyword)
            on_cuda = self._mentions_cuda(device, node) if device is not None else default == "cuda"
            if on_cuda and not _is_false(_arg(node, None, "enabled")):
                effect(Kind.CUDA)
        elif q in CUDA_CALLS or q == "torch.nn.parallel.DistributedDataParallel" and _arg(node, None, "device_ids"):
            effect(Kind.CUDA)
        elif q == "torch.distributed.init_process_group":
            if _literal(_arg(node, 0, "backend")) == "nccl":
                effect(Kind.CUDA)
        elif q == "torch.device":
            if self._mentions_cuda(_arg(node, 0, "type"), node):
                effect(Kind.CUDA)
        elif q in EXPORT_CALLS:
            effect(Kind.EXPORT)
        elif q in CHECKPOINT_CALLS:
            effect(Kind.CHECKPOINT)
        elif q and q.startswith("torch.optim.") and q.rsplit(".", 1)[1][:1].isupper():
            effect(Kind.TRAINING, detail=("optimizer",))
        elif q in ("os.environ.setdefault", "os.putenv"):
            key = _literal(_arg(node, 0, "key"))
            if isinstance(key, str):
                effect(Kind.ENV_SET, detail=(key,))
        elif q == "os.environ.update":
            for key in _dict_keys(node):
                effect(Kind.ENV_SET, detail=(key,))
        elif method is not None and (q is None or not q.startswith(("numpy.", "random."))):
            # Methods recognised by name on receivers we cannot type.
            if method in TENSOR_RANDOM_METHODS:
                if not _own_generator(node):
                    effect(Kind.DRAW, detail=targets)
            elif method == "cuda":
                effect(Kind.CUDA)
            elif method == "to" and any(self._mentions_cuda(a.value, node) for a in node.args):
                effect(Kind.CUDA)
            elif method in CHECKPOINT_METHODS:
                effect(Kind.CHECKPOINT)
            elif method in TRAINING_METHODS:
                effect(Kind.TRAINING)
            elif method == "from_pretrained" and _adds_task_head(node.func):
                effect(Kind.MODULE_INIT, detail=("pretrained",))
        device = _arg(node, None, "device")
        if device is not None and self._mentions_cuda(device, node) and not any(
            isinstance(s, ir.Effect) and s.kind == Kind.CUDA for s in out
        ):
            effect(Kind.CUDA)

        if out and self._import_time_probe(node):
            out = [s for s in out if not (isinstance(s, ir.Effect) and s.kind in _PROBE_KINDS)]
        out.extend(self.project_call(site, spawned))
        return out

    def project_call(self, site: CallSite, spawned: cst.BaseExpression | None = None) -> list[ir.Stmt]:
        node, q = site.node, site.qualname
        out: list[ir.Stmt] = []
        args = tuple(self.value(a.value) for a in node.args if a.keyword is None and not a.star)
        kwargs = tuple((a.keyword.value, self.value(a.value)) for a in node.args if a.keyword is not None)
        if q is not None and (q.startswith(LOCAL) or _root(q) not in EXTERNAL_ROOTS):
            out.append(ir.Call(self.ref(node), q, args=args, kwargs=kwargs))
        elif q is None and isinstance(node.func, cst.Attribute):
            receiver = node.func.value
            if isinstance(receiver, cst.Name):
                out.append(ir.Call(self.ref(node), None, receiver.value, node.func.attr.value, args, kwargs))
            elif isinstance(receiver, cst.Call) and self.index.resolve(receiver.func, node) == "builtins.super":
                out.append(ir.Call(self.ref(node), None, "super", node.func.attr.value, args, kwargs))
        # Functions passed as values (callbacks, worker_init_fn=...) are reachable later.
        for arg in node.args:
            if isinstance(arg.value, (cst.Name, cst.Attribute)) and arg.value is not spawned:
                ref = self.index.resolve(arg.value, node)
                if ref and (ref.startswith(LOCAL) or _root(ref) not in EXTERNAL_ROOTS):
                    out.append(ir.FunctionRef(ref))
        return out

    def helper_effects(self, site: CallSite, helper: Helper, out: list[ir.Stmt]) -> None:
        node = site.node
        ref = self.ref(node)
        detail = (helper.seed_text, ()) if helper.seed_text else self.seed_detail(node)
        kinds = {"torch": Kind.SEED_TORCH, "random": Kind.SEED_RANDOM, "numpy": Kind.SEED_NUMPY}
        for rng in helper.seeds:
            out.append(ir.Effect(kinds[rng], ref, ir.TRUE, detail))
        if helper.claims_when is None:
            return
        if helper.claims_when == "always":
            value: ir.Value = ir.TRUE
        else:
            arg = _arg(node, helper.claim_position, helper.claims_when)
            if arg is None:
                return
            value = self.value(arg)
        if helper.enables_det_mode:
            out.append(ir.Effect(Kind.DET_MODE_WARN if helper.warn_only else Kind.DET_MODE, ref, value))
        else:
            out.append(ir.Effect(Kind.CLAIM, ref, value))
        if helper.sets_cublas:
            out.append(ir.Effect(Kind.ENV_SET, ref, value, ("CUBLAS_WORKSPACE_CONFIG",)))
        if helper.resets_benchmark:
            out.append(ir.Branch(value, (ir.Effect(Kind.BENCHMARK, ref, ir.Const(False)),), ()))

    def spawn(self, node: cst.Call, target: cst.BaseExpression, needs_method: bool, out: list[ir.Stmt]) -> None:
        qualname = self.index.resolve(target, node) if isinstance(target, (cst.Name, cst.Attribute)) else None
        if qualname:
            out.append(ir.Spawn(self.ref(node), qualname, needs_method))

    def seed_detail(self, node: cst.Call) -> tuple:
        """(seed source text, names it reads): for messages, fixes and the seed-from-a-draw trap."""
        if not node.args:
            return ("", ())
        arg = node.args[0].value
        names = tuple(sorted({n.value for n in _names_in(arg)}))
        return (expression_code(self.index.module, arg), names)

    def _feeds_seed(self, node: cst.Call, statement: cst.CSTNode | None) -> bool:
        """A draw inside a seeding call's arguments is the seed, not a consumption."""
        for ancestor in self.index.ancestors(node):
            if ancestor is statement:
                return False
            if isinstance(ancestor, cst.Call):
                q = self.index.resolve(ancestor.func, node)
                if q in SEED_CALLS or (q in self.helpers and self.helpers[q].seed_text is None):
                    return True
        return False

    def _self_attribute_values(self, at: cst.CSTNode, attribute: str) -> list[cst.BaseExpression]:
        """Every value the enclosing class's methods assign to `self.<attribute>`."""
        klass = self.index.enclosing(at, cst.ClassDef)
        if klass is None:
            return []
        key = (id(klass), attribute)
        found = self._attribute_values.get(key)
        if found is None:
            found = self._attribute_values[key] = [
                node.value
                for node in _subexpressions(klass.body)
                if isinstance(node, cst.Assign)
                for target in node.targets
                if isinstance(target.target, cst.Attribute)
                and isinstance(target.target.value, cst.Name)
                and target.target.value.value == "self"
                and target.target.attr.value == attribute
            ]
        return found

    def _import_time_probe(self, node: cst.Call) -> bool:
        """Module-level code inside `try:` under an environment condition (`if "X_TEST_DEVICE" in
        os.environ: try: torch.randn(3, device=...)`): a probe that the module runs when imported,
        to check a device works. What it draws is thrown away and the device it tries is the
        test setup's, so it is neither a draw nor the program's CUDA evidence."""
        in_try = on_env = False
        for ancestor in self.index.ancestors(node):
            if isinstance(ancestor, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
                return False
            if isinstance(ancestor, cst.Try) and ancestor.handlers:
                in_try = in_try or _contains(ancestor.body, node)
            elif isinstance(ancestor, cst.If) and self._reads_environment(ancestor.test):
                on_env = True
        return in_try and on_env

    def _reads_environment(self, test: cst.BaseExpression) -> bool:
        for sub in _subexpressions(test):
            if isinstance(sub, (cst.Name, cst.Attribute)) and self.index.resolve(sub) in ("os.environ", "os.getenv", "os.environ.get"):
                return True
        return False

    def _only_inspected(self, node: cst.Call, statement: cst.CSTNode | None) -> bool:
        """`print(torch.accelerator.current_accelerator())`, `if ....type == "mps"`: asking which
        accelerator there is puts nothing on it; keeping or using the device does."""
        for ancestor in self.index.ancestors(node):
            if ancestor is statement:
                break
            if isinstance(ancestor, (cst.Comparison, cst.FormattedString)):
                return True
            if isinstance(ancestor, cst.Call):
                q = self.index.resolve(ancestor.func, node)
                name = ancestor.func.attr.value if isinstance(ancestor.func, cst.Attribute) else None
                if q in _INSPECTING_BUILTINS or name in _REPORTING_METHODS:
                    return True
        return isinstance(statement, cst.Expr) and statement.value is node

    def _only_traced(self, names: tuple[str, ...], draw: CallSite) -> bool:
        """An example input drawn only to trace or export a model: its values shape nothing."""
        if not names or not self.index.calls_to(*TRACING_CALLS):
            return False
        uses = [
            site for site in self.index.calls
            if site.scope is draw.scope and site is not draw
            and any(_mentions(arg.value, name) for arg in site.node.args for name in names)
        ]
        return bool(uses) and all(site.qualname in TRACING_CALLS for site in uses)

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
        if isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name) and expr.value.value == "self":
            # `self.device`, set in a method of the same class (a Trainer's __init__)
            return any(self._mentions_cuda(v, v, depth + 1) for v in self._self_attribute_values(at, expr.attr.value))
        if isinstance(expr, cst.Attribute) and expr.attr.value == "type":  # `current_accelerator().type`
            return self._mentions_cuda(expr.value, at, depth + 1)
        if isinstance(expr, cst.FormattedString):
            return any(
                isinstance(part, cst.FormattedStringText) and part.value.startswith("cuda") for part in expr.parts[:1]
            )
        return False

    # -- values ------------------------------------------------------------------------
    def value(self, expr: cst.BaseExpression, name: str | None = None) -> ir.Value:
        """`name`: for an assignment's value, an opaque result is keyed by the variable's name
        (`det = cfg.get("det")`, later `if det:`) instead of generating the expression's text."""
        literal = _literal(expr, _MISSING)
        if literal is not _MISSING:
            return ir.Const(literal)
        if is_main_test(expr):
            return ir.IS_MAIN
        if isinstance(expr, cst.Name):
            return ir.Var(expr.value)
        if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Not):
            return ir.Not(self.value(expr.expression))
        if isinstance(expr, cst.Comparison) and len(expr.comparisons) == 1:
            comparison = expr.comparisons[0]
            if _is_none(comparison.comparator) and isinstance(comparison.operator, (cst.Is, cst.IsNot)):
                return ir.IsNone(self.value(expr.left), isinstance(comparison.operator, cst.IsNot))
        if isinstance(expr, cst.IfExp):
            # `True if c else False` is c; `False if c else True` is not c.
            body, orelse = _literal(expr.body, _MISSING), _literal(expr.orelse, _MISSING)
            if body is not _MISSING and orelse is not _MISSING:
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
            return expression_code(self.index.module, expr)
        except RecursionError:
            return f"<expression {id(expr)}>"  # correlates with nothing


_MISSING = object()
# `getattr(torch, current_accelerator().type)` picks a backend module; nothing runs on it yet
_INSPECTING_BUILTINS = frozenset(
    {"builtins.print", "builtins.str", "builtins.repr", "builtins.getattr", "builtins.hasattr", "builtins.isinstance"}
)
_PROBE_KINDS = frozenset({Kind.DRAW, Kind.CUDA, Kind.MODULE_INIT})


def _subexpressions(expr: cst.CSTNode):
    yield expr
    for child in expr.children:
        yield from _subexpressions(child)


def _contains(outer: cst.CSTNode, node: cst.CSTNode) -> bool:
    return any(sub is node for sub in _subexpressions(outer))


_REPORTING_METHODS = frozenset("info debug warning warn error log write echo print format".split())
# Lightning's accelerator names that put the Trainer's work on a CUDA GPU ("auto" picks one only
# when present: like torch.cuda.is_available() unused, it is not evidence by itself).
_LIGHTNING_GPU = frozenset({"gpu", "cuda"})


def _lightning_on_gpu(call: cst.Call) -> bool:
    """`Trainer(accelerator="gpu")` / `"cuda"`, or the pre-2.0 `gpus=N` (N not 0/None)."""
    accelerator = _literal(_arg(call, None, "accelerator"))
    if isinstance(accelerator, str) and accelerator.lower() in _LIGHTNING_GPU:
        return True
    gpus = _arg(call, None, "gpus")
    return gpus is not None and not _is_none(gpus) and not _is_false(gpus)


def _root(qualname: str) -> str:
    return qualname.split(".", 1)[0]


def _literal(expr: cst.BaseExpression | None, default=None):
    if isinstance(expr, cst.Name) and expr.value in ("True", "False", "None"):
        return {"True": True, "False": False, "None": None}[expr.value]
    if isinstance(expr, (cst.SimpleString, cst.ConcatenatedString)):
        value = evaluated_string(expr)
        return value if isinstance(value, str) else default
    if isinstance(expr, cst.Integer):
        try:
            return int(expr.value, 0)
        except ValueError:
            return default
    if isinstance(expr, cst.Float):
        return float(expr.value)
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Minus):
        inner = _literal(expr.expression, default)
        return -inner if isinstance(inner, (int, float)) and not isinstance(inner, bool) else default
    return default


def _own_generator(node: cst.Call) -> bool:
    """`torch.randn(3, generator=g)`: the draw uses `g`, not torch's global generator."""
    generator = _arg(node, None, "generator")
    return generator is not None and not _is_none(generator)


def _is_none(expr: cst.BaseExpression | None) -> bool:
    return isinstance(expr, cst.Name) and expr.value == "None"


def _is_false(expr: cst.BaseExpression | None) -> bool:
    return _literal(expr, _MISSING) in (False, 0)


def _subscript_string(node: cst.Subscript) -> str | None:
    if len(node.slice) != 1 or not isinstance(node.slice[0].slice, cst.Index):
        return None
    value = _literal(node.slice[0].slice.value)
    return value if isinstance(value, str) else None


def _dict_keys(call: cst.Call) -> list[str]:
    keys = []
    for arg in call.args:
        if arg.keyword is not None:
            keys.append(arg.keyword.value)
        elif isinstance(arg.value, cst.Dict):
            for element in arg.value.elements:
                if isinstance(element, cst.DictElement):
                    key = _literal(element.key)
                    if isinstance(key, str):
                        keys.append(key)
    return keys


def _is_random_transform(q: str | None) -> bool:
    if not q or not q.startswith(RANDOM_TRANSFORM_PREFIXES):
        return False
    name = q.rsplit(".", 1)[1]
    return name.startswith("Random") or name in RANDOM_TRANSFORMS


def _element(value: cst.BaseExpression, position: int, size: int) -> cst.BaseExpression | None:
    """The `position`-th element a tuple-valued expression assigns, where it can be seen."""
    if isinstance(value, (cst.Tuple, cst.List)) and len(value.elements) == size:
        return value.elements[position].value
    if isinstance(value, cst.IfExp):
        body, orelse = _element(value.body, position, size), _element(value.orelse, position, size)
        if body is not None and orelse is not None:
            return cst.IfExp(test=value.test, body=body, orelse=orelse)
    return None


# Task heads that fine-tuning adds for the user's own labels: missing from a base checkpoint, so
# initialised randomly. Generation heads (CausalLM, MaskedLM, Seq2SeqLM, ConditionalGeneration,
# ImageTextToText, ...) are part of the checkpoint they are loaded from.
_NEW_HEAD_TASKS = ("Classification", "MultipleChoice", "QuestionAnswering", "Segmentation", "ObjectDetection", "CTC", "XVector")


def _adds_task_head(func: cst.Attribute) -> bool:
    """`AutoModelForSequenceClassification.from_pretrained(...)`: a task head (transformers names
    them `...For<Task>`) for the user's labels is initialised randomly. A language-model head,
    a pretrained VAE, UNet, text encoder, tokenizer or scheduler loads everything it has: its
    weights outlive no draw (and a missing weight is an error), so it draws nothing."""
    receiver = func.value
    name = receiver.attr.value if isinstance(receiver, cst.Attribute) else getattr(receiver, "value", "")
    if not isinstance(name, str) or "For" not in name:
        return False
    task = name.split("For", 1)[1]
    return any(head in task for head in _NEW_HEAD_TASKS)


def _loads_pretrained(call: cst.Call) -> bool:
    """`resnet50(weights=...)` / `pretrained=True`: the weights come from a checkpoint."""
    weights = _arg(call, None, "weights")
    pretrained = _arg(call, None, "pretrained")
    return (weights is not None and not _is_none(weights)) or (pretrained is not None and not _is_false(pretrained) and not _is_none(pretrained))


def _mentions(expr: cst.CSTNode, name: str) -> bool:
    if isinstance(expr, cst.Name):
        return expr.value == name
    return any(_mentions(child, name) for child in expr.children)


def _names_in(expr: cst.CSTNode):
    if isinstance(expr, cst.Name):
        yield expr
        return
    for child in expr.children:
        yield from _names_in(child)


def _assigned_names(node: cst.CSTNode) -> tuple[str, ...]:
    if isinstance(node, cst.Assign):
        return tuple(t.target.value for t in node.targets if isinstance(t.target, cst.Name))
    if isinstance(node, cst.AnnAssign) and isinstance(node.target, cst.Name):
        return (node.target.value,)
    return ()
