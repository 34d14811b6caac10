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


EDM_LIKE = '''import numpy as np
import torch
import torch.nn as nn


def training_loop(seed=0):
    np.random.seed(seed % (1 << 31))
    torch.manual_seed(np.random.randint(1 << 31))
    return nn.Linear(2, 2)


if __name__ == "__main__":
    options = {{}}
    {before}
    chosen_seed = torch.randint(1 << 31, size=[])
    options["seed"] = int(chosen_seed)
    training_loop(**options)
'''


def test_a_draw_into_a_seed_variable_is_seed_material_wherever_the_value_goes(lint):
    # EDM draws its run seed when none is given and hands it through a config dict to a loop
    # that seeds NumPy with it and torch from NumPy: no route the names could follow.
    result = lint({"train.py": EDM_LIKE.format(before="pass")}, {"select": ["TRP105"]})
    assert reported(result, lint.root) == set()


def test_a_model_built_before_a_drawn_seed_is_still_a_late_seed(lint):
    result = lint({"train.py": EDM_LIKE.format(before="model = nn.Linear(4, 4)")}, {"select": ["TRP105"]})
    assert {code for _, _, code in reported(result, lint.root)} == {"TRP105"}


def test_a_drawn_seed_that_seeds_a_generator_object_is_still_a_draw_before_the_seed(lint):
    # accelerate seeds a DataLoader's generator from torch's global one before the script seeds
    # torch: the data order follows that unseeded draw.
    source = """import torch


def prepare(loader):
    generator = torch.Generator()
    seed = int(torch.empty((), dtype=torch.int64).random_().item())
    generator.manual_seed(seed)
    loader.generator = generator
    return loader


if __name__ == "__main__":
    loader = prepare(object())
    torch.manual_seed(0)
"""
    result = lint({"train.py": source}, {"select": ["TRP105"]})
    assert {code for _, _, code in reported(result, lint.root)} == {"TRP105"}


@pytest.mark.parametrize(
    "draw, expected",
    [
        ("seed = args_seed if args_seed is not None else random.randint(0, 2**32 - 1)", set()),
        ("run_seed = int(np.random.randint(1 << 31))\n    seed = run_seed", set()),
        ("seed = 1234\n    jitter = random.random()", {"TRP102"}),
    ],
    ids=["python random makes the seed", "numpy makes the seed", "a data draw"],
)
def test_a_python_or_numpy_draw_that_makes_the_seed_is_no_partial_seed(lint, draw, expected):
    # sd-scripts' lumina inference: a random seed when none is given, logged, then torch's.
    source = f"""import random
import numpy as np
import torch


def main(args_seed=None):
    {draw}
    print("seed", seed)
    torch.manual_seed(seed)
    return torch.nn.Linear(2, 2)


if __name__ == "__main__":
    main()
"""
    result = lint({"infer.py": source}, {"select": ["TRP102"]})
    assert {code for _, _, code in reported(result, lint.root)} == expected
