"""What a call does to a resumed run (TRP108): restores an optimizer's state from a checkpoint,
restores an RNG state, steps an optimizer; and `exec` of a configuration file at a module's top
level, which may rebind the module's settings.

Read in the frameworks' sources (transformers at 000945a9, accelerate at 16cb6eb8, Lightning 2.6.2):

- Hugging Face's `Trainer.train(resume_from_checkpoint=...)` restores Python's, NumPy's, torch's
  and every device's RNG state (transformers/trainer.py: `Trainer._load_rng_state`, called from
  `_inner_training_loop` when `resume_from_checkpoint is not None`);
- Accelerate's `Accelerator.load_state` restores them too (accelerate/checkpointing.py:
  `load_accelerator_state`, "Random states": `random.setstate`, `np.random.set_state`,
  `torch.set_rng_state`, `torch.cuda.set_rng_state_all`);
- Lightning's `Trainer.fit(ckpt_path=...)` restores the model, callbacks, loops, precision
  plugin, optimizers and schedulers, and no RNG state (lightning/pytorch/trainer/connectors/
  checkpoint_connector.py: `_CheckpointConnector.restore`, `restore_training_state`; its
  `_set_rng_states` is only called by `isolate_rng` and the multiprocessing launcher);
- Fabric's `load(path, state)` restores the objects in `state`, optimizers included, and no RNG
  state (lightning/fabric/fabric.py: `Fabric.load`; strategies/strategy.py: `load_checkpoint`).
"""

from __future__ import annotations

import re

import libcst as cst

from torchrepro_lint.analysis.literals import MISSING, is_false, is_none, literal_value
from torchrepro_lint.analysis.module_index import CallSite, ModuleIndex
from torchrepro_lint.analysis.syntax import arg as _arg
from torchrepro_lint.project import ir
from torchrepro_lint.project.known_apis import LIGHTNING_FABRIC, RNG_RESTORE_CALLS, RNG_RESTORE_METHODS, Kind

# Constructors of optimizers (TRP603 reads the same families), and of RNG objects whose
# `set_state` / `setstate` restores them.
_OPTIMIZER_PREFIXES = ("torch.optim.", "apex.optimizers.", "bitsandbytes.optim.", "torch_optimizer.", "timm.optim.")
_NOT_OPTIMIZERS = ("torch.optim.lr_scheduler.", "torch.optim.swa_utils.")
_RNG_OBJECTS = frozenset(
    {"torch.Generator", "numpy.random.RandomState", "numpy.random.default_rng", "numpy.random.Generator", "random.Random"}
)
# A name that says it holds an optimizer: `optimizer`, `optim`, `g_optim`, `opt`, `opt_d`, `d_opt`
# (not `optimized_model`, `unoptimized_model`, `optimization_config`)
_OPTIMIZER_NAME = re.compile(r"optim(?!iz(ed|ation))|(^|_)opt(_|\d|$)")
_RNG_NAME = re.compile(r"rng|random|generator|(^|_)gen(_|\d|$)")
_ACCELERATE_RESTORES = frozenset({"accelerate.checkpointing.load_accelerator_state"})

# OPTIMIZER_RESTORE details: the call trains on (Lightning's fit); Fabric's load
RESUMES_TRAIN = ("trains",)
RESUMES_BY_FABRIC = ("fabric",)


def resume_statements(index: ModuleIndex, site: CallSite, method: str | None, value, ref) -> list[ir.Stmt]:
    """The TRP108 statements of one call (`value`: the lowering's value of an expression; `ref`:
    the ref of a node, asked only for a call that has an effect here)."""
    node, q = site.node, site.qualname
    ref_effect = lambda kind, condition=ir.TRUE, detail=(): ir.Effect(kind, ref(node), condition, detail)  # noqa: E731
    if q in RNG_RESTORE_CALLS or q in _ACCELERATE_RESTORES:
        return [ref_effect(Kind.RNG_RESTORE)]
    if q == "builtins.exec":
        return _exec_rebinds(index, node)
    if method is None or q is not None or not isinstance(node.func, cst.Attribute):
        return []
    receiver = node.func.value
    if method in RNG_RESTORE_METHODS and _restores_rng_object(index, receiver, method, node):
        return [ref_effect(Kind.RNG_RESTORE)]
    if method == "load_state_dict" and names_optimizer(index, receiver, node):
        return [ref_effect(Kind.OPTIMIZER_RESTORE)]
    if method in ("step", "zero_grad") and (
        names_optimizer(index, receiver, node)
        or method == "step" and node.args and names_optimizer(index, node.args[0].value, node)  # `scaler.step(optimizer)`
    ):
        return [ref_effect(Kind.OPTIMIZER_STEP)]
    if method == "load_state" and _built_by(index, receiver, node, ("accelerate.Accelerator",), "accelerator"):
        return [ref_effect(Kind.RNG_RESTORE)]
    if method == "train":
        resume = _arg(node, None, "resume_from_checkpoint")
        if resume is not None and not is_none(resume) and not is_false(resume):
            return [ref_effect(Kind.RNG_RESTORE, value(resume))]
    if method == "fit":
        checkpoint = _arg(node, None, "ckpt_path")
        if checkpoint is not None and not is_none(checkpoint):
            return [ref_effect(Kind.OPTIMIZER_RESTORE, value(checkpoint), RESUMES_TRAIN)]
    if method == "load" and _built_by(index, receiver, node, tuple(LIGHTNING_FABRIC), "fabric"):
        state = _arg(node, 1, "state")
        if state is not None and _holds_optimizer(index, state, node):
            return [ref_effect(Kind.OPTIMIZER_RESTORE, detail=RESUMES_BY_FABRIC)]
    return []


