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
