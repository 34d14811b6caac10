"""What one call becomes in the IR: the effects of known external APIs, and project calls.

Calls are classified with the tables in known_apis.py (a seed, a determinism claim, a draw of
the global generator, CUDA use, a checkpoint load, a spawned process...), with the look-alikes
that are none: a draw that is a seed's argument, an example input drawn only to trace a model,
an accelerator only asked about, a device probe a module runs when imported. A call that may be
project code (`EXTERNAL_ROOTS` says which roots never are) becomes an ir.Call, and a function
passed as a value an ir.FunctionRef, for the interpreter to resolve.
"""

from __future__ import annotations

import libcst as cst

from torchrepro_lint.analysis.module_index import CallSite, ModuleIndex
from torchrepro_lint.analysis.names import LOCAL, dotted
from torchrepro_lint.analysis.syntax import arg as _arg
from torchrepro_lint.analysis.syntax import evaluated_string
from torchrepro_lint.project import ir
from torchrepro_lint.project.extract import attributes
from torchrepro_lint.project.extract.adapters import adapter_call_draws, config_draws, config_shown
from torchrepro_lint.project.extract.literals import is_false, is_none, literal_value
from torchrepro_lint.project.known_apis import (
    ACCELERATOR_CALLS,
    ACCELERATOR_DEVICE,
    ADAPTER,
    ADAPTER_OF_TRAINER,
    ADAPTER_OF_TRAINER_WHEN_GIVEN,
    CHECKPOINT_CALLS,
    CHECKPOINT_METHODS,
    CUDA_CALLS,
    CUDNN,
    DEFERRED_RANDOMNESS,
    DEVICE_ARGUMENT_CALLS,
    DEVICE_PROBES,
    DROPOUT,
    DROPOUT_MODULES,
    FABRIC_SEED_EVERYTHING,
    HF_TRAINING_ARGUMENTS,
    LIGHTNING_FABRIC,
    LIGHTNING_TRAINER,
    MAKES_A_SEED,
    MODEL_FACTORIES,
    MODEL_FACTORY_PREFIXES,
    NUMPY_NOT_DRAWS,
    PARAMETER_CLASSES,
    PEFT_ADAPTER_CALLS,
    PY_RANDOM_DRAWS,
    RANDOM_INIT_MODULES,
    RANDOM_TRANSFORM_PREFIXES,
    RANDOM_TRANSFORMS,
    SPAWN_FUNCTIONS,
    TENSOR_RANDOM_METHODS,
    TORCH_DRAWS,
    TRAINERS_DRAWING_ADAPTER_FIRST,
    TRAINING_METHODS,
    Helper,
    Kind,
    names_a_seed,
)

# A draw given to a PARAMETER_CLASSES as the initial value is a module's random init
# (_initializes_parameter), and so are these fills and in-place fills of a `.weight` / `.bias`
# (_fills_weights)
INIT_FUNCTIONS = "torch.nn.init."

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


def root(qualname: str) -> str:
    return qualname.split(".", 1)[0]


def _registers_by_name(node: cst.Call) -> bool:
    """`ffns.register("dmoe", func=build_dmoe)`: a `register*` method given a string key.
    (`atexit.register(f)`, `m.register_forward_hook(f)` name no key: they call `f` later.)"""
    func = node.func
    return (
        isinstance(func, cst.Attribute) and "register" in func.attr.value
        and any(isinstance(a.value, (cst.SimpleString, cst.ConcatenatedString)) for a in node.args)
    )


