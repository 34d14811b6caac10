from __future__ import annotations

import libcst as cst

from torchrepro_lint.analysis.dataflow.core import flow
from torchrepro_lint.analysis.receivers import is_tensor
from torchrepro_lint.analysis.syntax import arg, int_value
from torchrepro_lint.rules.base import Example, Rule, last_names
from torchrepro_lint.rules.edits import make_fix, replace
from torchrepro_lint.rules.uninitialized_memory import READ, Tracker

ALLOCATORS = {
    "torch.empty": "torch.zeros",
    "torch.empty_like": "torch.zeros_like",
    "torch.empty_strided": "torch.zeros",
    "torch.empty_permuted": "torch.zeros",
}
ALLOCATING_METHODS = {"new_empty": "new_zeros", "new_empty_strided": "new_zeros"}
_LEGACY_NAMES = ("Float", "Double", "Half", "BFloat16", "Long", "Int", "Short", "Char", "Byte", "Bool")
LEGACY_CONSTRUCTORS = frozenset(
    {"torch.Tensor"} | {f"torch.{n}Tensor" for n in _LEGACY_NAMES} | {f"torch.cuda.{n}Tensor" for n in _LEGACY_NAMES}
)


class UninitializedRead(Rule):
    code = "TRP501"
    name = "uninitialized-read"
    summary = "Memory from `torch.empty` (or a legacy size constructor) is read before it is written."
    why = (
        "`torch.empty`, `empty_like`, `new_empty` and legacy constructors such as "
        "`torch.FloatTensor(3, 4)` return memory that holds whatever was there before: old "
        "activations, NaNs, zeros on a fresh allocator. Reading it gives results that change "
        "from run to run and machine to machine, and no seed can fix that."
    )
    fix_safety = "safe"
    fix = (
        "Allocate initialized memory: `--fix` rewrites `torch.empty` -> `torch.zeros`, `empty_like` "
        "-> `zeros_like` and `x.new_empty` -> `x.new_zeros`. For `empty_strided`, `empty_permuted`, "
        "`new_empty_strided` and legacy constructors, allocate with `torch.zeros` yourself, or write "
        "every element (`.zero_()`, an `nn.init` function, `out=`) before the first read."
    )
    where_reported = (
        "At the allocation: `torch.empty`, `empty_like`, `empty_strided`, `empty_permuted`, "
        "`Tensor.new_empty`, `new_empty_strided`, or a legacy size constructor (`torch.Tensor(2, 3)`, "
        "`torch.LongTensor(b, n)`, `x.new(2, 3)`). The message quotes the first read and its line.",
        "A local variable is followed in its function, and the first use in source order decides. "
        "Reads: arithmetic, comparisons, reading methods (`.sum()`, `.add_()`), inputs of torch "
        "functions. Writes: `zero_`, `fill_`, `copy_`, in-place random fills, `nn.init.*_`, `out=`, "
        "`x[...] = v`, `x[:] = v`.",
        "Followed transparently: a chain on the allocation (`torch.empty(n).uniform_()`), views and "
        "conversions (`.to()`, `.view()`, `.data`, and function forms such as `torch.reshape(x, s)` "
        "or `torch.view_as_real(x)`), and `.numpy()`, which shares the memory: "
        "`f.readinto(x.numpy())` fills it, `x.numpy().sum()` reads it.",
        "A local name holds the memory until it is bound again: `buf = other` ends it, "
        "`buf = buf.sum()` still reads it.",
        "`self.<attr>` is followed across its class. It is reported only when some method reads it, "
        "nothing in the project writes, initializes or hands over an attribute of that name (an "
        "`apply(init_fn)` function touching `.weight` counts), and no loop over `.parameters()` "
        "initializes parameters.",
    )
    not_reported = (
        "A legacy constructor given data (`torch.FloatTensor(array)`): only sizes count, that is "
        "two or more arguments, or ones that are provably integers.",
        "A zero-size allocation (`torch.empty(0, 4)`).",
        "Metadata: `.shape`, `.size()`, `len`, `*_like`, `type_as` as an argument, identity tests "
        "(`x is None`, `x is not None`: they compare the object, while `x == 0` reads it), "
        "`broadcast_tensors` whose view of it is unpacked into `_`.",
        "An `addmm`-family call with `beta=0`, also `beta=b` where `b` is bound to 0 last on the "
        "allocation's path (`if mask is None: x = torch.empty(...); b = 0` / `else: x = mask; b = 1`).",
        "Memory passed to a non-torch function or to `torch.distributed` (collectives write their "
        "buffers), returned, yielded, stored in a container, or registered with `register_buffer` / "
        "`register_parameter`.",
        "Partial or indexed writes (`x[i] = v`), and pieces taken by `split`, `chunk`, `unbind` or "
        "`narrow` (method or `torch.` function).",
        "Memory placed in a list or tuple, such as the padding in `torch.cat((x, torch.empty(k)))`: "
        "it is carried along, typically sliced off later, not computed on.",
        "`nn.Parameter(torch.empty(...))` that the class initializes (`reset_parameters`), or that "
        "an `apply(init_fn)` in another module initializes.",
    )
    decisions = (
        "Branches are not modelled: a write in one branch counts as initializing.",
        "A binding in the `else` arm of the allocation's `if` is another path and does not end the "
        "name's hold on the memory: after `if c: g = torch.empty(n)` / `else: g = None`, "
        "`kernel(g)` hands the memory over first.",
        "Whether another module initializes an attribute is asked of that module alone (its "
        "summary): a question that would lead on to yet another module (an `init_fn` handed over "
        "there) is answered yes, so the attribute is not reported.",
    )
    reference = (
        ("Reproducibility: Filling uninitialized memory",
         "https://pytorch.org/docs/stable/notes/randomness.html#filling-uninitialized-memory"),
        ("torch.empty", "https://pytorch.org/docs/stable/generated/torch.empty.html"),
        ("torch.utils.deterministic.fill_uninitialized_memory", "https://pytorch.org/docs/stable/deterministic.html"),
    )
    # Candidates are calls resolving to an allocator or a legacy constructor (each spells its
    # name: `FloatTensor`, `Tensor`, ...), or the methods `new_empty*` / `new`.
    triggers = last_names(ALLOCATORS, ALLOCATING_METHODS, LEGACY_CONSTRUCTORS, ["new"])
    hazards = (
        Example(
            '''import torch

def moving_average(values, k):
    acc = torch.empty(values.shape[0])  # <-- TRP501
    acc += values
    return acc / k
''',
            "Accumulating into uninitialized memory",
            fixed='''import torch

def moving_average(values, k):
    acc = torch.zeros(values.shape[0])
    acc += values
    return acc / k
''',
        ),
        Example(
            '''import torch
import torch.nn as nn
import torch.nn.functional as F

class Projection(nn.Module):
    def __init__(self, d_in, d_out):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(d_out, d_in))  # <-- TRP501
        self.bias = nn.Parameter(torch.zeros(d_out))

    def forward(self, x):
        return F.linear(x, self.weight, self.bias)
''',
            "A parameter nothing initializes",
        ),
        Example(
            '''import torch as T

def pad_batch(x, width):
    out = x.new_empty(x.size(0), width)  # <-- TRP501
    total = out.sum()
    legacy = T.FloatTensor(4, 4)  # <-- TRP501
    return total, legacy.mean()
''',
            "new_empty and a legacy size constructor, read",
        ),
    )
    traps = (
        Example(
            '''import math
import torch
import torch.nn as nn

class Bilinear(nn.Module):
    def __init__(self, n, m):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(n, m))
        self.reset_parameters()

    def reset_parameters(self):
        nn.init.kaiming_uniform_(self.weight, a=math.sqrt(5))

    def forward(self, x):
        return x @ self.weight
''',
            "Parameter(torch.empty(...)) initialized in reset_parameters",
        ),
        Example(
            {
                "layers.py": '''import torch
import torch.nn as nn

class Scale(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.gain = nn.Parameter(torch.empty(n))

    def forward(self, x):
        return x * self.gain
''',
                "model.py": '''import torch.nn as nn
from layers import Scale

def init_fn(m):
    if isinstance(m, Scale):
        nn.init.ones_(m.gain)

def build():
    model = nn.Sequential(Scale(8))
    model.apply(init_fn)
    return model
''',
            },
            "Initialized by an apply(init_fn) in another module",
        ),
        Example(
            '''import numpy as np
import torch

def make(n, array, a, b):
    noise = torch.empty(n).uniform_(-1, 1)
    data = torch.FloatTensor(array)
    placeholder = torch.empty(0, 4)
    out = torch.empty(n, n)
    torch.matmul(a, b, out=out)
    return noise + data.sum() + placeholder.sum() + out
''',
            "Chained init, a legacy constructor given data, a zero-size placeholder, out=",
        ),
        Example(
            '''import torch

def stack_columns(values, n, keep):
    buf = None
    if keep:
        buf = torch.empty(n, len(values))
    for i, v in enumerate(values):
        assert buf is not None
        buf[:, i] = v
    return buf
''',
            "An identity test before the columns are written",
        ),
        Example(
            '''import torch

def gather(x, world_size):
    buffers = torch.empty(world_size, x.numel(), device=x.device)
    torch.distributed.all_gather_into_tensor(buffers, x)
    result = torch.empty(x.shape)
    for i in range(x.shape[0]):
        result[i] = x[i] * 2
    scratch = torch.empty_like(x)
    return buffers.sum() + result, fill(scratch)

def fill(t):
    return t.fill_(1)
''',
            "Written by a collective, partial fills, handed to another function",
        ),
        Example(
            '''import torch
import torch.nn as nn

class Cache(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.register_buffer("keys", torch.empty(n, 16))
        self.beta = torch.empty(n, 16)

    def forward(self, a, b):
        return torch.addmm(self.beta, a, b, beta=0) + self.keys.shape[0]
''',
            "register_buffer, and addmm with beta=0 ignores its input",
        ),
        Example(
            '''import numpy as np
import torch

def load_tokens(path, count, fallback):
    tokens = torch.empty(count, dtype=torch.uint8)
    with open(path, "rb") as handle:
        handle.readinto(tokens.numpy())
    weights = torch.empty(count)
    np.copyto(weights.numpy(), fallback)
    return tokens.long(), weights * 2
''',
            "Filled through its NumPy view (`.numpy()` shares the memory)",
        ),
        Example(
            '''import torch
import torch.distributed as dist

def gather_rows(x, counts):
    rows = torch.empty(sum(counts), x.shape[1])
    dist.all_gather(list(torch.split(rows, counts)), x)
    return rows.mean(0)

def product(a, b, shape):
    result = torch.empty(shape)
    torch.mm(a, b, out=torch.reshape(result, (a.shape[0], b.shape[1])))
    spectrum = torch.view_as_real(torch.empty(shape, dtype=torch.complex64))
    dist.recv(spectrum, 0)
    return result + spectrum.sum()
''',
            "Written through the function forms of views: torch.split, torch.reshape, torch.view_as_real",
        ),
    )

    def check_module(self, module, context):
        index = module.index
        data = flow(index)
        tracker = Tracker(index, data, context, module)
        for site in index.calls:
            call = site.node
            replacement = self._allocation(index, data, site.qualname, call)
            if replacement is None:
                continue
            fate, where = tracker.fate(call)
            if fate != READ:
                continue
            line = module.source.span(where)[0]
            text = " ".join(module.source.module.code_for_node(where).split())
            if len(text) > 40:
                text = text[:37] + "..."
            name = _display(index, call, site.qualname)
            yield context.report(
                self, module, call,
                f"`{name}` returns uninitialized memory, and it is read (`{text}`, line {line}) before "
                f"anything writes it: the values are leftovers that differ between runs and machines; "
                f"use `{replacement}` or initialize it first",
                fix=zeros_fix(module, call),
            )

    def _allocation(self, index, data, qualname: str | None, call: cst.Call) -> str | None:
        """The zero-filling replacement when `call` allocates uninitialized, non-empty memory."""
        if qualname in ALLOCATORS:
            if qualname != "torch.empty_like" and _zero_size(call, data):
                return None
            return ALLOCATORS[qualname] + "(...)"
        method = call.func.attr.value if isinstance(call.func, cst.Attribute) else None
        if method in ALLOCATING_METHODS:
            if _zero_size(call, data):
                return None
            return "." + ALLOCATING_METHODS[method] + "(...)"
        if qualname in LEGACY_CONSTRUCTORS:
            return "torch.zeros(...)" if _sizes_only(call, data) else None
        if method == "new" and is_tensor(call.func.value, index, call) and _sizes_only(call, data):
            return ".new_zeros(...)"
        return None


