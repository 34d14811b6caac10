"""What one call says by its own syntax: pretrained weights, a task head, a generator of its own,
a Lightning trainer on a GPU, the names it reads; and whether a qualified name may be project code.

The lowering of calls (calls.py) asks these of a call before it decides what the call becomes;
none of them needs more than the call's own nodes (and, for a name, its qualified name).
"""

from __future__ import annotations

import libcst as cst

from torchrepro_lint.analysis.literals import is_false, is_none, literal_value
from torchrepro_lint.analysis.names import LOCAL, dotted
from torchrepro_lint.analysis.syntax import arg as _arg
from torchrepro_lint.project.known_apis import RANDOM_TRANSFORM_PREFIXES, RANDOM_TRANSFORMS, names_a_seed

# Roots that are never project code: calls into them are classified, not followed.
EXTERNAL_ROOTS = frozenset(
    "torch numpy random os sys builtins time math datetime json logging argparse typing "
    "collections itertools functools pathlib re shutil subprocess multiprocessing threading "
    "warnings copy pickle glob io abc dataclasses enum contextlib inspect uuid secrets hashlib "
    "tqdm wandb yaml PIL cv2 pandas scipy sklearn matplotlib torchvision".split()
)


def root(qualname: str) -> str:
    return qualname.split(".", 1)[0]


def on_self(receiver: cst.BaseExpression) -> bool:
    """`self.method()` / `super().method()`: the project's own method, which the interpreter follows."""
    if isinstance(receiver, cst.Name):
        return receiver.value in ("self", "cls")
    return isinstance(receiver, cst.Call) and isinstance(receiver.func, cst.Name) and receiver.func.value == "super"


def is_project_name(qualname: str | None) -> bool:
    return bool(qualname) and (qualname.startswith(LOCAL) or root(qualname) not in EXTERNAL_ROOTS)


def subexpressions(expr: cst.CSTNode):
    yield expr
    for child in expr.children:
        yield from subexpressions(child)


def contains_node(outer: cst.CSTNode, node: cst.CSTNode) -> bool:
    return any(sub is node for sub in subexpressions(outer))


# Lightning's accelerator names that put the Trainer's work on a CUDA GPU ("auto" picks one only
# when present: like torch.cuda.is_available() unused, it is not evidence by itself).
_LIGHTNING_GPU = frozenset({"gpu", "cuda"})


def lightning_on_gpu(call: cst.Call) -> bool:
    """`Trainer(accelerator="gpu")` / `"cuda"`, or the pre-2.0 `gpus=N` (N not 0/None)."""
    accelerator = literal_value(_arg(call, None, "accelerator"))
    if isinstance(accelerator, str) and accelerator.lower() in _LIGHTNING_GPU:
        return True
    gpus = _arg(call, None, "gpus")
    return gpus is not None and not is_none(gpus) and not is_false(gpus)


def own_generator(node: cst.Call) -> bool:
    """`torch.randn(3, generator=g)`: the draw uses `g`, not torch's global generator."""
    generator = _arg(node, None, "generator")
    return generator is not None and not is_none(generator)


def dict_keys(call: cst.Call) -> list[str]:
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


def is_random_transform(q: str | None) -> bool:
    if not q or not q.startswith(RANDOM_TRANSFORM_PREFIXES):
        return False
    name = q.rsplit(".", 1)[1]
    return name.startswith("Random") or name in RANDOM_TRANSFORMS


# Task heads that fine-tuning adds for the user's own labels: missing from a base checkpoint, so
# initialised randomly. Generation heads (CausalLM, MaskedLM, Seq2SeqLM, ConditionalGeneration,
# ImageTextToText, ...) are part of the checkpoint they are loaded from.
_NEW_HEAD_TASKS = ("Classification", "MultipleChoice", "QuestionAnswering", "Segmentation", "ObjectDetection", "CTC", "XVector")


def adds_task_head(func: cst.Attribute) -> bool:
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


def loads_reward_model(call: cst.Call) -> bool:
    """`AutoModelForSequenceClassification.from_pretrained(reward_model_path, num_labels=1)`: a
    checkpoint its code names a reward model (TRL's trainers load `reward_funcs` given as strings
    this way) is a trained scorer, whose head comes with it."""
    source = _arg(call, 0, "pretrained_model_name_or_path")
    name = dotted(source) if source is not None else None
    return name is not None and "reward" in name.rsplit(".", 1)[-1].lower()


def loads_pretrained(call: cst.Call) -> bool:
    """`resnet50(weights=...)` / `pretrained=True`: the weights come from a checkpoint."""
    weights = _arg(call, None, "weights")
    pretrained = _arg(call, None, "pretrained")
    return (weights is not None and not is_none(weights)) or (pretrained is not None and not is_false(pretrained) and not is_none(pretrained))


def mentions_name(expr: cst.CSTNode, name: str) -> bool:
    if isinstance(expr, cst.Name):
        return expr.value == name
    return any(mentions_name(child, name) for child in expr.children)


def names_in(expr: cst.CSTNode):
    if isinstance(expr, cst.Name):
        yield expr
        return
    for child in expr.children:
        yield from names_in(child)


def fills_weights(node: cst.Call) -> bool:
    """`<...>.weight.normal_(...)`, `<...>.bias.data.uniform_(...)`: a layer's parameters filled
    in place (an init method's way), with no generator of its own (which would not draw from
    torch's)."""
    receiver = node.func.value if isinstance(node.func, cst.Attribute) else None
    if isinstance(receiver, cst.Attribute) and receiver.attr.value == "data":
        receiver = receiver.value
    return (
        isinstance(receiver, cst.Attribute)
        and (receiver.attr.value.endswith("weight") or receiver.attr.value == "bias")
        and not own_generator(node)
    )


def makes_a_seed(targets: tuple[str, ...]) -> bool:
    """`seed = args.seed if args.seed is not None else random.randint(0, 2**32 - 1)`: a draw
    from Python's or NumPy's generator that makes the run's seed (logged and given to torch, as
    rules.md's TRP104 trap describes) is no data stream that their own seeding would fix."""
    return any(names_a_seed(name) for name in targets)
