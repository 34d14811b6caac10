"""Data-loading rules (TRP301-304): regressions and edge cases beyond the rules' own examples."""

from __future__ import annotations

import pytest
from conftest import reported

from torchrepro_lint.findings import Severity


def findings(result, code):
    return [f for f in result.findings if f.code == code]


def lines(lint, result, code):
    return {row for _, row, _ in reported(result, lint.root, code)}


# -- TRP301 ---------------------------------------------------------------------------------
def test_trp301_note_when_the_program_seeds_and_warning_when_not(lint):
    result = lint(
        {
            "seeded.py": """import torch
from torch.utils.data import DataLoader

if __name__ == "__main__":
    torch.manual_seed(0)
    loader = DataLoader(range(10), num_workers=2)
""",
            "unseeded.py": """from torch.utils.data import DataLoader

if __name__ == "__main__":
    loader = DataLoader(range(10), num_workers=2)
""",
        },
        {"select": ["TRP301"]},
    )
    by_file = {f.path.rsplit("/", 1)[1]: f for f in findings(result, "TRP301")}
    assert by_file["seeded.py"].severity == Severity.NOTE
    assert by_file["unseeded.py"].severity == Severity.WARNING
    assert "does not seed" in by_file["unseeded.py"].message
    assert "generator=" in by_file["seeded.py"].message and "worker_init_fn" in by_file["seeded.py"].message


def test_trp301_message_claims_a_drawn_order_only_where_the_loader_may_shuffle(lint):
    # An evaluation loader that reads in order still draws its workers' seeds from torch's
    # generator, but it has no shuffle order to lose; nor does one whose sampler orders by its
    # own seed (DistributedSampler) or never shuffles. A RandomSampler draws from the generator.
    source = """from torch.utils.data import BatchSampler, DataLoader, DistributedSampler, RandomSampler, SequentialSampler

def loaders(ds, n, rank):
    plain = DataLoader(ds, batch_size=4, num_workers=n)
    ordered = DataLoader(ds, 4, False, num_workers=n)
    shuffled = DataLoader(ds, batch_size=4, shuffle=True, num_workers=n)
    drawn = DataLoader(ds, batch_size=4, sampler=RandomSampler(ds), num_workers=n)
    sharded = DistributedSampler(ds, num_replicas=8, rank=rank)
    spread = DataLoader(ds, batch_size=4, sampler=sharded, num_workers=n)
    batched = DataLoader(ds, batch_sampler=BatchSampler(SequentialSampler(ds), 4, False), num_workers=n)
    unknown = DataLoader(ds, batch_size=4, sampler=ds.sampler(), num_workers=n)
    own = DataLoader(ds, batch_size=4, sampler=RandomSampler(ds, generator=rank), num_workers=n)
    return plain, ordered, shuffled, drawn, spread, batched, unknown, own
"""
    messages = {f.row: f.message for f in findings(lint(source), "TRP301")}
    assert sorted(messages) == [4, 5, 6, 7, 9, 10, 11, 12]
    for row in (4, 5, 9, 10, 12):  # (12: the sampler shuffles with the generator it is given)
        assert "worker seeds (not the loader's order)" in messages[row] and "shuffle order" not in messages[row]
    for row in (6, 7, 11):
        assert "worker seeds and the shuffle order" in messages[row]


def test_trp301_a_module_imported_by_a_second_program_that_never_runs_it_keeps_the_note(lint):
    # Regression (detr): a launcher imports main.py for its argument parser only; the loader's
    # function runs only in main.py's own program, which seeds torch.
    result = lint(
        {
            "main.py": """import torch
from torch.utils.data import DataLoader

def get_parser():
    return None

def main(args):
    torch.manual_seed(args.seed)
    return DataLoader(range(10), shuffle=True, num_workers=args.workers)

if __name__ == "__main__":
    main(get_parser())
""",
            "launch.py": """import main as trainer

class Job:
    def __call__(self, args):
        trainer.main(args)

if __name__ == "__main__":
    parser = trainer.get_parser()
""",
        },
        {"select": ["TRP301"]},
    )
    (finding,) = findings(result, "TRP301")
    assert finding.severity == Severity.NOTE