def _display(index, call: cst.Call, qualname: str | None) -> str:
    if qualname and qualname.startswith("torch."):
        return qualname + "(...)"
    return "." + call.func.attr.value + "(...)" if isinstance(call.func, cst.Attribute) else "empty(...)"


def _size_args(call: cst.Call) -> list[cst.BaseExpression]:
    size = arg(call, None, "size")
    if size is not None:
        return [size]
    return [a.value for a in call.args if a.keyword is None and not a.star]


def _zero_size(call: cst.Call, data) -> bool:
    for expr in _size_args(call):
        elements = [e.value for e in expr.elements] if isinstance(expr, (cst.Tuple, cst.List)) else [expr]
        if any(int_value(e) == 0 for e in elements):
            return True
    return False


def _sizes_only(call: cst.Call, data) -> bool:
    """Legacy constructors take data or sizes: sizes when there are two or more positional
    arguments, or one that is provably an integer."""
    if any(a.keyword is not None and a.keyword.value not in ("device",) or a.star for a in call.args):
        return False
    positional = [a.value for a in call.args]
    if not positional:
        return False  # an empty tensor
    if any(int_value(p) == 0 for p in positional):
        return False
    if len(positional) >= 2:
        return all(not isinstance(p, (cst.List, cst.Tuple, cst.ListComp)) for p in positional)
    return _is_int(positional[0], data, 0)


