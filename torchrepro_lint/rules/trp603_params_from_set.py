from __future__ import annotations

import libcst as cst

from torchrepro_lint.analysis.dataflow.classes import derives_from
from torchrepro_lint.analysis.dataflow.elements import MODULE_ITERATORS, PARAM, Elements
from torchrepro_lint.analysis.dataflow.hash_order import ordered_sets, sink_text
from torchrepro_lint.analysis.dataflow.order_flow import OrderFlow
from torchrepro_lint.rules.base import Example, Rule
from torchrepro_lint.rules.edits import make_fix, replace

OPTIMIZER_PREFIXES = ("torch.optim.", "apex.optimizers.", "bitsandbytes.optim.", "torch_optimizer.", "timm.optim.")
NOT_OPTIMIZERS = ("torch.optim.lr_scheduler.", "torch.optim.swa_utils.")
ORDERED_CONSUMERS = frozenset(
    {
        "torch.nn.utils.clip_grad_norm_",
        "torch.nn.utils.clip_grad_value_",
        "torch.nn.utils.parameters_to_vector",
        "torch.nn.utils.get_total_norm",
        "torch.nn.utils.clip_grad.clip_grad_norm_",
        "transformers.AdamW",
        "transformers.Adafactor",
        "transformers.optimization.AdamW",
        "transformers.optimization.Adafactor",
    }
)


class ParamsFromSet(Rule):
    code = "TRP603"
    name = "params-from-set"
    summary = "Parameters or modules collected in a set and fed to an optimizer or another ordered consumer."
    why = (
        "Parameters and modules hash by identity, that is by memory address, so a set of them "
        "iterates in a different order every run. An optimizer built from it numbers its "
        "parameters in that order: its state dict maps momentum buffers to different tensors on "
        "resume, parameter groups shift, and gradient-norm sums change rounding."
    )
    fix_safety = "safe"
    fix = (
        "Deduplicate without a set, keeping first-seen order: "
        "`list(dict.fromkeys(itertools.chain(a.parameters(), b.parameters())))`, or chain the "
        "iterators directly when they do not overlap. `--fix` rewrites a set passed straight to "
        "its consumer: `Adam(set(a.parameters()) | set(b.parameters()))` becomes "
        "`Adam(list(dict.fromkeys([*a.parameters(), *b.parameters()])))`."
    )
    where_reported = (
        "At the set where its order is first used: the consumer's argument, or the `list(...)` / "
        "`tuple(...)` made from it.",
        "Set elements count as parameters or modules when they come from `.parameters()`, "
        "`.named_parameters()` (the tensor), `.modules()`, `.children()`, `.buffers()` and their "
        "`named_` forms, through comprehensions, `set.add`, `|` and variables.",
        "Ordered consumers: `torch.optim` optimizers (not `lr_scheduler` or `swa_utils`), those of "
        "apex, bitsandbytes, torch_optimizer and timm, transformers' `AdamW` / `Adafactor`, and "
        "project subclasses of `torch.optim.Optimizer`, given the set as their parameters "
        "(directly or as `{\"params\": ...}` groups); `clip_grad_norm_`, `clip_grad_value_`, "
        "`get_total_norm`, `parameters_to_vector`.",
        "Any list or tuple made from the set: its order is then the set's.",
    )
    not_reported = (
        "A set used only for membership tests (`p not in frozen_params`) or `len`.",
        "Loops over the set that only set `requires_grad` or count.",
        "Parameters deduplicated in first-seen order: `list(dict.fromkeys(...))`.",
        "A set of parameters passed to a consumer's other arguments: only the first positional "
        "argument, `params=` or `parameters=` counts.",
    )
    reference = (
        ("torch.optim.Optimizer (parameters need a deterministic ordering)",
         "https://pytorch.org/docs/stable/optim.html#torch.optim.Optimizer"),
        ("torch.optim.Optimizer.state_dict", "https://pytorch.org/docs/stable/generated/torch.optim.Optimizer.state_dict.html"),
    )
    # A set holds parameters or modules only on evidence from one of these methods
    # (`model.parameters()`, `named_modules()`, ...), called in this file.
    triggers = tuple(sorted(MODULE_ITERATORS))
    hazards = (
        Example(
            '''import torch

def make_optimizer(encoder, head):
    params = set(encoder.parameters()) | set(head.parameters())
    return torch.optim.Adam(params, lr=1e-3)  # <-- TRP603
''',
            "A union of parameter sets fed to Adam",
            fixed='''import itertools
import torch

def make_optimizer(encoder, head):
    params = list(dict.fromkeys(itertools.chain(encoder.parameters(), head.parameters())))
    return torch.optim.Adam(params, lr=1e-3)
''',
        ),
        Example(
            '''import torch.nn as nn

def trainable(model: nn.Module):
    return list(set(model.parameters()))  # <-- TRP603
''',
            "list(set(model.parameters()))",
        ),
        Example(
            '''from torch import optim

def groups(model, no_decay_names):
    decay = {p for n, p in model.named_parameters() if n not in no_decay_names}
    rest = {p for n, p in model.named_parameters() if n in no_decay_names}
    return optim.AdamW(
        [{"params": decay, "weight_decay": 0.05}, {"params": rest, "weight_decay": 0.0}],  # <-- TRP603
        lr=3e-4,
    )
''',
            "Parameter groups built as sets",
        ),
    )
    traps = (
        Example(
            '''import torch

def make_optimizer(model, frozen):
    frozen_params = set(frozen.parameters())
    params = [p for p in model.parameters() if p not in frozen_params]
    return torch.optim.SGD(params, lr=0.1)
''',
            "A set used only for membership",
        ),
        Example(
            '''import itertools
import torch

def make_optimizer(a, b):
    params = list(dict.fromkeys(itertools.chain(a.parameters(), b.parameters())))
    return torch.optim.Adam(params)
''',
            "Deduplicated in first-seen order",
        ),
        Example(
            '''def freeze(model):
    shared = set(model.encoder.parameters()) & set(model.decoder.parameters())
    for p in shared:
        p.requires_grad_(False)
    return len(shared)
''',
            "An order-free loop and len",
        ),
    )

    def check_module(self, module, context):
        index = module.index
        elements = Elements(index)
        order = OrderFlow(index, self._consumer(context, module))
        for at, verdict in ordered_sets(index, elements, order, PARAM, set()):
            yield context.report(
                self, module, at,
                f"a set of parameters or modules decides {sink_text(verdict)}: they hash by memory "
                f"address, so the order differs every run and optimizer state no longer lines up on "
                f"resume; deduplicate with `list(dict.fromkeys(...))` instead of a set",
                fix=_fromkeys_fix(module, at),
            )

    @staticmethod
    def _consumer(context, module):
        project = context.project

        def sink(call: cst.Call, qualname: str | None, arg_node: cst.Arg) -> str | None:
            if not qualname:
                return None
            if arg_node.keyword is not None and arg_node.keyword.value not in ("params", "parameters"):
                return None
            if arg_node.keyword is None and call.args and call.args[0] is not arg_node:
                return None
            if qualname in ORDERED_CONSUMERS:
                return f"the input order of `{qualname.rsplit('.', 1)[1]}`"
            if qualname.startswith(OPTIMIZER_PREFIXES) and not qualname.startswith(NOT_OPTIMIZERS):
                return f"the parameter order of the optimizer `{qualname.rsplit('.', 1)[1]}`"
            if derives_from(project, module, qualname, frozenset({"torch.optim.Optimizer"})) not in (None, True):
                return f"the parameter order of the optimizer `{qualname.rsplit('.', 1)[1]}`"
            return None

        return sink


