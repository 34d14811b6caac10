"""TRP401/402: methods that only tensors have (`index_add_`, `scatter_add_`, `put_`, ...) on a
receiver whose type the module does not show (a parameter, an attribute), reported where a
program that runs them uses CUDA (op_matching/calls.as_api, rules/_ops.assumed_programs)."""

from __future__ import annotations

from conftest import reported

OPS = """import torch


def pool(out, index, values):
    out.index_add_(0, index, values)
    return out


def spread(buf, index, values):
    buf.scatter_add_(0, index, values)


def accumulate(buf, index, values):
    buf.index_put_((index,), values, accumulate=True)


def overwrite(buf, index, values):
    buf.index_put_((index,), values)


def flat_sum(buf, index, values):
    buf.put_(index, values, accumulate=True)


def window(x, index, values, n):
    x[:, :n].index_add_(1, index, values)


def count(hist, index):
    hist.index_add_(0, index, torch.ones(index.numel()))


class Accumulator:
    def __init__(self, store):
        self.store = store

    def add(self, index, values):
        self.store.index_add_(0, index, values)
"""

MAIN = """import torch
from ops import Accumulator, accumulate, count, flat_sum, overwrite, pool, spread, window


def main():
    x = torch.randn(8, 8){device}
    i = torch.tensor([0, 1, 1]){device}
    pool(x, i, x)
    spread(x, i, x)
    accumulate(x, i, x)
    overwrite(x, i, x)
    flat_sum(x, i, x)
    window(x, i, x, 4)
    count(x, i)
    Accumulator(x).add(i, x)


if __name__ == "__main__":
    main()
"""


def found(lint, files, config=None):
    result = lint(files, {"select": ["TRP401", "TRP402"], **(config or {})})
    assert not result.errors, result.errors
    return reported(result, lint.root)


def test_tensor_only_methods_on_untyped_receivers_of_a_cuda_program(lint):
    files = {"ops.py": OPS, "train.py": MAIN.format(device='.to("cuda")')}
    assert found(lint, files) == {
        ("ops.py", 5, "TRP401"),  # index_add_
        ("ops.py", 10, "TRP401"),  # scatter_add_
        ("ops.py", 18, "TRP401"),  # index_put_ without accumulate: duplicate indices
        ("ops.py", 22, "TRP402"),  # put_ with accumulate on CUDA
        ("ops.py", 26, "TRP401"),  # a slice of a parameter
        ("ops.py", 38, "TRP401"),  # an attribute assigned from a parameter
    }
    # index_put_(accumulate=True) is sort-based on CUDA (deterministic); adding ones is exact


def test_the_message_says_why_the_receiver_is_a_tensor(lint):
    files = {"ops.py": OPS, "train.py": MAIN.format(device=".cuda()")}
    result = lint(files, {"select": ["TRP401"]})
    message = next(f.message for f in result.findings if f.row == 5)
    assert "only tensors have `index_add_`, and a program that runs it uses CUDA" in message


def test_untyped_receivers_need_a_program_on_cuda(lint):
    assert found(lint, {"ops.py": OPS}) == set()  # no program
    assert found(lint, {"ops.py": OPS, "train.py": MAIN.format(device="")}) == set()  # a CPU program
    hidden = MAIN.format(device='.to("cuda")').replace("def main():", 'import os\nos.environ["CUDA_VISIBLE_DEVICES"] = ""\n\ndef main():')
    assert found(lint, {"ops.py": OPS, "train.py": hidden}) == set()


def test_a_helper_called_from_forward_counts_the_programs_that_import_it(lint):
    # `net(x)` runs `forward` where the program model does not follow it: the programs that
    # import the helper's module stand in for those that run it
    model = """import torch
import torch.nn as nn
from ops import pool


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 8)

    def forward(self, x, index):
        return pool(torch.zeros_like(x), index, self.lin(x))
"""
    train = """import torch
from model import Net

if __name__ == "__main__":
    net = Net().to({device!r})
    x = torch.randn(3, 8)
    net(x, torch.tensor([0, 1, 1])).sum().backward()
"""
    files = {"ops.py": OPS, "model.py": model, "train.py": train.format(device="cuda")}
    assert ("ops.py", 5, "TRP401") in found(lint, files)
    files["train.py"] = train.format(device="cpu")
    assert found(lint, files) == set()


def test_deterministic_mode_of_the_cuda_programs_silences_it(lint):
    main = MAIN.format(device=".cuda()").replace("def main():\n", "def main():\n    torch.use_deterministic_algorithms(True)\n")
    assert ("ops.py", 22, "TRP402") in found(lint, {"ops.py": OPS, "train.py": main})  # raises: reported
    assert ("ops.py", 5, "TRP401") not in found(lint, {"ops.py": OPS, "train.py": main})


def test_receivers_that_may_be_something_else_are_not_taken_for_tensors(lint):
    ops = """import torch
import paddle


def pool(out, index, values):
    out.index_add_(0, index, values)
"""
    typed = """import torch
from buffers import Ring


def pool(out: Ring, index, values):
    out.index_add_(0, index, values)


def built(index, values):
    out = Ring()
    out.index_add_(0, index, values)
"""
    own = """class Ring:
    def index_add_(self, dim, index, values):
        return self
"""
    main = 'import torch\nfrom ops import pool\n\nif __name__ == "__main__":\n    pool(torch.zeros(3).cuda(), None, None)\n'
    # a look-alike tensor library imported, a parameter annotated with another class, an object
    # the module builds, and a project class that defines the method itself
    assert found(lint, {"ops.py": ops, "train.py": main}) == set()
    assert found(lint, {"ops.py": typed, "buffers.py": own, "train.py": main}) == set()
    assert found(lint, {"ops.py": typed.replace("out: Ring", "out"), "buffers.py": own, "train.py": main}) == set()