def test_trp301_library_code_reached_by_no_program_is_a_warning_with_both_outcomes_explained(lint):
    result = lint(
        """from torch.utils.data import DataLoader

def loader(ds, n):
    return DataLoader(ds, num_workers=n)
""",
        {"select": ["TRP301"]},
    )
    (finding,) = findings(result, "TRP301")
    assert finding.severity == Severity.WARNING
    assert "does not seed torch" in finding.message and "shifted" in finding.message


def test_trp301_positional_arguments_and_literal_values(lint):
    result = lint(
        """from torch.utils.data import DataLoader

def build(ds, debug, g):
    a = DataLoader(ds, 8, True, None, None, 4)
    b = DataLoader(ds, 8, True, None, None, 0)
    c = DataLoader(ds, num_workers=0 if debug else 4)
    d = DataLoader(ds, num_workers=4, generator=None)
    e = DataLoader(ds, 8, True, None, None, 4, None, False, False, 0, None, None, g)
    return a, b, c, d, e
""",
        {"select": ["TRP301"]},
    )
    assert lines(lint, result, "TRP301") == {4, 6, 7}


def test_trp301_opaque_dicts_and_star_args_stay_silent(lint):
    result = lint(
        """from torch.utils.data import DataLoader

def build(ds, extra, *args):
    kwargs = {"num_workers": 4}
    kwargs.update(extra)
    first = DataLoader(ds, **kwargs)
    second = DataLoader(ds, *args, num_workers=4)
    third = DataLoader(ds, num_workers=4, **make_kwargs())
    return first, second, third

def make_kwargs():
    return {}
""",
        {"select": ["TRP301"]},
    )
    assert findings(result, "TRP301") == []


def test_trp301_dict_filled_by_subscript_and_seeded_in_one_branch_only(lint):
    result = lint(
        """import torch
from torch.utils.data import DataLoader

def build(ds, fast, g):
    opts = {"batch_size": 4}
    opts["num_workers"] = 8
    plain = DataLoader(ds, **opts)
    mixed = DataLoader(ds, **({"num_workers": 2, "generator": g} if fast else {"num_workers": 2}))
    return plain, mixed
""",
        {"select": ["TRP301"]},
    )
    assert lines(lint, result, "TRP301") == {7, 8}


def test_trp301_project_subclass_that_seeds_itself_and_library_loaders(lint):
    result = lint(
        {
            "loaders.py": """import torch
from torch.utils.data import DataLoader

class SeededLoader(DataLoader):
    def __init__(self, *args, seed=0, **kwargs):
        super().__init__(*args, generator=torch.Generator().manual_seed(seed), **kwargs)

class PlainLoader(DataLoader):
    pass
""",
            "train.py": """from torch_geometric.loader import NeighborLoader
from loaders import PlainLoader, SeededLoader

def build(data, ds):
    a = SeededLoader(ds, num_workers=4)
    b = PlainLoader(ds, num_workers=4)
    c = NeighborLoader(data, num_neighbors=[10], batch_size=32, num_workers=4)
    return a, b, c
""",
        },
        {"select": ["TRP301"]},
    )
    assert reported(result, lint.root, "TRP301") == {("train.py", 6, "TRP301"), ("train.py", 7, "TRP301")}


def test_trp301_lightning_datamodule_with_seed_everything_workers(lint):
    # Regression (lightning-hydra-template): Lightning injects its own worker_init_fn when the
    # program calls seed_everything(..., workers=True).
    datamodule = """from lightning import LightningDataModule
from torch.utils.data import DataLoader

class Data(LightningDataModule):
    def train_dataloader(self):
        return DataLoader(self.train_set, num_workers=self.hparams.num_workers, shuffle=True)
"""
    seeded = lint(
        {
            "data.py": datamodule,
            "train.py": """import lightning as L

if __name__ == "__main__":
    L.seed_everything(42, workers=True)
""",
        },
        {"select": ["TRP301"]},
    )
    assert findings(seeded, "TRP301") == []


