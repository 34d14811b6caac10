"""TRP303: the forms a dataset's generator is created in before workers copy it (a local name,
one alternative of a conditional, a setup method only `__init__` calls), a dataset known by
being handed to a DataLoader, and the worker_init_fn that reseeds only the global generators."""

from __future__ import annotations

from conftest import reported

SEED_GLOBALS = """import random

import numpy as np
import torch


def seed_globals(worker_id):
    seed = torch.initial_seed() % 2**32
    np.random.seed(seed)
    random.seed(seed)
"""


def test_generator_forms_created_before_the_workers_copy_them(lint):
    data = """import numpy as np
from torch.utils.data import Dataset


class ViaLocal(Dataset):
    def __init__(self, seed):
        state = np.random.RandomState(seed)
        self.state = state

    def __getitem__(self, i):
        return self.state.rand()


class ViaSetup(Dataset):
    def __init__(self, seed):
        self._build(seed)

    def _build(self, seed):
        self.rng = np.random.default_rng(seed)

    def __getitem__(self, i):
        return self.rng.random()


class ViaChoice(Dataset):
    def __init__(self, seed=None, rng=None):
        self.a = np.random.default_rng(seed) if seed is not None else np.random.default_rng(0)
        self.b = rng or np.random.default_rng(1)

    def __getitem__(self, i):
        return self.a.random() + self.b.random()
"""
    train = SEED_GLOBALS + """
from data import ViaChoice, ViaLocal, ViaSetup

for ds in (ViaLocal(0), ViaSetup(0), ViaChoice()):
    torch.utils.data.DataLoader(ds, num_workers=4, worker_init_fn=seed_globals)
"""
    result = lint({"data.py": data, "train.py": train}, {"select": ["TRP303"]})
    assert reported(result, lint.root, "TRP303") == {
        ("data.py", 8, "TRP303"), ("data.py", 19, "TRP303"), ("data.py", 27, "TRP303"), ("data.py", 28, "TRP303"),
    }
    assert "identical copy" in result.findings[0].message


def test_setup_methods_that_run_again_elsewhere_stay_silent(lint):
    data = """import numpy as np
from torch.utils.data import Dataset


class Reseedable(Dataset):
    def __init__(self, seed):
        self.reset(seed)

    def reset(self, seed):
        self.rng = np.random.default_rng(seed)

    def __getitem__(self, i):
        return self.rng.random()


class Lazy(Dataset):
    def __init__(self, seed):
        self.seed = seed
        self._make()

    def _make(self):
        self.rng = np.random.default_rng(self.seed)

    def __getitem__(self, i):
        if i == 0:
            self._make()
        return self.rng.random()


class Param(Dataset):
    def __init__(self, rng):
        self.rng = rng

    def __getitem__(self, i):
        return self.rng.random()
"""
    train = """import torch
from data import Reseedable


def reseed(worker_id):
    info = torch.utils.data.get_worker_info()
    info.dataset.reset(info.seed)
"""
    result = lint({"data.py": data, "train.py": train}, {"select": ["TRP303"]})
    # `reset` is called from another module (a worker_init_fn), `_make` from __getitem__ too,
    # and a generator received as a parameter is not known here
    assert reported(result, lint.root, "TRP303") == set()


def test_a_class_without_a_dataset_base_handed_to_a_dataloader(lint):
    data = """import random


class Pairs:
    def __init__(self, items):
        self.items = items
        self.random = random.Random(0)

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        return self.items[i], self.random.random()


class Unused:
    def __init__(self, items):
        self.random = random.Random(0)

    def __getitem__(self, i):
        return self.random.random()
"""
    train = SEED_GLOBALS + """
from torch.utils.data import DataLoader
from data import Pairs, Unused

pairs = Pairs(list(range(8)))
loader = DataLoader(pairs, num_workers=2, worker_init_fn=seed_globals)
table = Unused([])
"""
    result = lint({"data.py": data, "train.py": train}, {"select": ["TRP303"]})
    assert reported(result, lint.root, "TRP303") == {("data.py", 7, "TRP303")}
    assert result.findings[0].message.startswith("dataset `Pairs`")


def test_global_numpy_draws_with_a_torch_only_worker_init_stay_silent(lint):
    # Every worker reseeds `random`, torch and NumPy's global generator itself (a different
    # seed per worker) before worker_init_fn runs: drawing from the global np.random is fine.
    data = """import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset


class Jitter(Dataset):
    def __len__(self):
        return 8

    def __getitem__(self, i):
        return np.random.rand()


def seed_torch(worker_id):
    torch.manual_seed(torch.initial_seed() % 2**32)


loader = DataLoader(Jitter(), num_workers=2, worker_init_fn=seed_torch)
"""
    result = lint({"data.py": data}, {"select": ["TRP303"]})
    assert reported(result, lint.root, "TRP303") == set()


def test_a_map_style_dataset_that_draws_only_while_preparing_itself_once(lint):
    source = """import random

from torch.utils.data import Dataset, IterableDataset


class FewShot(Dataset):
    def __init__(self, rows, seed):
        self.rows = rows
        rng = random.Random(seed)
        self.rng = rng
        self._ready = False

    def _prepare(self):
        self.rows = [r + [self.rng.choice(self.rows)] for r in self.rows]
        self._ready = True

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, i):
        if not self._ready:
            self._prepare()
        return self.rows[i]


class Permuted(Dataset):
    def __init__(self, n, seed):
        self.n = n
        self.rng = random.Random(seed)
        self.order = None

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if self.order is None:
            self.order = self.rng.sample(range(self.n), self.n)
        return self.order[i]


class PermutedStream(IterableDataset):
    def __init__(self, n, seed):
        self.n = n
        self.rng = random.Random(seed)
        self.order = None

    def __iter__(self):
        if self.order is None:
            self.order = self.rng.sample(range(self.n), self.n)
        return iter(self.order)
"""
    # Each worker's copy of a map-style dataset prepares the same whole dataset, and item i is
    # the same in every worker; an iterable dataset's workers would all yield that same order.
    result = lint(source, {"select": ["TRP303"]})
    assert reported(result, lint.root, "TRP303") == {("example.py", 44, "TRP303")}