class CallLowering:
    """Lowering's methods for calls (lowering.Lowering derives from this class): they read the
    module's index and helpers, and Lowering's ref() and value()."""

    index: ModuleIndex
    helpers: dict[str, Helper]
    _attribute_values: dict[tuple, list[attributes.Value]]
    _pending: list[ir.AttributeOnCuda]  # device tests for the run, found by _mentions_cuda

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
            adapter = _arg(node, None, "peft_config")
            if q in TRAINERS_DRAWING_ADAPTER_FIRST and config_draws(self.index, adapter, node):
                # get_peft_model, before the trainer's seed
                shown = config_shown(self.index, adapter, node)
                effect(Kind.MODULE_INIT, detail=ADAPTER_OF_TRAINER if shown else ADAPTER_OF_TRAINER_WHEN_GIVEN)
            self.helper_effects(site, self.helpers[q], out)
        elif q is None and method == "seed_everything" and not _on_self(node.func.value):
            # `fabric.seed_everything(7)`: Lightning Fabric's method. Its receiver is rarely in
            # view (a parameter of the function given to `fabric.launch`), and a method of that
            # name that leaves torch unseeded was not found in any training code read.
            self.helper_effects(site, self.helpers[FABRIC_SEED_EVERYTHING], out)
        elif q and q.endswith(".__init__") and self._seeding_class(q[: -len(".__init__")]):
            self.helper_effects(site, self.helpers[q[: -len(".__init__")]], out)  # `Trainer.__init__(self, ...)`
        elif q in PEFT_ADAPTER_CALLS:
            if adapter_call_draws(self.index, node, *PEFT_ADAPTER_CALLS[q]):
                effect(Kind.MODULE_INIT, detail=ADAPTER)
        elif q == "torch.manual_seed":
            effect(Kind.SEED_TORCH, detail=self.seed_detail(node))
        elif q in ("torch.cuda.manual_seed", "torch.cuda.manual_seed_all"):
            effect(Kind.SEED_CUDA, detail=self.seed_detail(node))
        elif q in ("random.seed", "numpy.random.seed"):
            arg = _arg(node, 0, "a" if q == "random.seed" else "seed")
            if arg is not None and not is_none(arg):
                effect(Kind.SEED_RANDOM if q == "random.seed" else Kind.SEED_NUMPY, detail=self.seed_detail(node))
        elif q == "torch.use_deterministic_algorithms":
            mode = _arg(node, 0, "mode")
            warn = _arg(node, 1, "warn_only")
            kind = Kind.DET_MODE if warn is None or is_false(warn) else Kind.DET_MODE_WARN
            effect(kind, self.value(mode) if mode is not None else ir.UNKNOWN)
        elif q == "torch.set_deterministic_debug_mode":
            mode = _arg(node, 0, "debug_mode")
            literal = literal_value(mode) if mode is not None else None
            if literal in (2, "error"):
                effect(Kind.DET_MODE)
            elif literal in (1, "warn") or mode is not None and literal is None:
                effect(Kind.DET_MODE_WARN, ir.TRUE if literal is not None else self.value(mode))
        elif q == LIGHTNING_TRAINER:
            deterministic = _arg(node, None, "deterministic")
            if deterministic is not None:
                kind = Kind.DET_MODE_WARN if literal_value(deterministic) == "warn" else Kind.DET_MODE
                value = ir.TRUE if literal_value(deterministic) == "warn" else self.value(deterministic)
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
            elif q.startswith(INIT_FUNCTIONS) or self._initializes_parameter(node):
                effect(Kind.MODULE_INIT)  # what a checkpoint loaded later replaces, like a layer's init
            elif not self._feeds_seed(node, site.statement) and not self._only_traced(targets, site):
                effect(Kind.DRAW, detail=targets + self._seed_made(targets, site))
        elif q in RANDOM_INIT_MODULES or q in MODEL_FACTORIES or (q and q.startswith(MODEL_FACTORY_PREFIXES)):
            effect(Kind.MODULE_INIT, detail=("pretrained",) if _loads_pretrained(node) else ())
        elif q in DEFERRED_RANDOMNESS or _is_random_transform(q):
            effect(Kind.RANDOMNESS, detail=DROPOUT if q in DROPOUT_MODULES else ())
        elif q == "torch.utils.data.DataLoader":
            shuffle = _arg(node, 2, "shuffle")
            if shuffle is not None and not is_false(shuffle) and not is_none(shuffle):
                effect(Kind.RANDOMNESS)
        elif q in PY_RANDOM_DRAWS:
            if not _makes_a_seed(targets):
                effect(Kind.DRAW_RANDOM)
        elif q and q.startswith("numpy.random.") and q.count(".") == 2 and q.rsplit(".", 1)[1] not in NUMPY_NOT_DRAWS:
            if not _makes_a_seed(targets):
                effect(Kind.DRAW_NUMPY)
        elif q in SPAWN_FUNCTIONS:
            target = _arg(node, 0, "fn")
            start_method = _arg(node, None, "start_method")
            spawn = q.endswith(".spawn") or start_method is None or literal_value(start_method) == "spawn"
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
            if literal_value(_arg(node, 0, "method")) == "spawn":
                effect(Kind.SPAWN_METHOD)
        elif q in ACCELERATOR_CALLS:
            effect(Kind.CUDA)
        elif q == ACCELERATOR_DEVICE:
            if not self._only_inspected(node, site.statement):
                effect(Kind.CUDA)
        elif q in DEVICE_ARGUMENT_CALLS:
            position, keyword, default = DEVICE_ARGUMENT_CALLS[q]
            device = _arg(node, position, keyword)
            on_cuda = self._cuda_value(device, node) if device is not None else (ir.TRUE if default == "cuda" else None)
            if on_cuda is not None and not is_false(_arg(node, None, "enabled")):
                effect(Kind.CUDA, on_cuda)
        elif q in CUDA_CALLS or q == "torch.nn.parallel.DistributedDataParallel" and _arg(node, None, "device_ids"):
            if not (q == "torch.cuda.synchronize" and self._where_available(node)):
                effect(Kind.CUDA)
        elif q == "torch.distributed.init_process_group":
            if literal_value(_arg(node, 0, "backend")) == "nccl":
                effect(Kind.CUDA)
        elif q == "torch.device":
            on_cuda = self._cuda_value(_arg(node, 0, "type"), node)
            if on_cuda is not None:
                effect(Kind.CUDA, on_cuda)
        elif q in EXPORT_CALLS:
            effect(Kind.EXPORT)
        elif q in CHECKPOINT_CALLS:
            effect(Kind.CHECKPOINT)
        elif q and q.startswith("torch.optim.") and q.rsplit(".", 1)[1][:1].isupper():
            effect(Kind.TRAINING, detail=("optimizer",))
        elif q in ("os.environ.setdefault", "os.putenv"):
            key = literal_value(_arg(node, 0, "key"))
            if isinstance(key, str):
                effect(Kind.ENV_SET, detail=(key,))
        elif q == "os.environ.update":
            for key in _dict_keys(node):
                effect(Kind.ENV_SET, detail=(key,))
        elif method is not None and (q is None or not q.startswith(("numpy.", "random."))):
            # Methods recognised by name on receivers we cannot type.
            if method in TENSOR_RANDOM_METHODS:
                if _fills_weights(node):
                    effect(Kind.MODULE_INIT)  # `m.weight.data.normal_(0, 0.02)`: an init, as above
                elif not _own_generator(node):
                    effect(Kind.DRAW, detail=targets + self._seed_made(targets, site))
            elif method == "cuda":
                effect(Kind.CUDA)
            elif method == "to" and (on_cuda := self._cuda_value([a.value for a in node.args], node)) is not None:
                effect(Kind.CUDA, on_cuda)
            elif method in CHECKPOINT_METHODS:
                effect(Kind.CHECKPOINT)
            elif method in TRAINING_METHODS:
                effect(Kind.TRAINING)
            elif method == "from_pretrained" and _adds_task_head(node.func) and not _loads_reward_model(node):
                effect(Kind.MODULE_INIT, detail=("pretrained",))
        # Any call given a CUDA `device=`: torch's factories and modules, `.to(device=...)`, a
        # framework's or the project's own (TRP205's decisions say why this stays this wide).
        device = _arg(node, None, "device")
        if device is not None and not any(isinstance(s, ir.Effect) and s.kind == Kind.CUDA for s in out):
            on_cuda = self._cuda_value(device, node)
            if on_cuda is not None:
                effect(Kind.CUDA, on_cuda)

        if out and self._import_time_probe(node):
            out = [s for s in out if not (isinstance(s, ir.Effect) and s.kind in _PROBE_KINDS)]
        out.extend(self.project_call(site, spawned))
        return out

    def project_call(self, site: CallSite, spawned: cst.BaseExpression | None = None) -> list[ir.Stmt]:
        node, q = site.node, site.qualname
        out: list[ir.Stmt] = []

        def call(receiver=None, method=None) -> ir.Call:
            # The arguments' values only for a call the interpreter follows (an external call's
            # would be thrown away, and an opaque value costs its expression's text).
            args = tuple(self.value(a.value) for a in node.args if a.keyword is None and not a.star)
            kwargs = tuple((a.keyword.value, self.value(a.value)) for a in node.args if a.keyword is not None)
            # A project subclass of a TRL trainer is followed by the interpreter: what its config
            # draws can only be read here.
            adapter = _arg(node, None, "peft_config")
            draws = config_draws(self.index, adapter, node) if adapter is not None and not is_none(adapter) else None
            shown = draws is True and config_shown(self.index, adapter, node)
            return ir.Call(self.ref(node), q, receiver, method, args, kwargs, draws, shown)

        if q is not None and (q.startswith(LOCAL) or root(q) not in EXTERNAL_ROOTS):
            out.append(call())
        elif q is None and isinstance(node.func, cst.Attribute):
            receiver = node.func.value
            if isinstance(receiver, cst.Name):
                out.append(call(receiver.value, node.func.attr.value))
            elif isinstance(receiver, cst.Call) and self.index.resolve(receiver.func, node) == "builtins.super":
                out.append(call("super", node.func.attr.value))
            elif isinstance(receiver, cst.Call) and _project_name(built := self.index.resolve(receiver.func, receiver)):
                # `Trainer(cfg).fit(model)`: the method of the object just built (its own call ran first)
                instance = f"<{built}()>"  # a name no Python variable has
                out.append(ir.Assign(instance, ir.Instance(built)))
                out.append(call(instance, node.func.attr.value))
        elif q is None and isinstance(node.func, cst.Name):
            out.extend(self._bound_method_calls(node.func, node, call))
        # Functions passed as values (callbacks, worker_init_fn=...) are reachable later; not
        # those filed in a registry under a name, which a run picks by a string, if ever.
        for arg in () if _registers_by_name(node) else node.args:
            if isinstance(arg.value, (cst.Name, cst.Attribute)) and arg.value is not spawned:
                ref = self.index.resolve(arg.value, node)
                if ref and (ref.startswith(LOCAL) or root(ref) not in EXTERNAL_ROOTS):
                    out.append(ir.FunctionRef(ref))
        return out

    def _bound_method_calls(self, name: cst.Name, node: cst.Call, call) -> list[ir.Stmt]:
        """`sample_fn(...)` after `sample_fn = diffusion.p_sample_loop` (or `a.f if c else a.g`,
        as guided-diffusion's sampling scripts choose a sampler): the method on that variable,
        followed as `diffusion.p_sample_loop(...)` would be. The name's last assignment in the
        scope is the one the index keeps."""
        value = self.index.assigned_value(name.value, node)
        options = (value.body, value.orelse) if isinstance(value, cst.IfExp) else (value,)
        if not all(isinstance(o, cst.Attribute) and isinstance(o.value, cst.Name) for o in options):
            return []
        calls = [call(o.value.value, o.attr.value) for o in options]
        if len(calls) == 1:
            return calls
        return [ir.Branch(self.value(value.test), (calls[0],), (calls[1],))]

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

    def _seeding_class(self, qualname: str) -> bool:
        """A framework class whose constructor seeds (Hugging Face's trainers)."""
        helper = self.helpers.get(qualname)
        return helper is not None and helper.seed_text is not None

    def spawn(self, node: cst.Call, target: cst.BaseExpression, needs_method: bool, out: list[ir.Stmt]) -> None:
        qualname = self.index.resolve(target, node) if isinstance(target, (cst.Name, cst.Attribute)) else None
        if qualname:
            out.append(ir.Spawn(self.ref(node), qualname, needs_method))

    def seed_detail(self, node: cst.Call) -> tuple:
        """(seed source text, names it reads): for messages, fixes and the seed-from-a-draw trap."""
        if not node.args:
            return ("", ())
        arg = node.args[0].value
        return (self._code(arg), tuple(sorted(self._names_flowing_into(arg, node))))

    def _names_flowing_into(self, expr: cst.BaseExpression, node: cst.Call) -> set[str]:
        """The names `expr` reads, and those their assignments in the same scope read, and so
        on: `seed = broadcast(drawn).item(); local = seed + rank; manual_seed(local)` seeds from
        `drawn` (torchtune's set_seed draws a seed when none is given). A name's last assignment
        in the scope is the one the index keeps; unpacked names are not followed."""
        names = {n.value for n in _names_in(expr)}
        bindings = self.index.enclosing_scope(node).bindings
        frontier = list(names)
        while frontier:
            value = bindings.get(frontier.pop())
            if isinstance(value, cst.CSTNode):
                for read in _names_in(value):
                    if read.value not in names:
                        names.add(read.value)
                        frontier.append(read.value)
        return names

    def _seed_made(self, targets: tuple[str, ...], draw: CallSite) -> tuple[str, ...]:
        """(MAKES_A_SEED,) for a draw assigned to a seed's variable (`seed = torch.randint(1 << 31,
        size=[])`): it makes the seed, whatever route the value takes to the seeding call (EDM hands
        it to its training loop in a config dict, which seeds NumPy with it and torch from NumPy).
        Not where that variable goes to an object's `.manual_seed(...)` in the same scope:
        accelerate seeds a DataLoader's generator from torch's global one, so the data order
        follows that draw."""
        named = {t for t in targets if names_a_seed(t)}
        if not named:
            return ()
        for site in self.index.calls:
            func = site.node.func
            if (
                site.scope is draw.scope
                and isinstance(func, cst.Attribute)
                and func.attr.value == "manual_seed"
                and site.qualname is None
                and any(isinstance(a.value, cst.Name) and a.value.value in named for a in site.node.args)
            ):
                return ()
        return (MAKES_A_SEED,)

    def _initializes_parameter(self, node: cst.Call) -> bool:
        """`nn.Parameter(torch.randn(n, d) / d ** 0.5)`: the draw is a parameter's initial value
        (open_clip's attention pool), as much a module's random init as `nn.Linear(...)`'s."""
        child: cst.CSTNode = node
        for ancestor in self.index.ancestors(node):
            if isinstance(ancestor, (cst.BinaryOperation, cst.UnaryOperation)):
                child = ancestor
                continue
            if isinstance(ancestor, cst.Arg) and ancestor.value is child and ancestor.keyword is None:
                call = self.index.parents.get(ancestor)
                return isinstance(call, cst.Call) and call.args[0] is ancestor and self.index.resolve(call.func, call) in PARAMETER_CLASSES
            return False
        return False

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
        if not _project_name(qualname) or qualname.startswith(LOCAL):
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

    def _import_time_probe(self, node: cst.Call) -> bool:
        """Module-level code inside `try:` under an environment condition (`if "X_TEST_DEVICE" in
        os.environ: try: torch.randn(3, device=...)`): a probe that the module runs when imported,
        to check a device works. What it draws is thrown away and the device it tries is the
        test setup's, so it is neither a draw nor the program's CUDA evidence."""
        ancestors = list(self.index.ancestors(node))
        if any(isinstance(ancestor, (cst.FunctionDef, cst.ClassDef, cst.Lambda)) for ancestor in ancestors):
            return False  # (first: a draw in main() is inside its 700 lines of `try` and `if`s)
        in_try = on_env = False
        for ancestor in ancestors:
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

    def _where_available(self, node: cst.Call) -> bool:
        """Inside `if torch.cuda.is_available():` (a timing helper's `synchronize()`): it runs
        only where a GPU is, and waits for work put there by something else, if any."""
        child: cst.CSTNode = node
        for ancestor in self.index.ancestors(node):
            if isinstance(ancestor, (cst.FunctionDef, cst.ClassDef)):
                return False
            if isinstance(ancestor, cst.If) and child is ancestor.body:
                test = ancestor.test
                if isinstance(test, cst.Call) and isinstance(test.func, (cst.Name, cst.Attribute)):
                    if self.index.resolve(test.func, test) in DEVICE_PROBES:
                        return True
            child = ancestor
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


