"""Chains of random edits, as a user types them, for the tests that compare an incremental
result (reparse, walk_reuse, function_reuse) with the whole one; and a script to edit, with
snippets to insert into it."""

from __future__ import annotations

import random

from torchrepro_lint.parsing.lines import physical_lines

# A training script with the shapes reparse has to get right: decorators, nested blocks,
# comments owned by a block's footer, blank lines between statements, a trailing comment.
SCRIPT = '''\
"""Train a small classifier."""
import random

import torch
from torch import nn


class Net(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.layer = nn.Linear(width, 2)
        # the head is tied below

    @torch.no_grad()
    def reset(self):
        for parameter in self.parameters():
            parameter.zero_()


def make_loader(data, workers=2):
    loader = torch.utils.data.DataLoader(
        data,
        num_workers=workers,
    )
    return loader

# training
def train(model, loader, epochs):
    optimiser = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(epochs):
        for batch, target in loader:
            loss = nn.functional.cross_entropy(model(batch), target)
            loss.backward()
            optimiser.step()

        # end of epoch
        print(epoch)
    return model


def load(path):
    try:
        state = torch.load(path)
        state = state or {}
        # the whole checkpoint
    except FileNotFoundError:
        state = None
    else:
        print("loaded")
    finally:
        print("done")
    if state:
        model = Net(4)
        model.load_state_dict(state)
    # an older checkpoint
    elif path:
        model = None
    else:
        model = Net(2)
    return model


if __name__ == "__main__":
    torch.manual_seed(0)
    train(Net(4), make_loader([]), 3)
# end
'''

SNIPPETS = [
    "x = 1\n",
    "    y = 2\n",
    "        z = 3\n",
    "            w = 4\n",
    "# note\n",
    "    # indented note\n",
    "\n",
    "def helper():\n    return 1\n",
    "    if flag:\n        pass\n",
    "@decorator\n",
    '    """doc"""\n',
]


def edit_chain(rng: random.Random, text: str, snippets: list[str], edits: int):
    """Up to `edits` texts, each made from the last one that compiled by one edit: a snippet
    inserted at a random line, a line deleted, or a comment added to a line. Texts that do not
    compile are skipped (the chain goes on from the last one that did)."""
    for _ in range(edits):
        lines = physical_lines(text)
        at = rng.randrange(len(lines) + 1)
        choice = rng.random()
        if choice < 0.5:
            lines.insert(at, rng.choice(snippets))
        elif choice < 0.75 and at < len(lines):
            del lines[at]
        elif at < len(lines):
            lines[at] = lines[at].rstrip("\n") + "  # changed\n"
        edited = "".join(lines)
        try:
            compile(edited, "script.py", "exec")
        except SyntaxError:
            continue
        text = edited
        yield text
