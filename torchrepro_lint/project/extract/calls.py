"""What one call becomes in the IR: the effects of known external APIs, and project calls.

Calls are classified with the tables in known_apis.py (a seed, a determinism claim, a draw of
the global generator, CUDA use, a checkpoint load, a spawned process...), with the look-alikes
that are none: a draw that is a seed's argument, an example input drawn only to trace a model,
an accelerator only asked about, a device probe a module runs when imported. A call that may be
project code (call_syntax.EXTERNAL_ROOTS says which roots never are) becomes an ir.Call, and a
function passed as a value an ir.FunctionRef, for the interpreter to resolve. What a call's own
syntax says is call_syntax.py's; whether a device argument names CUDA, devices.py's.
"""

from __future__ import annotations

from functools import cached_property

import libcst as cst

from torchrepro_lint.analysis.literals import is_false, is_none, literal_value
from torchrepro_lint.analysis.module_index import CallSite, ModuleIndex
from torchrepro_lint.analysis.names import LOCAL
from torchrepro_lint.analysis.receivers import PARAMETER_CLASSES
from torchrepro_lint.analysis.syntax import arg as _arg
from torchrepro_lint.project import ir
from torchrepro_lint.project.extract.adapters import add_adapter_draws, adapter_call_draws, config_draws, config_shown
from torchrepro_lint.project.extract.call_syntax import (
    EXTERNAL_ROOTS,
    adds_task_head,
    contains_node,
    dict_keys,
    fills_weights,
    is_project_name,
    is_random_transform,
    lightning_on_gpu,
    loads_pretrained,
    loads_reward_model,
    makes_a_seed,
    mentions_name,
    names_in,
    on_self,
    own_generator,
    root,
    subexpressions,
)
from torchrepro_lint.project.extract.cli_apps import Apps, command_call, find_apps, one_of, runner_components
from torchrepro_lint.project.extract.devices import DeviceLowering
from torchrepro_lint.project.extract.empty_init import init_function_detail, module_init_detail, on_meta_device
from torchrepro_lint.project.extract.resumes import resume_statements  # TRP108
from torchrepro_lint.project.extract.autotune import autotune_statements  # TRP207
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
    INIT_TENSOR_FILL,
    LIGHTNING_FABRIC,
    LIGHTNING_TRAINER,
    MAKES_A_SEED,
    MODEL_FACTORIES,
    MODEL_FACTORY_PREFIXES,
    NUMPY_NOT_DRAWS,
    PEFT_ADAPTER_CALLS,
    PY_RANDOM_DRAWS,
    RANDOM_INIT_MODULES,
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
# (fills_weights)
INIT_FUNCTIONS = "torch.nn.init."

TRACING_CALLS = frozenset(
    {"torch.jit.trace", "torch.jit.trace_module", "torch.onnx.export", "torch.export.export", "torch.fx.symbolic_trace"}
)
# Calls that write an exported model: their example inputs do not change what is written.
EXPORT_CALLS = frozenset({"torch.onnx.export", "torch.onnx.dynamo_export", "torch.jit.save", "torch.export.save"})
SEED_CALLS = frozenset({"torch.manual_seed", "torch.cuda.manual_seed", "torch.cuda.manual_seed_all"})


def _registers_by_name(node: cst.Call) -> bool:
    """`ffns.register("dmoe", func=build_dmoe)`: a `register*` method given a string key.
    (`atexit.register(f)`, `m.register_forward_hook(f)` name no key: they call `f` later.)"""
    func = node.func
    return (
        isinstance(func, cst.Attribute) and "register" in func.attr.value
        and any(isinstance(a.value, (cst.SimpleString, cst.ConcatenatedString)) for a in node.args)
    )