# `getattr(torch, current_accelerator().type)` picks a backend module; nothing runs on it yet
_INSPECTING_BUILTINS = frozenset(
    {"builtins.print", "builtins.str", "builtins.repr", "builtins.getattr", "builtins.hasattr", "builtins.isinstance"}
)
_PROBE_KINDS = frozenset({Kind.DRAW, Kind.CUDA, Kind.MODULE_INIT})


def _on_self(receiver: cst.BaseExpression) -> bool:
    """`self.method()` / `super().method()`: the project's own method, which the interpreter follows."""
    if isinstance(receiver, cst.Name):
        return receiver.value in ("self", "cls")
    return isinstance(receiver, cst.Call) and isinstance(receiver.func, cst.Name) and receiver.func.value == "super"


def _project_name(qualname: str | None) -> bool:
    return bool(qualname) and (qualname.startswith(LOCAL) or root(qualname) not in EXTERNAL_ROOTS)


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
    accelerator = literal_value(_arg(call, None, "accelerator"))
    if isinstance(accelerator, str) and accelerator.lower() in _LIGHTNING_GPU:
        return True
    gpus = _arg(call, None, "gpus")
    return gpus is not None and not is_none(gpus) and not is_false(gpus)


def _own_generator(node: cst.Call) -> bool:
    """`torch.randn(3, generator=g)`: the draw uses `g`, not torch's global generator."""
    generator = _arg(node, None, "generator")
    return generator is not None and not is_none(generator)


