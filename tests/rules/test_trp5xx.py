"""TRP501 (uninitialized reads) and the shared receiver typing it uses."""

from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest
from conftest import reported

from torchrepro_lint.analysis.module_index import ModuleIndex
from torchrepro_lint.analysis.receivers import is_ndarray, is_tensor
from torchrepro_lint.parsing.source import SourceFile


def lines(lint, result, code="TRP501"):
    return {row for _, row, _ in reported(result, lint.root, code)}


def check(lint, code):
    return lines(lint, lint(code, {"select": ["TRP501"]}))


def test_reads_arithmetic_comparison_torch_inputs_and_reading_methods(lint):
    assert check(
        lint,
        """import torch
import torch.nn.functional as F

def f(x):
    a = torch.empty(4)
    b = torch.empty(4)
    c = torch.empty_like(x)
    e = torch.empty(3)
    g = torch.empty(3)
    return a > 0, F.relu(b), c.mean(), -e, g.add_(1)
""",
    ) == {5, 6, 7, 8, 9}



def test_identity_tests_compare_the_object_not_its_memory(lint):
    # Regression (Megatron-LM): a buffer allocated only on one branch is asserted `is not None`
    # before each column is written; `is`/`is not` never look at the memory, `==` and `>` do.
    assert check(
        lint,
        """import torch

def columns(values, n, want):
    buf = None
    if want:
        buf = torch.empty(n, 4)
    for i, v in enumerate(values):
        assert buf is not None
        buf[:, i] = v
    return buf

def checked(n):
    out = torch.empty(n)
    if None is out or out is None is False:
        return None
    out[0] = 1
    return out

def compared(n):
    zero = torch.empty(n)
    positive = torch.empty(n)
    return zero == 0, positive > 0
""",
    ) == {20, 21}

def test_padding_concatenated_then_sliced_off_is_not_a_read(lint):
    # Regression (detr's all_gather helper): uninitialized padding is concatenated to reach a
    # common size, gathered, and sliced away again; its values never matter.
    assert check(
        lint,
        """import torch
import torch.distributed as dist

def all_gather_bytes(tensor, max_size, world_size):
    padding = torch.empty(size=(max_size - tensor.numel(),), dtype=torch.uint8)
    padded = torch.cat((tensor, padding), dim=0)
    out = [torch.empty((max_size,), dtype=torch.uint8) for _ in range(world_size)]
    dist.all_gather(out, padded)
    return [t[: tensor.numel()] for t in out]
""",
    ) == set()


def test_writes_before_reads(lint):
    assert check(
        lint,
        """import torch
import torch.nn as nn

def f(x, n):
    a = torch.empty(n)
    a.zero_()
    b = torch.empty(n)
    b[...] = x
    c = torch.empty(n)
    c[:] = 1
    d = torch.empty(n, n)
    nn.init.orthogonal_(d)
    e = torch.empty(n)
    e.copy_(x)
    g = torch.empty(n).to(x.device)
    g.fill_(0)
    h = torch.empty(n)
    h.data.normal_()
    return a + b + c + d + e + g + h
""",
    ) == set()


def test_evaluation_order_and_first_use_decides(lint):
    assert check(
        lint,
        """import torch

def f(x):
    a = torch.empty(3)
    a[:] = a + 1
    b = torch.empty(3)
    print(b.sum())
    b.zero_()
    c = torch.empty(3)
    n = c.shape[0] + c.size(0) + len(c)
    c.fill_(n)
    return a, b, c
""",
    ) == {4, 6}


def test_metadata_only_helpers_and_rebinding(lint):
    assert check(
        lint,
        """import torch

def f(x):
    a = torch.empty(3)
    y = x.type_as(a) + torch.zeros_like(a)
    b = torch.empty(3)
    b = torch.zeros(3)
    c = torch.empty(3)
    def later():
        c.zero_()
    later()
    return y, b + 1, c + 1
""",
    ) == set()



