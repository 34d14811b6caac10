"""TRP105's trap of a draw whose value becomes the seed, through assignments: torchtune's
`set_seed(seed=None)` draws a seed when none is given, broadcasts it, adds the rank and seeds
with the sum; 22 of its recipes were reported as seeding after an unseeded draw."""

from __future__ import annotations

import pytest
from conftest import reported

HELPER = '''import torch


def broadcast(tensor, source):
    return tensor


def set_seed(seed=None, rank=0):
    if seed is None:
        drawn = torch.randint(0, 2**31, (1,))
        seed = broadcast(drawn, 0).item()
    {body}
    return seed
'''

MAIN = '''import torch.nn as nn
from seeding import set_seed

if __name__ == "__main__":
    set_seed()
    model = nn.Linear(2, 2)
'''


@pytest.mark.parametrize(
    "body",
    [
        "local_seed = seed + rank\n    torch.manual_seed(local_seed)",
        "torch.manual_seed(seed)",
        "torch.manual_seed(int(seed) % 1000)",
    ],
    ids=["through two assignments", "directly", "through a call"],
)
def test_a_seed_drawn_then_used_is_not_a_late_seed(lint, body):
    result = lint({"seeding.py": HELPER.format(body=body), "train.py": MAIN}, {"select": ["TRP105", "TRP101"]})
    assert reported(result, lint.root) == set()


def test_a_seed_not_drawn_from_that_draw_is_still_late(lint):
    body = "noise = drawn * 2\n    torch.manual_seed(1234)"
    result = lint({"seeding.py": HELPER.format(body=body), "train.py": MAIN}, {"select": ["TRP105"]})
    assert {code for _, _, code in reported(result, lint.root)} == {"TRP105"}