def _fromkeys_fix(module, at):
    """`set(x)` / `list(set(x))` / `set(a) | set(b)` -> `list(dict.fromkeys(...))`: the same
    de-duplication, in first-seen order. Only where the set is passed straight to its consumer."""
    code = module.index.module.code_for_node
    parents = module.index.parents
    node = at
    if _is_list_call(module, node):
        node = node.args[0].value
    else:
        # The set inside `list(set(x))`: the whole `list(...)` is rewritten, not wrapped again.
        call = parents.get(parents.get(at))
        if isinstance(parents.get(at), cst.Arg) and _is_list_call(module, call):
            at = call
    parts = _set_operands(module, node)
    if parts is None or not isinstance(parents.get(at), cst.Arg):
        return None
    inner = code(parts[0]) if len(parts) == 1 else "[" + ", ".join(f"*{code(p)}" for p in parts) + "]"
    return make_fix("safe", "Deduplicate in first-seen order", [replace(module, at, f"list(dict.fromkeys({inner}))")])


def _is_list_call(module, node) -> bool:
    return (
        isinstance(node, cst.Call)
        and len(node.args) == 1
        and node.args[0].keyword is None
        and not node.args[0].star
        and module.index.resolve(node.func, node) == "builtins.list"
    )


def _set_operands(module, node):
    """The iterables of `set(x)` or `set(a) | set(b) | ...`, else None."""
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.BitOr):
        left, right = _set_operands(module, node.left), _set_operands(module, node.right)
        return left + right if left is not None and right is not None else None
    if (
        isinstance(node, cst.Call)
        and module.index.resolve(node.func, node) == "builtins.set"
        and len(node.args) == 1
        and node.args[0].keyword is None
        and not node.args[0].star
    ):
        return [node.args[0].value]
    return None