def test_a_rebinding_ends_what_the_name_holds(lint):
    # Regression (mamba's Triton backward): the gradient buffer is allocated in one arm and set
    # to None in the other, a kernel fills it, and a later `g = g.sum(...)` reduces it. The
    # `else` arm is another path, so the kernel call is the buffer's first use; and a value
    # bound after a rebinding (`t = other` then `t = t.sum()`) is not the allocation's.
    assert check(
        lint,
        """import torch

def grads(x, want, fill):
    if want:
        g = torch.empty(x.shape)
    else:
        g = None
    fill(x, g)
    if want:
        g = g.sum(dim=0)
    return g

def replaced(n, other):
    t = torch.empty(n)
    t = other
    t = t.sum()
    return t

def read_before_rebinding(n):
    u = torch.empty(n)
    u = u * 2
    return u

def read_on_the_path_that_skips_the_else(x, want):
    if want:
        v = torch.empty(x.shape)
        total = v.sum()
    else:
        v = None
    return v
""",
    ) == {20, 26}


def test_beta_bound_to_zero_on_the_allocations_path(lint):
    # Regression (diffusers' attention scores): without a mask the input of `baddbmm` is an empty
    # tensor and `beta` is bound to 0 beside it; with one, the mask and beta 1. `beta=0` ignores
    # the input, so the empty tensor is never read. Bound to 1 on its path, it is.
    assert check(
        lint,
        """import torch

def scores(q, k, mask, scale):
    if mask is None:
        base = torch.empty(q.shape[0], q.shape[1], k.shape[1])
        beta = 0
    else:
        base = mask
        beta = 1
    return torch.baddbmm(base, q, k.transpose(-1, -2), beta=beta, alpha=scale)

def read(q, k, mask):
    if mask is None:
        base = torch.empty(q.shape[0], q.shape[1], k.shape[1])
        weight = 1
    else:
        base = mask
        weight = 0
    return torch.baddbmm(base, q, k.transpose(-1, -2), beta=weight)
""",
    ) == {14}


def test_broadcast_to_the_shape_of_an_empty_tensor_whose_view_is_discarded(lint):
    # EDM's constant(): `tensor, _ = torch.broadcast_tensors(tensor, torch.empty(shape))` uses the
    # empty tensor's shape only. Keeping its view (or not unpacking) still reads the memory.
    assert check(
        lint,
        """import torch

def constant(value, shape):
    tensor = torch.as_tensor(value)
    tensor, _ = torch.broadcast_tensors(tensor, torch.empty(shape))
    kept, scratch = torch.broadcast_tensors(tensor, torch.empty(shape))
    both = torch.broadcast_tensors(tensor, torch.empty(shape))
    return tensor, scratch.sum(), both
""",
    ) == {6, 7}

def test_zero_size_and_data_constructors(lint):
    assert check(
        lint,
        """import torch

def f(items, n, rows: int):
    a = torch.empty(0)
    b = torch.empty((0, 4))
    c = torch.empty(size=(3, 0))
    d = torch.LongTensor(items)
    e = torch.Tensor()
    g = torch.LongTensor(n)
    h = torch.LongTensor(rows)
    k = torch.cuda.FloatTensor(rows, 2)
    return a.sum(), b.sum(), c.sum(), d.sum(), e.sum(), g.sum(), h.sum(), k.sum()
""",
    ) == {10, 11}


def test_beta_zero_and_default_beta(lint):
    assert check(
        lint,
        """import torch

def f(a, b):
    out = torch.empty(2, 2)
    x = torch.addmm(out, a, b, beta=0.0)
    acc = torch.empty(2, 2)
    y = torch.addmm(acc, a, b)
    z = torch.empty(2, 2)
    w = z.baddbmm(a, b, beta=0)
    return x, y, w
""",
    ) == {6}


def test_new_on_tensors_only(lint):
    assert check(
        lint,
        """import torch

def f(x: torch.Tensor, obj, data):
    a = x.new(2, 3)
    b = x.new(data)
    c = obj.new(2, 3)
    return a.sum(), b.sum(), c.sum()
""",
    ) == {4}


