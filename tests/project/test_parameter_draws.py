"""A draw that is an `nn.Parameter`'s initial value is a module's random init, like the one
`nn.Linear(...)` makes: a program that only evaluates weights it loads over it is not random
(TRP101's checkpoint-only trap). Found on open_clip: an attention pool's positional embedding,
`nn.Parameter(torch.randn(n, d) / d ** 0.5)`, made every zero-shot script that loads a
checkpoint "draw from torch's generator"."""

from __future__ import annotations

import pytest
from conftest import reported

MODEL = '''import torch
import torch.nn as nn


class Pool(nn.Module):
    def __init__(self, n, d):
        super().__init__()
        self.position = nn.Parameter(torch.randn(n, d) / d ** 0.5)
        self.scale = nn.Parameter(-torch.rand(d))

    def forward(self, x):
        return x + self.position * self.scale
'''

EVALUATE = '''import torch
from model import Pool

if __name__ == "__main__":
    pool = Pool(4, 8)
    pool.load_state_dict(torch.load("pool.pt"))
    print(pool(torch.ones(4, 8)))
'''


def test_a_parameter_drawn_then_loaded_over_is_not_randomness(lint):
    result = lint({"model.py": MODEL, "evaluate.py": EVALUATE}, {"select": ["TRP101"]})
    assert reported(result, lint.root) == set()


@pytest.mark.parametrize(
    "change",
    [
        ('    pool.load_state_dict(torch.load("pool.pt"))\n', ""),  # nothing loaded: the init is the model
        ("    print(", "    torch.optim.SGD(pool.parameters(), lr=0.1)\n    print("),  # trains from it
        ("pool = Pool(4, 8)", "pool = Pool(4, 8)\n    noise = torch.randn(3)"),  # a plain draw still counts
    ],
    ids=["no checkpoint", "training", "another draw"],
)
def test_it_still_counts_where_the_init_or_a_draw_matters(lint, change):
    evaluate = EVALUATE.replace(*change)
    result = lint({"model.py": MODEL, "evaluate.py": evaluate}, {"select": ["TRP101"]})
    assert {code for _, _, code in reported(result, lint.root)} == {"TRP101"}


INIT_METHODS = '''import torch.nn as nn


class Head(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Conv2d(4, 4, 1, bias=False)
        self.init_weights()

    def init_weights(self):
        nn.init.normal_(self.proj.weight, std=0.02)
        self.proj.weight.data.normal_(0.0, 0.02)

    def forward(self, x):
        return self.proj(x)
'''


def test_init_functions_and_weight_fills_are_module_inits_too(lint):
    evaluate = EVALUATE.replace("from model import Pool", "from head import Head").replace("Pool(4, 8)", "Head()")
    result = lint({"head.py": INIT_METHODS, "evaluate.py": evaluate}, {"select": ["TRP101"]})
    assert reported(result, lint.root) == set()
    result = lint({"head.py": INIT_METHODS, "evaluate.py": evaluate.replace("    pool.load_state_dict", "    # ")}, {"select": ["TRP101"]})
    assert {code for _, _, code in reported(result, lint.root)} == {"TRP101"}
