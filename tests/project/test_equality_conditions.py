"""`name == literal` conditions are decided where the name holds a literal (a literal argument,
a default, a constant): the branch not taken adds nothing to the program."""

from __future__ import annotations

from conftest import reported

SELECT = {"select": ["TRP205", "TRP101"]}

PLACEMENT = """import torch

def placed(kind, model):
    if kind == "gpu":
        return model.cuda()
    if kind != "cpu":
        raise ValueError(kind)
    return model

def run(kind, steps=1):
    torch.manual_seed(0)
    model = placed(kind, torch.nn.Linear(2, 2))
    if steps == 0:
        return model
    return model(torch.ones(1, 2))
"""


def test_a_literal_argument_decides_the_comparison(lint):
    # Placed on the CPU by a literal: the CUDA branch never runs, so no TRP205.
    files = {"place.py": PLACEMENT, "main.py": "from place import run\n\nif __name__ == '__main__':\n    run('cpu')\n"}
    assert reported(lint(files, SELECT), lint.root) == set()


def test_the_other_literal_takes_the_other_branch(lint):
    files = {"place.py": PLACEMENT, "main.py": "from place import run\n\nif __name__ == '__main__':\n    run('gpu')\n"}
    assert reported(lint(files, SELECT), lint.root) == {("main.py", 4, "TRP205")}


def test_an_unknown_value_keeps_both_branches(lint):
    main = "import sys\nfrom place import run\n\nif __name__ == '__main__':\n    run(sys.argv[1])\n"
    assert reported(lint({"place.py": PLACEMENT, "main.py": main}, SELECT), lint.root) == {("main.py", 5, "TRP205")}


def test_unknown_comparisons_still_correlate_by_their_text(lint):
    # Two tests of the same opaque comparison take the same arm on one path: seeded and drawing
    # on one path, neither on the other, so never "draws but never seeds".
    source = """import sys
import torch

if __name__ == "__main__":
    mode = sys.argv[1]
    if mode == "train":
        torch.manual_seed(0)
    if mode == "train":
        torch.rand(3)
"""
    assert reported(lint({"job.py": source}, SELECT), lint.root) == set()
