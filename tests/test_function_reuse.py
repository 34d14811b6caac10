"""project/extract/function_reuse.py: lowering an edited buffer with the untouched functions'
IR taken from the previous lowering gives the IR, and the node table, of a whole lowering."""

from __future__ import annotations

import random

import pytest

from edit_chains import edit_chain
from torchrepro_lint.analysis.module_index import ModuleIndex
from torchrepro_lint.pipeline.cache import structural_digest
from torchrepro_lint.pipeline.source import SourceFile
from torchrepro_lint.project.extract.function_reuse import function_reuse
from torchrepro_lint.project.extract.lowering import ExpressionTexts, Lowering
from torchrepro_lint.server.edited_source import EditedSource

# Functions that read each other's facts: a class whose methods store and read a device, a
# helper the others call, a traced model, a nested function, module-level names.
SCRIPT = '''\
import random

import torch
from torch import nn

DEVICE = "cuda"


def set_seed(seed):
    random.seed(seed)
    torch.manual_seed(seed)


class Trainer:
    def __init__(self, model, device=DEVICE):
        self.model = model
        self.device = device

    def fit(self, loader):
        self.model.to(self.device)
        for batch in loader:
            noise = torch.randn(4)
            loss = self.model(batch + noise)
            loss.backward()
        return loss

    def export(self, example):
        return torch.jit.trace(self.model, example)


def build(width):
    def block():
        return nn.Linear(width, width)

    layers = [block() for _ in range(3)]
    model = nn.Sequential(*layers)
    return model


def main():
    set_seed(0)
    trainer = Trainer(build(8))
    trainer.device = "cuda"
    example = torch.randn(2, 8)
    trainer.fit([example])
    if torch.cuda.is_available():
        torch.backends.cudnn.benchmark = True


try:
    def fast_path(x):
        return x
except ImportError:
    fast_path = None


if __name__ == "__main__":
    main()
'''

SNIPPETS = [
    "        x = 1\n",
    "    total = 0\n",
    "        self.device = 'cpu'\n",
    "    trainer.device = 'cpu'\n",
    "        torch.manual_seed(1)\n",
    "    set_seed(1)\n",
    "        import os\n",
    "    global DEVICE\n",
    "    def inner():\n        return 1\n",
    "        example = torch.randn(2, 8)\n",
    "        torch.jit.trace(self.model, noise)\n",
    "    lam = lambda: 1\n",
    "    # a comment\n",
    "DEVICE = 'cpu'\n",
]


def _lowered(source, previous):
    """The index, the lowering and what it took, of `source` (from `previous`, the last one)."""
    index = ModuleIndex(source, "pkg")
    lowering = Lowering(index, None, previous[1].texts if previous is not None else ExpressionTexts.start())
    if previous is not None:
        old_source, old_lowering, module_ir = previous
        lowering.reuse = function_reuse(index, old_source.module, module_ir, old_lowering.nodes, old_lowering.layout)
    module_ir = lowering.build()
    return index, lowering, module_ir


def _whole(text: str, tree):
    source = SourceFile("script.py", text)
    source.__dict__["module"] = tree  # the same tree, lowered whole
    lowering = Lowering(ModuleIndex(source, "pkg"), None, ExpressionTexts.start())
    return lowering, lowering.build()


def _check(source, previous):
    index, lowering, module_ir = _lowered(source, previous)
    whole_lowering, whole_ir = _whole(source.text, source.module)
    assert structural_digest(module_ir) == structural_digest(whole_ir)
    assert [id(node) for node in lowering.nodes] == [id(node) for node in whole_lowering.nodes]
    # the texts a whole lowering generates are there for the next one (with those of earlier
    # lowerings still in the tree)
    assert set(whole_lowering.texts.now) <= set(lowering.texts.now)
    assert all(text == lowering.texts.now[key][1] for key, (_, text) in whole_lowering.texts.now.items())
    assert all(node in index.parents for node, _ in lowering.texts.now.values())  # only this tree's
    taken = len(lowering.reuse.paths) + 1 if lowering.reuse is not None else 0  # (and the top level)
    return (source, lowering, module_ir), taken


def _edit(previous_source, text):
    return EditedSource("script.py", text, previous=previous_source.parsed)


def _lowering_after(old: str, new: str) -> Lowering:
    """The lowering of SCRIPT with `old` replaced by `new`, from SCRIPT's (checked as whole)."""
    first = EditedSource("script.py", SCRIPT)
    state, _ = _check(first, None)
    (_, lowering, _), _ = _check(_edit(first, SCRIPT.replace(old, new)), state)
    return lowering


def test_an_edit_in_one_method_takes_the_other_functions():
    lowering = _lowering_after("            loss.backward()\n", "            loss.backward()\n            step = 1\n")
    assert lowering.reuse is not None
    assert lowering.reuse.paths == {"set_seed", "Trainer.__init__", "Trainer.export", "build", "build.block", "main", "fast_path"}


@pytest.mark.parametrize(
    "line",
    [
        "        self.device = 'cpu'\n",  # a store other methods' lowering reads
        "        import os\n",
        "        torch.jit.trace(self.model, noise)\n",  # makes `noise` an example input (calls._only_traced)
    ],
)
def test_an_edit_that_other_functions_read_takes_none(line):
    lowering = _lowering_after("            loss.backward()\n", "            loss.backward()\n" + "    " + line)
    assert lowering.reuse is None


def test_an_edit_at_the_top_level_takes_nothing():
    assert _lowering_after("    main()\n", "    torch.manual_seed(1)\n    main()\n").reuse is None


def test_an_edit_in_a_function_under_a_top_level_try_takes_nothing():
    # The `try` is a new statement on the way down to the edit, and top-level code: lowered whole.
    assert _lowering_after("        return x\n", "        y = x\n        return x\n").reuse is None


def test_a_function_nested_in_the_edited_one_is_lowered_again():
    lowering = _lowering_after("    return model\n", "    width = 4\n    return model\n")
    assert "build" not in lowering.reuse.paths and "build.block" not in lowering.reuse.paths
    assert "main" in lowering.reuse.paths


@pytest.mark.parametrize("seed", range(10))
def test_random_edits_give_the_ir_of_a_whole_lowering(seed):
    rng = random.Random(seed)
    source = EditedSource("script.py", SCRIPT)
    state, _ = _check(source, None)
    taken = 0
    for text in edit_chain(rng, SCRIPT, SNIPPETS, 30):
        source = _edit(source, text)
        state, count = _check(source, state)
        taken += count
    assert taken > 0