def test_class_attributes_initialized_by_helpers_loops_or_loading(lint):
    # Regression (pygcn, PyG): legacy or empty parameters initialized by `.data.uniform_`, by a
    # `glorot(self.weight)` helper, or by a loop over parameters are not reported.
    result = lint(
        {
            "layers.py": """import math
import torch
from torch.nn import Module, Parameter
from inits import glorot

class GraphConvolution(Module):
    def __init__(self, fin, fout):
        super().__init__()
        self.weight = Parameter(torch.FloatTensor(fin, fout))
        self.reset_parameters()

    def reset_parameters(self):
        stdv = 1.0 / math.sqrt(self.weight.size(1))
        self.weight.data.uniform_(-stdv, stdv)

    def forward(self, x):
        return torch.mm(x, self.weight)

class Attention(Module):
    def __init__(self, d):
        super().__init__()
        self.att = Parameter(torch.empty(1, d))
        glorot(self.att)

    def forward(self, x):
        return (x * self.att).sum(-1)
""",
            "inits.py": """def glorot(t):
    pass
""",
            "model.py": """import torch
import torch.nn as nn

class Mixer(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.mix = nn.Parameter(torch.empty(d, d))
        for p in self.parameters():
            nn.init.xavier_uniform_(p)

    def forward(self, x):
        return x @ self.mix
""",
        },
        {"select": ["TRP501"]},
    )
    assert reported(result, lint.root, "TRP501") == set()


def test_class_attribute_read_in_forward_with_nothing_initializing_it(lint):
    result = lint(
        """import torch
import torch.nn as nn

class Gate(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.scale = nn.Parameter(torch.Tensor(d))
        self.buffer = torch.empty(d)

    def forward(self, x):
        print(self.buffer.shape)
        return torch.sigmoid(x * self.scale)
""",
        {"select": ["TRP501"]},
    )
    # One legacy argument of unknown type may be data; the buffer is only measured.
    assert lines(lint, result) == set()
    result = lint(
        """import torch
import torch.nn as nn

class Gate(nn.Module):
    def __init__(self, d: int):
        super().__init__()
        self.scale = nn.Parameter(torch.Tensor(d, 1))

    def forward(self, x):
        return torch.sigmoid(x @ self.scale)
""",
        {"select": ["TRP501"]},
    )
    assert lines(lint, result) == {7}
    (finding,) = result.findings
    assert "torch.zeros" in finding.message and "line 10" in finding.message


def test_numpy_view_written_through_or_handed_over_is_not_a_read(lint):
    # Regression (modded-nanogpt's shard loader): `.numpy()` shares the tensor's memory, so a
    # file read into it, a copy into it, or a whole-slice store through it fills the buffer.
    assert check(
        lint,
        """import numpy as np
import torch

def read_shard(stream, count, source):
    tokens = torch.empty(count, dtype=torch.uint8)
    stream.readinto(tokens.numpy())
    mirror = torch.empty(count)
    np.copyto(mirror.numpy(), source)
    ones = torch.empty(count)
    view = ones.numpy()
    view[:] = 1.0
    return tokens.long(), mirror + 1, ones * 2
""",
    ) == set()


def test_reading_the_numpy_view_is_still_a_read(lint):
    assert check(
        lint,
        """import torch

def summaries(n):
    a = torch.empty(n)
    total = a.numpy().sum()
    b = torch.empty(n)
    doubled = b.numpy() * 2
    c = torch.empty(n)
    host = c.numpy()
    peak = host.max()
    d = torch.empty(n)
    e = torch.empty(1)
    return total, doubled, peak, d.tolist(), e.item()
""",
    ) == {4, 6, 8, 11, 12}


