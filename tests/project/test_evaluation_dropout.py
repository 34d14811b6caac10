"""Dropout layers draw only in a training-mode forward pass: in a program that only evaluates
weights it loads (no training, a checkpoint or pretrained models behind the modules), they are
no more torch randomness than building the modules is (TRP101's checkpoint-only trap). Found on
dinov2's dinotxt notebook: a hub function builds the model, calls `eval()`, loads both state
dicts with `torch.hub.load_state_dict_from_url`; the notebook only runs it under no_grad."""

from __future__ import annotations

import pytest
from conftest import reported

MODELS = '''import torch
import torch.nn as nn


class Encoder(nn.Module):
    def __init__(self, p):
        super().__init__()
        self.proj = nn.Linear(4, 4)
        self.drop = nn.Dropout(p)

    def forward(self, x):
        return self.drop(self.proj(x))


def pretrained_encoder():
    model = Encoder(0.1)
    model.eval()
    model.load_state_dict(torch.hub.load_state_dict_from_url("https://example.com/encoder.pth"))
    return model
'''

EVALUATE = '''import torch
from models import pretrained_encoder

if __name__ == "__main__":
    model = pretrained_encoder()
    with torch.no_grad():
        print(model(torch.ones(1, 4)))
'''


def test_dropout_of_a_loaded_model_under_evaluation_is_not_randomness(lint):
    result = lint({"models.py": MODELS, "evaluate.py": EVALUATE}, {"select": ["TRP101"]})
    assert reported(result, lint.root) == set()


@pytest.mark.parametrize(
    "before, after",
    [
        ("    model = pretrained_encoder()\n",
         "    model = pretrained_encoder()\n    torch.optim.SGD(model.parameters(), lr=0.1).step()\n",
         ),
        ("    model = pretrained_encoder()\n",
         "    model = pretrained_encoder()\n    sampler = torch.utils.data.RandomSampler(range(8))\n",
         ),
    ],
    ids=["it trains", "a random sampler draws whatever the mode"],
)
def test_other_randomness_still_counts(lint, before, after):
    result = lint({"models.py": MODELS, "evaluate.py": EVALUATE.replace(before, after)}, {"select": ["TRP101"]})
    assert reported(result, lint.root) == {("evaluate.py", 4, "TRP101")}


def test_dropout_of_a_fresh_model_counts(lint):
    fresh = MODELS.replace('    model.load_state_dict(torch.hub.load_state_dict_from_url("https://example.com/encoder.pth"))\n', "")
    result = lint({"models.py": fresh, "evaluate.py": EVALUATE}, {"select": ["TRP101"]})
    assert reported(result, lint.root) == {("evaluate.py", 4, "TRP101")}
