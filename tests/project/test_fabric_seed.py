"""Lightning Fabric, as read in its source: `Fabric.seed_everything` is a static method that calls
`lightning.fabric.utilities.seed.seed_everything` (torch, NumPy and random), with `workers`
defaulting to True. Training code calls it on the object `fabric.launch(fn)` hands `fn`, whose
type the linter cannot see, so any `<object>.seed_everything(...)` counts (litgpt's tutorials and
finetuning scripts were reported as never seeding torch)."""

from __future__ import annotations

import pytest
from conftest import reported

SEEDED = [
    (
        "a parameter of the launched function",
        "import lightning as L\nimport torch.nn as nn\n\n"
        "def main(fabric):\n    fabric.seed_everything(7)\n    return nn.Linear(2, 2)\n\n"
        "if __name__ == '__main__':\n    L.Fabric().launch(main)\n",
    ),
    (
        "an annotated parameter",
        "import lightning as L\nimport torch.nn as nn\n\n"
        "def main(fabric: L.Fabric, steps: int):\n    fabric.seed_everything(7 + fabric.global_rank)\n"
        "    return nn.Linear(2, 2)\n\n"
        "if __name__ == '__main__':\n    L.Fabric().launch(main, 10)\n",
    ),
    (
        "a local Fabric",
        "import lightning as L\nimport torch.nn as nn\n\n"
        "if __name__ == '__main__':\n    fabric = L.Fabric()\n    fabric.seed_everything(7)\n    nn.Linear(2, 2)\n",
    ),
    (
        "an attribute holding it",
        "import lightning as L\nimport torch.nn as nn\n\n"
        "class Runner:\n    def __init__(self):\n        self.fabric = L.Fabric()\n"
        "    def run(self):\n        self.fabric.seed_everything(7)\n        return nn.Linear(2, 2)\n\n"
        "if __name__ == '__main__':\n    Runner().run()\n",
    ),
    (
        "the static method through the class",
        "import lightning as L\nimport torch.nn as nn\n\n"
        "if __name__ == '__main__':\n    L.Fabric.seed_everything(7)\n    nn.Linear(2, 2)\n",
    ),
]


@pytest.mark.parametrize("source", [s for _, s in SEEDED], ids=[i for i, _ in SEEDED])
def test_fabric_seed_everything_seeds_torch(lint, source):
    assert reported(lint({"train.py": source}, {"select": ["TRP101", "TRP102"]}), lint.root) == set()


def test_a_project_method_of_that_name_is_followed_not_assumed(lint):
    # `self.seed_everything()` is the project's own method: what it does is read, and this one
    # seeds only NumPy.
    source = (
        "import numpy as np\nimport torch.nn as nn\n\n"
        "class Experiment:\n    def seed_everything(self):\n        np.random.seed(0)\n"
        "    def run(self):\n        self.seed_everything()\n        return nn.Linear(2, 2)\n\n"
        "if __name__ == '__main__':\n    Experiment().run()\n"
    )
    assert reported(lint({"train.py": source}, {"select": ["TRP101"]}), lint.root) == {("train.py", 11, "TRP101")}


# TRP301 and the loaders Lightning seeds: `seed_everything(..., workers=True)` (Fabric's method
# defaults `workers` to True) sets PL_SEED_WORKERS=1, and `fabric.setup_dataloaders` or a
# Lightning Trainer's fit/validate/test/predict then gives every loader without a
# worker_init_fn Lightning's (fabric/utilities/data.py _auto_add_worker_init_fn).
WORKERS = {"select": ["TRP301"]}
HEAD = "import lightning as L\nimport torch\nfrom torch.utils.data import DataLoader, TensorDataset\n\n"
DATA = "    ds = TensorDataset(torch.zeros(8, 2))\n"


def fabric_script(seed: str, loader: str, after: str = "") -> str:
    return (
        HEAD + "def main(fabric):\n" + DATA + (f"    {seed}\n" if seed else "")
        + f"    {loader}\n" + (f"    {after}\n" if after else "")
        + "    for batch in loader:\n        pass\n\n"
        "if __name__ == '__main__':\n    L.Fabric().launch(main)\n"
    )