FABRIC_DATAMODULE = """from lightning import LightningDataModule
from torch.utils.data import DataLoader

class Data(LightningDataModule):
    def train_dataloader(self):
        return DataLoader(self.train_set, num_workers=4, shuffle=True)
"""


def _fabric_program(seed_call: str, set_up: bool) -> str:
    setup = "    loader = fabric.setup_dataloaders(loader)\n" if set_up else ""
    return (
        "import lightning as L\nfrom data import Data\n\n"
        "def main(fabric):\n"
        f"    {seed_call}\n"
        "    loader = Data().train_dataloader()\n"
        f"{setup}"
        "    return loader\n\n"
        'if __name__ == "__main__":\n'
        "    L.Fabric().launch(main)\n"
    )


@pytest.mark.parametrize(
    "seed_call, set_up, expected",
    [
        # Regression (litgpt's data modules): Fabric.seed_everything defaults to workers=True,
        # and fabric.setup_dataloaders then adds Lightning's worker_init_fn.
        ("fabric.seed_everything(1337)", True, set()),
        ("fabric.seed_everything(1337, workers=True)", True, set()),
        ("fabric.seed_everything(1337, workers=False)", True, {6}),
        ("fabric.seed_everything(1337)", False, {6}),  # no setup_dataloaders: nothing adds it
        ("L.seed_everything(1337)", True, {6}),  # the function's workers default is False
    ],
)
def test_trp301_fabric_seed_everything_seeds_workers_through_setup_dataloaders(lint, seed_call, set_up, expected):
    result = lint({"data.py": FABRIC_DATAMODULE, "train.py": _fabric_program(seed_call, set_up)}, {"select": ["TRP301"]})
    assert {row for path, row, _ in reported(result, lint.root, "TRP301")} == expected


def test_trp301_lightning_datamodule_without_worker_seeding_is_reported(lint):
    result = lint(
        """from lightning import LightningDataModule
from torch.utils.data import DataLoader
import lightning as L

class Data(LightningDataModule):
    def train_dataloader(self):
        return DataLoader(self.train_set, num_workers=4)

if __name__ == "__main__":
    L.seed_everything(42)
""",
        {"select": ["TRP301"]},
    )
    assert lines(lint, result, "TRP301") == {7}


# -- TRP302 ---------------------------------------------------------------------------------
def test_trp302_per_rank_seed_through_a_variable(lint):
    result = lint(
        """import torch
from torch.utils.data import random_split
import utils

def main(args, dataset):
    seed = args.seed + utils.get_rank()
    torch.manual_seed(seed)
    return random_split(dataset, [0.5, 0.5])

if __name__ == "__main__":
    main(None, None)
""",
        {"select": ["TRP302"]},
    )
    (finding,) = findings(result, "TRP302")
    assert "per rank" in finding.message


def test_trp302_sklearn_follows_numpy_seeding(lint):
    result = lint(
        """import numpy as np
from sklearn.model_selection import StratifiedShuffleSplit, train_test_split

def main(x, y):
    np.random.seed(0)
    a = train_test_split(x, y, test_size=0.1)
    b = StratifiedShuffleSplit(n_splits=3)
    return a, b

if __name__ == "__main__":
    main(None, None)
""",
        {"select": ["TRP302"]},
    )
    assert findings(result, "TRP302") == []


def test_trp302_explicit_none_and_unreached_code(lint):
    result = lint(
        """import torch
from sklearn.model_selection import KFold, StratifiedShuffleSplit

def split(ds, x):
    a = torch.utils.data.random_split(ds, [5, 5], generator=None)
    b = KFold(n_splits=5, shuffle=True, random_state=None)
    c = KFold(n_splits=5, shuffle=False)
    d = StratifiedShuffleSplit(n_splits=2)
    return a, b, c, d
""",
        {"select": ["TRP302"]},
    )
    assert lines(lint, result, "TRP302") == {5, 6, 8}
    assert all(f.severity == Severity.WARNING for f in findings(result, "TRP302"))


