"""Model constructions that draw nothing from torch's generator, and loads every process makes.

A `with` block whose context spares its modules' init (known_apis' EMPTY_INIT_* say what each
spares, from the libraries' sources) is lowered as `try:` (entered, body) `finally:` (left): the
interpreter carries the contexts open on a path (PathState.empty_init) through every call made
inside, and leaves them on every way out (a `return`, an exception). Recognised: `torch.device(
"meta")` (also through a variable holding it or the string), Lightning's `init_module(
empty_init=...)` on any receiver (Fabric's and Trainer's; the base strategy enters `_EmptyInit`,
FSDP the meta device: the weaker is taken), accelerate's `init_empty_weights` / `init_on_device(
meta)`, transformers' `no_init_weights`, and any context given `device="meta"` (a project's
own device mode). A layer or a random factory given `device="meta"` draws nothing at all
(`on_meta_device`).

`for rank in range(world_size): if fabric.global_rank == rank: load(...)`: processes taking
turns (litgpt's sequential loading). Every process takes its turn in one iteration, so the `if`
runs on every path (`turn_variable`, `is_turn_test`); its `else` runs in the other iterations,
of which a single process has none (kept as a branch).
"""

from __future__ import annotations

import libcst as cst

from torchrepro_lint.analysis.literals import MISSING, is_false, is_none, literal_value
from torchrepro_lint.analysis.module_index import ModuleIndex
from torchrepro_lint.analysis.syntax import arg as _arg
from torchrepro_lint.analysis.syntax import expression_code
from torchrepro_lint.project import ir
from torchrepro_lint.project.extract.call_syntax import mentions_name
from torchrepro_lint.project.known_apis import (
    EMPTY_INIT_CONTEXTS,
    EMPTY_INIT_LIGHTNING,
    EMPTY_INIT_META,
    INIT_DRAWN_VALUE,
    INIT_UNHOOKED,
    UNHOOKED_INIT_FUNCTIONS,
    UNHOOKED_INIT_MODULES,
    Kind,
)


def names_meta(index: ModuleIndex, expr: cst.BaseExpression | None, depth: int = 0) -> bool:
    """`"meta"`, `torch.device("meta")`, or a name bound to one of them."""
    if expr is None or depth > 2:
        return False
    literal = literal_value(expr, MISSING)
    if literal is not MISSING:
        return literal == "meta"
    if isinstance(expr, cst.Name):
        return names_meta(index, index.assigned_value(expr.value, expr), depth + 1)
    if isinstance(expr, cst.Call) and index.resolve(expr.func, expr) == "torch.device":
        return names_meta(index, _arg(expr, 0, "type"), depth + 1)
    return False


def on_meta_device(index: ModuleIndex, node: cst.Call) -> bool:
    """`nn.Linear(4, 4, device="meta")`, `torch.randn(3, device=meta)`: made on the meta device."""
    return names_meta(index, _arg(node, None, "device"))


def module_init_detail(qualname: str, loads_pretrained: bool) -> tuple:
    """A torch layer's MODULE_INIT detail: whether its init draws where Lightning's `_EmptyInit`
    is on (MultiheadAttention's xavier_uniform_ does not dispatch to it)."""
    if loads_pretrained:
        return ("pretrained",)
    return (INIT_UNHOOKED,) if qualname in UNHOOKED_INIT_MODULES else ()


def init_function_detail(qualname: str) -> tuple:
    """A `torch.nn.init` function's (above), or a drawn parameter value's (`nn.Parameter(
    torch.randn(n))`: drawn before any context but the meta device can spare it)."""
    if qualname.startswith("torch.nn.init."):
        return (INIT_UNHOOKED,) if qualname in UNHOOKED_INIT_FUNCTIONS else ()
    return (INIT_DRAWN_VALUE,)