def _is_int(expr: cst.BaseExpression, data, depth: int) -> bool:
    if int_value(expr) is not None:
        return True
    if isinstance(expr, cst.BinaryOperation) and not isinstance(expr.operator, cst.Divide):
        return _is_int(expr.left, data, depth) and _is_int(expr.right, data, depth)
    if isinstance(expr, cst.Call):
        if isinstance(expr.func, cst.Name) and expr.func.value in ("len", "int"):
            return True
        if isinstance(expr.func, cst.Attribute) and expr.func.attr.value in ("size", "numel", "dim") and expr.args:
            return True
    if isinstance(expr, cst.Subscript) and isinstance(expr.value, cst.Attribute) and expr.value.attr.value == "shape":
        return True
    if isinstance(expr, cst.Name) and depth < 3:
        param = data.parameter(expr)
        if param is not None:
            annotation = param.annotation.annotation if param.annotation is not None else None
            return isinstance(annotation, cst.Name) and annotation.value == "int"
        value = data.reaching_value(expr)
        return value is not None and _is_int(value, data, depth + 1)
    return False


ZEROS = {"empty": "zeros", "empty_like": "zeros_like", "new_empty": "new_zeros"}


def zeros_fix(module, call):
    """`torch.empty(...)` -> `torch.zeros(...)`: same shape, dtype and device, defined values."""
    func = call.func if isinstance(call, cst.Call) else None
    name = func.attr if isinstance(func, cst.Attribute) else func if isinstance(func, cst.Name) else None
    if name is None or name.value not in ZEROS:
        return None
    return make_fix("safe", f"Use `{ZEROS[name.value]}`", [replace(module, name, ZEROS[name.value])])