# -- TRP303 ---------------------------------------------------------------------------------
def test_trp303_reseed_hook_and_plain_callables(lint):
    result = lint(
        """import numpy as np
from torch.utils.data import Dataset

class Epochs(Dataset):
    def __init__(self, seed):
        self.seed = seed
        self.rng = np.random.default_rng(seed)

    def set_epoch(self, epoch):
        self.rng = np.random.default_rng(self.seed + epoch)

    def __getitem__(self, i):
        return self.rng.random()

class Scorer:
    def __init__(self):
        self.rng = np.random.default_rng(0)

    def __call__(self, x):
        return x + self.rng.random()
""",
        {"select": ["TRP303"]},
    )
    assert findings(result, "TRP303") == []


def test_trp303_transform_passed_as_keyword_in_another_module(lint):
    result = lint(
        {
            "augment.py": """import random

class Jitter:
    def __init__(self):
        self.gen = random.Random(0)

    def __call__(self, x):
        return x + self.gen.uniform(-1, 1)
""",
            "data.py": """from torchvision.datasets import CIFAR10
from augment import Jitter

train = CIFAR10("data", transform=Jitter())
""",
        },
        {"select": ["TRP303"]},
    )
    assert reported(result, lint.root, "TRP303") == {("augment.py", 5, "TRP303")}
    assert "identical copy" in findings(result, "TRP303")[0].message


def test_trp303_dataset_through_a_project_base_class_and_a_helper_method(lint):
    result = lint(
        {
            "base.py": """import torch.utils.data as tud

class Base(tud.Dataset):
    pass
""",
            "masks.py": """import numpy as np
from base import Base

class Masks(Base):
    def __init__(self):
        self.state = np.random.RandomState(7)

    def __getitem__(self, i):
        return self._mask()

    def _mask(self):
        return self.state.rand(4) > 0.5
""",
        },
        {"select": ["TRP303"]},
    )
    assert reported(result, lint.root, "TRP303") == {("masks.py", 6, "TRP303")}


# -- TRP304 ---------------------------------------------------------------------------------
def test_trp304_non_literal_shuffle_and_frameworks_stay_silent(lint):
    result = lint(
        {
            "a.py": """from torch.utils.data import DistributedSampler

def train(ds, is_train, epochs):
    sampler = DistributedSampler(ds, shuffle=is_train)
    for epoch in range(epochs):
        for batch in sampler:
            pass
""",
            "b.py": """import lightning as L
from torch.utils.data import DataLoader, DistributedSampler

class Data(L.LightningDataModule):
    def train_dataloader(self):
        return DataLoader(self.ds, sampler=DistributedSampler(self.ds))

def fit(trainer, max_epochs):
    for epoch in range(max_epochs):
        trainer.fit()
""",
        },
        {"select": ["TRP304"]},
    )
    assert findings(result, "TRP304") == []


def test_trp304_project_subclasses(lint):
    result = lint(
        """import torch
from torch.utils.data import DistributedSampler

class Ordered(DistributedSampler):
    def __iter__(self):
        return iter(range(self.rank, len(self.dataset), self.num_replicas))

class Smart(DistributedSampler):
    def __iter__(self):
        g = torch.Generator()
        g.manual_seed(self.seed + self.epoch)
        return iter(torch.randperm(len(self.dataset), generator=g).tolist())

def train(ds, epochs):
    a = Ordered(ds)
    b = Smart(ds)
    for epoch in range(epochs):
        for batch in zip(a, b):
            pass
""",
        {"select": ["TRP304"]},
    )
    assert lines(lint, result, "TRP304") == {16}