def contexts_entered(index: ModuleIndex, node: cst.With, value) -> list[tuple[int, ir.Value]]:
    """The sparing contexts a `with` statement enters: (strength, the condition it is on).
    `value` lowers an expression to an ir.Value."""
    out = []
    for item in node.items:
        expr = item.item
        if isinstance(expr, cst.Name):
            if names_meta(index, expr):  # `meta = torch.device("meta")` ... `with meta:`
                out.append((EMPTY_INIT_META, ir.TRUE))
            continue
        if not isinstance(expr, cst.Call):
            continue
        q = index.resolve(expr.func, expr)
        if q == "torch.device":
            if names_meta(index, expr):
                out.append((EMPTY_INIT_META, ir.TRUE))
        elif q in EMPTY_INIT_CONTEXTS:
            found = _library_context(index, expr, *EMPTY_INIT_CONTEXTS[q], value)
            if found is not None:
                out.append(found)
        elif isinstance(expr.func, cst.Attribute) and expr.func.attr.value == "init_module":
            # Lightning (fabric.py Fabric.init_module, strategies' module_init_context): nothing
            # spared unless `empty_init` is true (None: the strategy decides, and none does)
            given = _arg(expr, 0, "empty_init")
            if given is not None and not is_false(given) and not is_none(given):
                out.append((EMPTY_INIT_LIGHTNING, value(given)))
        elif on_meta_device(index, expr):  # a project's own: lit-llama's `EmptyInitOnDevice(device="meta")`
            out.append((EMPTY_INIT_META, ir.TRUE))
    return out


def _library_context(index: ModuleIndex, call: cst.Call, strength, switch, meta_keyword, device_position, value):
    if device_position is not None and not names_meta(index, _arg(call, device_position, "device")):
        return None  # `init_on_device(torch.device("cuda"))`: a device context, sparing nothing
    if meta_keyword is not None:
        buffers = _arg(call, None, meta_keyword)
        if buffers is not None and literal_value(buffers, MISSING) is True:
            strength = EMPTY_INIT_META  # `include_buffers=True`: accelerate enters `with device:`
    given = _arg(call, 0, switch) if switch is not None else None
    if given is None:
        return strength, ir.TRUE
    return None if is_false(given) else (strength, value(given))


def spared_block(contexts: list[tuple[int, ir.Value]], body: tuple, ref: int) -> list[ir.Stmt]:
    """The block with the contexts entered before it and left on every way out of it."""
    if not contexts:
        return list(body)
    enter = tuple(ir.Effect(Kind.EMPTY_INIT, ref, condition, (strength,)) for strength, condition in contexts)
    leave = tuple(ir.Effect(Kind.EMPTY_INIT, ref, ir.TRUE, ()) for _ in contexts)
    return [ir.Try((*enter, *body), (), (), leave)]


_RANGE_OF_PROCESSES = ("world", "size", "process")  # world_size, get_world_size(), num_processes


def turn_variable(index: ModuleIndex, node: cst.For) -> str | None:
    """The loop variable of `for rank in range(world_size):`, a loop over the processes."""
    iterated = node.iter
    if not isinstance(node.target, cst.Name) or not isinstance(iterated, cst.Call) or len(iterated.args) != 1:
        return None
    if index.resolve(iterated.func, iterated) != "builtins.range" or iterated.args[0].keyword is not None:
        return None
    text = expression_code(index.module, iterated.args[0].value).lower()
    return node.target.value if any(word in text for word in _RANGE_OF_PROCESSES) else None


def is_turn_test(index: ModuleIndex, test: cst.BaseExpression, variable: str) -> bool:
    """`fabric.global_rank == rank` (either way round) for the loop variable `rank`: this
    process's turn."""
    if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1:
        return False
    comparison = test.comparisons[0]
    if not isinstance(comparison.operator, cst.Equal):
        return False
    sides = (test.left, comparison.comparator)
    for mine, other in (sides, sides[::-1]):
        if isinstance(mine, cst.Name) and mine.value == variable:
            text = expression_code(index.module, other)
            return "rank" in text.lower() and not mentions_name(other, variable)
    return False