def names_optimizer(index: ModuleIndex, expr: cst.BaseExpression, at: cst.CSTNode) -> bool:
    """`optimizer`, `self.optimizer`, `optimizers[0]`, `opt_g`, or a name built by an optimizer's
    constructor in view. Not a scheduler (`optim_scheduler`), a scaler or a model (`optimized_model`)."""
    while isinstance(expr, cst.Subscript):
        expr = expr.value
    if isinstance(expr, cst.Name):
        name = expr.value
    elif isinstance(expr, cst.Attribute):
        name = expr.attr.value
    else:
        return False
    lowered = name.lower()
    if "sched" in lowered or "scaler" in lowered or "model" in lowered:
        return False
    if _OPTIMIZER_NAME.search(lowered):
        return True
    if isinstance(expr, cst.Name):
        built = index.assigned_value(name, at)
        if isinstance(built, cst.Call):
            q = index.resolve(built.func, built) or ""
            return q.startswith(_OPTIMIZER_PREFIXES) and not q.startswith(_NOT_OPTIMIZERS)
    return False


def _restores_rng_object(index: ModuleIndex, receiver: cst.BaseExpression, method: str, at: cst.CSTNode) -> bool:
    """`xm.set_rng_state(...)`, `gen.set_state(saved)` on a generator: not `iterator.set_state(...)`."""
    if method.startswith("set_rng_state"):
        return True
    return _built_by(index, receiver, at, tuple(_RNG_OBJECTS), None) or _named(receiver, _RNG_NAME)


def _named(expr: cst.BaseExpression, pattern: re.Pattern) -> bool:
    """The last name of `expr` (`gen`, `self.rng`, `rngs[0]`) matches `pattern`."""
    while isinstance(expr, cst.Subscript):
        expr = expr.value
    name = expr.value if isinstance(expr, cst.Name) else expr.attr.value if isinstance(expr, cst.Attribute) else ""
    return bool(pattern.search(name.lower()))


def _built_by(index: ModuleIndex, receiver: cst.BaseExpression, at: cst.CSTNode, classes: tuple, word: str | None) -> bool:
    """The receiver was built by one of `classes` in view, or its name says what it is (`word`)."""
    name = receiver.value if isinstance(receiver, cst.Name) else receiver.attr.value if isinstance(receiver, cst.Attribute) else None
    if name is None:
        return False
    if word is not None and word in name.lower():
        return True
    if isinstance(receiver, cst.Name):
        built = index.assigned_value(name, at)
        return isinstance(built, cst.Call) and index.resolve(built.func, built) in classes
    return False


def _holds_optimizer(index: ModuleIndex, state: cst.BaseExpression, at: cst.CSTNode) -> bool:
    """Fabric's `state`: a dict (in view) with an optimizer among its values or keys."""
    if isinstance(state, cst.Name):
        state = index.assigned_value(state.value, at)
    if isinstance(state, cst.Call) and isinstance(state.func, cst.Name) and state.func.value == "dict":
        return any(
            a.keyword is not None and (_OPTIMIZER_NAME.search(a.keyword.value.lower()) or names_optimizer(index, a.value, at))
            for a in state.args
        )
    if not isinstance(state, cst.Dict):
        return False
    for element in state.elements:
        if not isinstance(element, cst.DictElement):
            continue
        key = literal_value(element.key)
        if isinstance(key, str) and _OPTIMIZER_NAME.search(key.lower()) or names_optimizer(index, element.value, at):
            return True
    return False


def _exec_rebinds(index: ModuleIndex, node: cst.Call) -> list[ir.Stmt]:
    """`exec(open("configurator.py").read())` at a module's top level (nanoGPT's scripts) may
    rebind any of its globals: each name bound there to a literal is a runtime value after it
    (`init_from == "resume"` is then decided by the run, not by the default)."""
    if not node.args or isinstance(node.args[0].value, (cst.SimpleString, cst.ConcatenatedString)):
        return []
    scope = index.enclosing_scope(node)
    if scope.kind != "module" or len(node.args) > 1:
        return []
    out: list[ir.Stmt] = []
    for name, bound in scope.bindings.items():
        if isinstance(bound, cst.BaseExpression) and literal_value(bound, MISSING) is not MISSING:
            out.append(ir.Assign(name, ir.Opaque(name)))
    return out