def test_trp301_plain_function_that_no_program_calls_is_unknown_not_unseeded(lint):
    # Regression (PyG tests): a module with top-level work is a program of its own, but it never
    # calls the function that builds the loader; its (missing) seed says nothing about the call.
    result = lint(
        """import torch
from torch.utils.data import DataLoader

CONFIG = dict(workers=2)
print(CONFIG)

def check_loader(ds):
    return DataLoader(ds, num_workers=2)
""",
        {"select": ["TRP301"]},
    )
    (finding,) = findings(result, "TRP301")
    assert finding.severity == Severity.WARNING
    assert "does not seed torch, and shifted" in finding.message


# -- TRP303: only a reseed that reaches the held generator counts (issue 16) --------------------
HELD = """import random

import numpy as np
import torch
from torch.utils.data import Dataset, IterableDataset

class Noise(Dataset):
    def __init__(self, n):
        self.n = n
        self.random = random.Random(0)

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return self.random.gauss(0, 1)

class Shards(IterableDataset):
    def __init__(self, files):
        self.files = files
        self.rng = np.random.default_rng(0)

    def __iter__(self):
        info = torch.utils.data.get_worker_info()
        mine = self.files if info is None else self.files[info.id::info.num_workers]
        for name in mine:
            yield name, self.rng.random()
"""


def test_trp303_global_reseed_in_worker_init_and_sharding_by_worker_info_do_not_reach_the_object(lint):
    result = lint(
        {
            "data.py": HELD,
            "train.py": """import random

import numpy as np
import torch
from data import Noise, Shards

def seed_worker(worker_id):
    info = torch.utils.data.get_worker_info()
    np.random.seed(info.seed % 2**32)
    random.seed(info.seed % 2**32)

a = torch.utils.data.DataLoader(Noise(8), num_workers=2, worker_init_fn=seed_worker)
b = torch.utils.data.DataLoader(Shards([]), num_workers=2, worker_init_fn=seed_worker)
""",
        },
        {"select": ["TRP303"]},
    )
    # `np.random` touches an attribute named `random`, and Shards calls get_worker_info() to
    # split its files: neither reseeds `self.random` / `self.rng`
    assert reported(result, lint.root, "TRP303") == {("data.py", 10, "TRP303"), ("data.py", 21, "TRP303")}


def test_trp303_reseeds_that_reach_the_object_through_the_workers_dataset(lint):
    result = lint(
        {
            "data.py": HELD,
            "train.py": """import random

import numpy as np
import torch

def reseed(worker_id):
    info = torch.utils.data.get_worker_info()
    copy = info.dataset
    copy.random.seed(info.seed)
    info.dataset.rng = np.random.default_rng(info.seed % 2**32)
""",
        },
        {"select": ["TRP303"]},
    )
    assert findings(result, "TRP303") == []


def test_trp303_dataset_recreating_its_generator_per_worker(lint):
    result = lint(
        """import numpy as np
import torch
from torch.utils.data import IterableDataset

class Stream(IterableDataset):
    def __init__(self, n):
        self.n = n
        self.rng = np.random.default_rng(0)

    def __iter__(self):
        info = torch.utils.data.get_worker_info()
        if info is not None:
            self.rng = np.random.default_rng(info.seed % 2**32)
        for _ in range(self.n):
            yield self.rng.random()
""",
        {"select": ["TRP303"]},
    )
    assert findings(result, "TRP303") == []


def test_trp301_torchdata_stateful_loader_is_a_dataloader(lint):
    # Regression (OpenRLHF): torchdata's resumable loader subclasses DataLoader and seeds its
    # workers the same way; by keyword, as for other library subclasses.
    source = """import torch
from torchdata.stateful_dataloader import StatefulDataLoader

def loaders(ds, n):
    plain = StatefulDataLoader(ds, batch_size=8, shuffle=True, num_workers=n)
    seeded = StatefulDataLoader(ds, batch_size=8, num_workers=n, generator=torch.Generator().manual_seed(0))
    inline = StatefulDataLoader(ds, batch_size=8)
    return plain, seeded, inline
"""
    assert sorted(f.row for f in findings(lint(source), "TRP301")) == [5]