def _dict_keys(call: cst.Call) -> list[str]:
    keys = []
    for arg in call.args:
        if arg.keyword is not None:
            keys.append(arg.keyword.value)
        elif isinstance(arg.value, cst.Dict):
            for element in arg.value.elements:
                if isinstance(element, cst.DictElement):
                    key = literal_value(element.key)
                    if isinstance(key, str):
                        keys.append(key)
    return keys


def _is_random_transform(q: str | None) -> bool:
    if not q or not q.startswith(RANDOM_TRANSFORM_PREFIXES):
        return False
    name = q.rsplit(".", 1)[1]
    return name.startswith("Random") or name in RANDOM_TRANSFORMS


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


def _loads_reward_model(call: cst.Call) -> bool:
    """`AutoModelForSequenceClassification.from_pretrained(reward_model_path, num_labels=1)`: a
    checkpoint its code names a reward model (TRL's trainers load `reward_funcs` given as strings
    this way) is a trained scorer, whose head comes with it."""
    source = _arg(call, 0, "pretrained_model_name_or_path")
    name = dotted(source) if source is not None else None
    return name is not None and "reward" in name.rsplit(".", 1)[-1].lower()


def _loads_pretrained(call: cst.Call) -> bool:
    """`resnet50(weights=...)` / `pretrained=True`: the weights come from a checkpoint."""
    weights = _arg(call, None, "weights")
    pretrained = _arg(call, None, "pretrained")
    return (weights is not None and not is_none(weights)) or (pretrained is not None and not is_false(pretrained) and not is_none(pretrained))


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


def _fills_weights(node: cst.Call) -> bool:
    """`<...>.weight.normal_(...)`, `<...>.bias.data.uniform_(...)`: a layer's parameters filled
    in place (an init method's way), with no generator of its own (which would not draw from
    torch's)."""
    receiver = node.func.value if isinstance(node.func, cst.Attribute) else None
    if isinstance(receiver, cst.Attribute) and receiver.attr.value == "data":
        receiver = receiver.value
    return (
        isinstance(receiver, cst.Attribute)
        and (receiver.attr.value.endswith("weight") or receiver.attr.value == "bias")
        and not _own_generator(node)
    )


def _makes_a_seed(targets: tuple[str, ...]) -> bool:
    """`seed = args.seed if args.seed is not None else random.randint(0, 2**32 - 1)`: a draw
    from Python's or NumPy's generator that makes the run's seed (logged and given to torch, as
    rules.md's TRP104 trap describes) is no data stream that their own seeding would fix."""
    return any(names_a_seed(name) for name in targets)
