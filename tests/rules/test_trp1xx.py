"""Seeding (TRP103): an unseeded generator whose whole state is restored from a saved one before
use is determined (regression from facebookresearch/lingua); a restore that may not run, or
runs after a draw, leaves it on OS entropy."""

from __future__ import annotations

import pytest

from conftest import reported


def rows(lint, source):
    result = lint({"sampler.py": source}, {"select": ["TRP103"]})
    assert not result.errors, result.errors
    return {row for _, row, _ in reported(result, lint.root, "TRP103")}


def test_generator_from_os_entropy_is_still_reported(lint):
    source = """import numpy as np

def draw_order(n):
    gen = np.random.default_rng()
    return gen.permutation(n)
"""
    assert rows(lint, source) == {4}


@pytest.mark.parametrize(
    "create, restore",
    [
        ("np.random.default_rng()", "gen.bit_generator.state = checkpoint['rng']"),
        ("np.random.Generator(np.random.PCG64())", "gen.bit_generator.state = checkpoint['rng']"),
        ("np.random.default_rng()", "gen.__setstate__(checkpoint['rng'])"),
        ("np.random.RandomState()", "gen.set_state(checkpoint['rng'])"),
        ("np.random.RandomState(None)", "gen.__setstate__(checkpoint['rng'])"),
        ("random.Random()", "gen.setstate(checkpoint['rng'])"),
        ("random.Random()", "gen.__setstate__(checkpoint['rng'])"),
    ],
)
def test_state_restored_before_first_use_is_not_reported(lint, create, restore):
    source = f"""import random
import numpy as np

def continue_sampling(checkpoint, items):
    gen = {create}
    {restore}
    return [items[i] for i in range(len(items)) if gen.random() < 0.5]
"""
    assert rows(lint, source) == set()


def test_restore_after_unrelated_statements_and_in_every_branch_is_not_reported(lint):
    source = """import random
import numpy as np

class Loader:
    def __init__(self, checkpoint):
        self.picker = np.random.default_rng()
        self.size = len(checkpoint)
        self.picker.bit_generator.state = checkpoint["picker"]

def resumed_or_fresh(checkpoint, seed):
    gen = random.Random()
    count = 3
    if checkpoint is not None:
        gen.setstate(checkpoint["python"])
    elif seed == 0:
        gen.seed(1)
    else:
        gen.seed(seed)
    return gen.sample(range(10), count)
"""
    assert rows(lint, source) == set()


def test_restore_that_may_not_run_or_comes_too_late_is_reported(lint):
    source = """import random
import numpy as np

def only_when_resuming(checkpoint):
    gen = np.random.default_rng()
    if checkpoint is not None:
        gen.bit_generator.state = checkpoint["rng"]
    return gen.integers(0, 10)

def restored_after_a_draw(saved):
    gen = random.Random()
    first = gen.random()
    gen.setstate(saved)
    return first

def restored_inside_a_loop(saved_states):
    gen = np.random.RandomState()
    for saved in saved_states:
        gen.set_state(saved)
    return gen.rand()

def passed_on_before_the_restore(saved, consume):
    gen = random.Random()
    consume(gen)
    gen.setstate(saved)

def seeded_after_a_draw(seed):
    gen = random.Random()
    first = gen.random()
    gen.seed(seed)
    return first

def not_a_restore_of_this_kind(saved):
    gen = np.random.default_rng()
    gen.set_state(saved)
    return gen.random()
"""
    assert rows(lint, source) == {5, 11, 17, 23, 28, 34}


def test_restore_of_an_attribute_in_another_method_is_reported(lint):
    # The restore runs when a checkpoint is loaded; a fresh run draws from OS entropy.
    source = """import numpy as np

class Masker:
    def __init__(self):
        self.gen = np.random.default_rng()

    def load_state_dict(self, state):
        self.gen.bit_generator.state = state["gen"]

    def mask(self, n):
        return self.gen.random(n) > 0.5
"""
    assert rows(lint, source) == {5}