SETUP = "loader = fabric.setup_dataloaders(loader)"
SEEDED_LOADERS = [
    ("fabric-method", fabric_script("fabric.seed_everything(7)", "loader = DataLoader(ds, num_workers=4, shuffle=True)", SETUP)),
    ("argument", fabric_script("fabric.seed_everything(7)", "loader = fabric.setup_dataloaders(DataLoader(ds, num_workers=2))")),
    ("function-workers-true", fabric_script("L.seed_everything(7, workers=True)", "loader = DataLoader(ds, num_workers=4)", SETUP)),
    (
        "no-distributed-sampler",  # the worker_init_fn is added whatever the sampler
        fabric_script("fabric.seed_everything(7)", "loader = DataLoader(ds, num_workers=4)",
                      "loader = fabric.setup_dataloaders(loader, use_distributed_sampler=False)"),
    ),
    (
        "trainer-fit",
        HEAD + "def main(model):\n" + DATA + "    L.seed_everything(3, workers=True)\n"
        "    loader = DataLoader(ds, num_workers=4, shuffle=True)\n"
        "    trainer = L.Trainer(max_epochs=1)\n    trainer.fit(model, train_dataloaders=loader)\n\n"
        "if __name__ == '__main__':\n    main(None)\n",
    ),
    (
        "trainer-from-argparse-args",  # Lightning 1.x
        "import pytorch_lightning as pl\nfrom torch.utils.data import DataLoader\n\n"
        "def main(args, model, ds):\n    pl.seed_everything(args.seed, workers=True)\n"
        "    loader = DataLoader(ds, num_workers=4)\n"
        "    trainer = pl.Trainer.from_argparse_args(args)\n    trainer.validate(model, dataloaders=loader)\n\n"
        "if __name__ == '__main__':\n    main(None, None, None)\n",
    ),
    (
        "seeded-by-the-caller",
        HEAD + "def setup(fabric, ds):\n    loader = DataLoader(ds, num_workers=4)\n"
        "    return fabric.setup_dataloaders(loader)\n\n"
        "def main(fabric):\n" + DATA + "    fabric.seed_everything(1)\n    for batch in setup(fabric, ds):\n        pass\n\n"
        "if __name__ == '__main__':\n    L.Fabric().launch(main)\n",
    ),
]


@pytest.mark.parametrize("source", [s for _, s in SEEDED_LOADERS], ids=[i for i, _ in SEEDED_LOADERS])
def test_a_loader_lightning_seeds_the_workers_of(lint, source):
    assert reported(lint({"train.py": source}, WORKERS), lint.root) == set()


def test_a_loader_returned_to_a_script_that_hands_it_to_a_trainer(lint):
    files = {
        "data.py": "from torch.utils.data import DataLoader\n\n"
        "def make_loader(ds, workers):\n    loader = DataLoader(ds, batch_size=4, shuffle=True, num_workers=workers)\n    return loader\n",
        "train.py": "import lightning as L\nfrom data import make_loader\n\n"
        "def main(args, model, ds):\n    L.seed_everything(args.seed, workers=True)\n"
        "    train_dl = make_loader(ds, args.workers)\n    trainer = L.Trainer()\n    trainer.fit(model, train_dl)\n\n"
        "if __name__ == '__main__':\n    main(None, None, None)\n",
    }
    assert reported(lint(files, WORKERS), lint.root) == set()
    files["train.py"] = files["train.py"].replace(", workers=True", "")  # PL_SEED_WORKERS stays 0
    assert reported(lint(files, WORKERS), lint.root) == {("data.py", 4, "TRP301")}


UNSEEDED_WORKERS = [
    ("function-default", fabric_script("L.seed_everything(7)", "loader = DataLoader(ds, num_workers=4)", SETUP)),
    (
        "fabric-function",
        fabric_script("L.fabric.seed_everything(7)", "loader = DataLoader(ds, num_workers=4)", SETUP),
    ),
    ("workers-false", fabric_script("fabric.seed_everything(7, workers=False)", "loader = DataLoader(ds, num_workers=4)", SETUP)),
    ("seeded-after", fabric_script("", "loader = DataLoader(ds, num_workers=4)", SETUP + "\n    fabric.seed_everything(7)")),
    ("not-handed", fabric_script("fabric.seed_everything(7)", "loader = DataLoader(ds, num_workers=4)")),
    (
        "not-a-lightning-trainer",
        HEAD + "from engine import Trainer\n\ndef main(model):\n" + DATA + "    L.seed_everything(3, workers=True)\n"
        "    loader = DataLoader(ds, num_workers=4, shuffle=True)\n"
        "    trainer = Trainer()\n    trainer.fit(model, loader)\n\n"
        "if __name__ == '__main__':\n    main(None)\n",
    ),
]


@pytest.mark.parametrize("source", [s for _, s in UNSEEDED_WORKERS], ids=[i for i, _ in UNSEEDED_WORKERS])
def test_a_loader_whose_workers_lightning_does_not_seed(lint, source):
    row = next(i for i, line in enumerate(source.splitlines(), 1) if "DataLoader(ds" in line)
    assert reported(lint({"train.py": source}, WORKERS), lint.root) == {("train.py", row, "TRP301")}