class CallLowering(DeviceLowering):
    """Lowering's methods for calls (lowering.Lowering derives from this class): they read the
    module's index and helpers, Lowering's ref() and value(), and the device evidence of
    devices.py."""

    index: ModuleIndex
    helpers: dict[str, Helper]

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
        elif q is None and method == "seed_everything" and not on_self(node.func.value):
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
            if lightning_on_gpu(node):
                effect(Kind.CUDA)
        elif q in LIGHTNING_FABRIC:
            if lightning_on_gpu(node):  # Fabric(accelerator="cuda"|"gpu"); no determinism switch
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
            if own_generator(node) or on_meta_device(self.index, node):
                pass  # `generator=g`: draws from g, not from torch's global generator; `device="meta"`: none
            elif q.startswith(INIT_FUNCTIONS) or self._initializes_parameter(node):
                # what a checkpoint loaded later replaces, like a layer's init
                effect(Kind.MODULE_INIT, detail=init_function_detail(q))
            elif not self._feeds_seed(node, site.statement) and not self._only_traced(targets, site):
                effect(Kind.DRAW, detail=targets + self._seed_made(targets, site))
        elif q in RANDOM_INIT_MODULES or q in MODEL_FACTORIES or (q and q.startswith(MODEL_FACTORY_PREFIXES)):
            if not (q in RANDOM_INIT_MODULES and on_meta_device(self.index, node)):
                effect(Kind.MODULE_INIT, detail=module_init_detail(q, loads_pretrained(node)))
        elif q in DEFERRED_RANDOMNESS or is_random_transform(q):
            effect(Kind.RANDOMNESS, detail=DROPOUT if q in DROPOUT_MODULES else ())
        elif q == "torch.utils.data.DataLoader":
            shuffle = _arg(node, 2, "shuffle")
            if shuffle is not None and not is_false(shuffle) and not is_none(shuffle):
                effect(Kind.RANDOMNESS)
        elif q in PY_RANDOM_DRAWS:
            if not makes_a_seed(targets):
                effect(Kind.DRAW_RANDOM)
        elif q and q.startswith("numpy.random.") and q.count(".") == 2 and q.rsplit(".", 1)[1] not in NUMPY_NOT_DRAWS:
            if not makes_a_seed(targets):
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
            for key in dict_keys(node):
                effect(Kind.ENV_SET, detail=(key,))
        elif method is not None and (q is None or not q.startswith(("numpy.", "random."))):
            # Methods recognised by name on receivers we cannot type.
            if method in TENSOR_RANDOM_METHODS:
                if fills_weights(node):
                    effect(Kind.MODULE_INIT, detail=(INIT_TENSOR_FILL,))  # `m.weight.data.normal_(0, 0.02)`: an init, as above
                elif not own_generator(node):
                    effect(Kind.DRAW, detail=targets + self._seed_made(targets, site))
            elif method == "cuda":
                effect(Kind.CUDA)
            elif method == "to" and (on_cuda := self._cuda_value([a.value for a in node.args], node)) is not None:
                effect(Kind.CUDA, on_cuda)
            elif method in CHECKPOINT_METHODS:
                effect(Kind.CHECKPOINT)
            elif method in TRAINING_METHODS:
                effect(Kind.TRAINING)
            elif method == "from_pretrained" and adds_task_head(node.func) and not loads_reward_model(node):
                effect(Kind.MODULE_INIT, detail=("pretrained",))
            elif method == "add_adapter" and add_adapter_draws(self.index, node):
                effect(Kind.MODULE_INIT, detail=ADAPTER)  # transformers', diffusers' or PEFT's: injects adapters
        # Any call given a CUDA `device=`: torch's factories and modules, `.to(device=...)`, a
        # framework's or the project's own (TRP205's decisions say why this stays this wide).
        device = _arg(node, None, "device")
        if device is not None and not any(isinstance(s, ir.Effect) and s.kind == Kind.CUDA for s in out):
            on_cuda = self._cuda_value(device, node)
            if on_cuda is not None:
                effect(Kind.CUDA, on_cuda)
        out.extend(resume_statements(self.index, site, method, self.value, self.ref))  # TRP108: resumes, RNG restores
        out.extend(autotune_statements(self.index, site, method, self.value, self.ref))  # TRP207: compile autotuning

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

        apps = self.cli_apps
        invoked = apps.invoked(self.index, node) if apps.apps else None
        given, runs = runner_components(self.index, node, q)
        if invoked is not None:  # `app()`, `cli.main()`: what the app runs (cli_apps.py), not its arguments
            out.append(ir.Call(self.ref(node), LOCAL + invoked, None, None, (), ()))
        elif runs:  # `fire.Fire(main)`, `CLI([fit, test])`: one of them runs now, given the command line
            ref = self.ref(node)
            out.extend(one_of([(command_call(target, ref),) for target in runs]))
        elif q is not None and (q.startswith(LOCAL) or root(q) not in EXTERNAL_ROOTS):
            out.append(call())
        elif q is None and isinstance(node.func, cst.Attribute):
            receiver = node.func.value
            if isinstance(receiver, cst.Name):
                out.append(call(receiver.value, node.func.attr.value))
            elif isinstance(receiver, cst.Call) and self.index.resolve(receiver.func, node) == "builtins.super":
                out.append(call("super", node.func.attr.value))
            elif isinstance(receiver, cst.Call) and is_project_name(built := self.index.resolve(receiver.func, receiver)):
                # `Trainer(cfg).fit(model)`: the method of the object just built (its own call ran first)
                instance = f"<{built}()>"  # a name no Python variable has
                out.append(ir.Assign(instance, ir.Instance(built)))
                out.append(call(instance, node.func.attr.value))
        elif q is None and isinstance(node.func, cst.Name):
            out.extend(self._bound_method_calls(node.func, node, call))
        # Functions passed as values (callbacks, worker_init_fn=...) are reachable later; not
        # those filed in a registry under a name, which a run picks by a string, if ever, nor
        # commands filed in a command-line app, which run when the app does (cli_apps.py).
        for arg in () if _registers_by_name(node) or id(node) in apps.registering else node.args:
            if isinstance(arg.value, (cst.Name, cst.Attribute)) and arg.value is not spawned and arg.value is not given:
                ref = self.index.resolve(arg.value, node)
                if ref and (ref.startswith(LOCAL) or root(ref) not in EXTERNAL_ROOTS):
                    out.append(ir.FunctionRef(ref))
        return out

    @cached_property
    def cli_apps(self) -> Apps:
        return find_apps(self.index)

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
        names = {n.value for n in names_in(expr)}
        bindings = self.index.enclosing_scope(node).bindings
        frontier = list(names)
        while frontier:
            value = bindings.get(frontier.pop())
            if isinstance(value, cst.CSTNode):
                for read in names_in(value):
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
                in_try = in_try or contains_node(ancestor.body, node)
            elif isinstance(ancestor, cst.If) and self._reads_environment(ancestor.test):
                on_env = True
        return in_try and on_env

    def _reads_environment(self, test: cst.BaseExpression) -> bool:
        for sub in subexpressions(test):
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
            and any(mentions_name(arg.value, name) for arg in site.node.args for name in names)
        ]
        return bool(uses) and all(site.qualname in TRACING_CALLS for site in uses)


# `getattr(torch, current_accelerator().type)` picks a backend module; nothing runs on it yet
_INSPECTING_BUILTINS = frozenset(
    {"builtins.print", "builtins.str", "builtins.repr", "builtins.getattr", "builtins.hasattr", "builtins.isinstance"}
)
_PROBE_KINDS = frozenset({Kind.DRAW, Kind.CUDA, Kind.MODULE_INIT})

_REPORTING_METHODS = frozenset("info debug warning warn error log write echo print format".split())
