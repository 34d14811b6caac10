"""accelerate, as read in its source: `Accelerator(...)` neither seeds nor switches determinism on
(its __init__ calls no set_seed; `rng_types` only keeps generators in step across processes),
and it picks its device at run time (MPS, else CUDA if available, else CPU; `cpu=True` forces
the CPU), so by itself it is no evidence that the program uses CUDA. `accelerate.utils.set_seed`
seeds all three generators, with `seed + process_index` when `device_specific=True`."""

from __future__ import annotations

import pytest
from conftest import reported

IMPORTS = "import torch\nimport torch.nn as nn\nfrom accelerate import Accelerator\nfrom accelerate.utils import set_seed"


def script(body: str) -> dict[str, str]:
    lines = "".join(f"    {line}\n" for line in body.strip("\n").splitlines())
    return {"train.py": f"{IMPORTS}\n\nif __name__ == '__main__':\n{lines}"}


GUARD_ROW = 6


def test_an_accelerator_does_not_seed(lint):
    body = "accelerator = Accelerator()\nmodel = accelerator.prepare(nn.Linear(4, 2))"
    assert reported(lint(script(body), {"select": ["TRP101"]}), lint.root) == {("train.py", GUARD_ROW, "TRP101")}


@pytest.mark.parametrize("arguments", ["", "cpu=False", "mixed_precision='fp16'", "device_placement=True"])
def test_an_accelerator_is_not_cuda_evidence_by_itself(lint, arguments):
    # fp16 on a CPU-only machine is silently not used (Accelerator.__init__ checks device.type)
    body = f"set_seed(0)\naccelerator = Accelerator({arguments})\nmodel = nn.Linear(4, 2).to(accelerator.device)"
    assert reported(lint(script(body), {"select": ["TRP205"]}), lint.root) == set()


def test_cuda_shown_elsewhere_still_counts_with_an_accelerator(lint):
    body = "set_seed(0)\naccelerator = Accelerator()\nmodel = nn.Linear(4, 2).cuda()"
    assert reported(lint(script(body), {"select": ["TRP205"]}), lint.root) == {("train.py", 7, "TRP205")}


@pytest.mark.parametrize(
    "seed, per_rank",
    [
        ("set_seed(0, device_specific=True)", True),
        ("set_seed(0, True)", True),
        ("set_seed(0)", False),
        ("set_seed(0, device_specific=False)", False),
    ],
)
def test_a_device_specific_seed_splits_differently_on_every_rank(lint, seed, per_rank):
    body = f"{seed}\ndata = torch.utils.data.TensorDataset(torch.arange(10))\ntrain, val = torch.utils.data.random_split(data, [8, 2])"
    found = reported(lint(script(body), {"select": ["TRP302"]}), lint.root)
    assert found == ({("train.py", 9, "TRP302")} if per_rank else set())