def test_function_form_views_and_splits_behave_like_their_methods(lint):
    # Regression (nanotron, modded-nanogpt): `torch.split(out, sizes)` handed to a collective,
    # `out=torch.reshape(out, ...)`, a `torch.view_as_real` buffer received into: written, not read.
    assert check(
        lint,
        """import torch
import torch.distributed as dist

def gather_rows(x, sizes):
    out = torch.empty(sum(sizes), x.shape[1])
    dist.all_gather(list(torch.split(out, sizes)), x)
    return out

def tiled(a, b):
    out = torch.empty(4, 4)
    torch.mm(a, b, out=torch.reshape(out, (4, 4)))
    return out

def recv(shape, src):
    buf = torch.view_as_real(torch.empty(shape, dtype=torch.complex64))
    dist.recv(buf, src)
    return buf

def pieces(x, n):
    halves = torch.empty(2 * n)
    first, second = torch.chunk(halves, 2)
    first.copy_(x)
    second.copy_(x)
    rows = torch.empty(n, 3)
    for row in torch.unbind(rows):
        row.fill_(1)
    head = torch.empty(n, 4)
    torch.narrow(head, 1, 0, 2).zero_()
    flipped = torch.empty(3, n)
    torch.transpose(flipped, 0, 1).copy_(x)
    return halves + 1, rows + 1, head, flipped + 1
""",
    ) == set()


def test_reads_through_function_form_views_are_reported_and_fixed(lint):
    source = """import torch

def f(x, n):
    a = torch.reshape(torch.empty(3), (3,)).sum()
    b = torch.flatten(torch.empty(2, 2)) + 1
    c = torch.empty(n, 2)
    pairs = torch.view_as_complex(c)
    d = torch.empty(n)
    e = torch.empty(n, 1)
    return a, b, pairs.abs(), torch.unsqueeze(d, 0) * x, torch.squeeze(e).mean(), torch.reshape(x, e.shape)
"""
    result = lint(source, {"select": ["TRP501"]})
    assert lines(lint, result) == {4, 5, 6, 8, 9}
    for finding in result.findings:
        assert finding.fix is not None and finding.fix.applicability == "safe"
        assert [edit.content for edit in finding.fix.edits] == ["zeros"]


# -- receivers --------------------------------------------------------------------------------
RECEIVERS = '''
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import Tensor
from typing import Optional

def f(a: Tensor, b: np.ndarray, c, d: "torch.Tensor", e: Optional[Tensor] = None, g: int = 0):
    x = torch.zeros(3)
    y = x.float().view(-1)
    z = y.cpu().numpy()
    w = F.relu(x) * 2
    s = x.size()
    v, i = torch.max(x, 1)
    m = torch.max(x)
    arr = np.zeros(3)
    r = arr.reshape(3, 1)
    t = torch.from_numpy(arr)
    lst = [1, 2]
    return a, b, c, d, e, g, x, y, z, w, s, v, m, arr, r, t, lst, x.T, x[0], arr[0], x.item(), x.shape

class M(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.empty(3))
        self.register_buffer("buf", torch.zeros(2))
        self.lin = nn.Linear(2, 2)
        self.maybe = None

    def forward(self, x, mask=None, *rest):
        return self, x, mask, self.w, self.buf, self.lin, self.maybe
'''

EXPECTED = {
    "a": "tensor", "b": "ndarray", "c": None, "d": "tensor", "e": "tensor", "g": None, "x": "tensor",
    "y": "tensor", "z": "ndarray", "w": "tensor", "s": None, "v": None, "m": "tensor", "arr": "ndarray",
    "r": "ndarray", "t": "tensor", "lst": None, "x.T": "tensor", "x[0]": "tensor", "arr[0]": "ndarray",
    "x.item()": None, "x.shape": None, "self": None, "mask": None, "self.w": "tensor",
    "self.buf": "tensor", "self.lin": None, "self.maybe": None,
}


def _returned():
    index = ModuleIndex(SourceFile(Path("receivers.py"), RECEIVERS))
    out = []
    for node in index.parents:
        if isinstance(node, cst.Return):
            for element in node.value.elements:
                out.append((index.module.code_for_node(element.value), element.value, index))
    return out


@pytest.mark.parametrize("text,expr,index", _returned(), ids=lambda v: v if isinstance(v, str) else "")
def test_receiver_typing(text, expr, index):
    if text == "x" and index.enclosing(expr, cst.FunctionDef).name.value == "forward":
        expected = "tensor"  # a parameter of forward
    else:
        expected = EXPECTED[text]
    assert is_tensor(expr, index) == (expected == "tensor"), text
    assert is_ndarray(expr, index) == (expected == "ndarray"), text
