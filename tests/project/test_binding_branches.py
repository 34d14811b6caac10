"""A branch whose arms only bind names runs each arm a path can take, for its bindings, and
gives the paths back as they came (Interpreter.binding_branch), without splitting them as other
branches do. Which arms can be taken must stay exactly as a split would have it: an arm nested
in another arm on a contradicting condition never runs, and its binding never happens."""

from __future__ import annotations

import pytest
from conftest import reported

from torchrepro_lint.project.interpreter import run

SCRIPT = '''import argparse
import torch


def main(args):
    seeded = False
{branches}
    if seeded:
        torch.manual_seed(0)
    return torch.randn(3)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--fast", action="store_true")
    parser.add_argument("--slow", action="store_true")
    main(parser.parse_args())
'''

CASES = {
    # (the arms, whether the program ends up seeding: then no TRP101)
    "arm under its own negation": ("    if args.fast:\n        if not args.fast:\n            seeded = True\n", False),
    "arm under the same condition": ("    if args.fast:\n        if args.fast:\n            seeded = True\n", True),
    "else under the same condition": ("    if args.fast:\n        if args.fast:\n            pass\n        else:\n            seeded = True\n", False),
    "condition decided by an outer arm, two levels down": (
        "    if not args.slow:\n        if args.fast:\n            if args.slow:\n                seeded = True\n", False
    ),
    "another condition": ("    if args.fast:\n        if args.slow:\n            seeded = True\n", True),
}


@pytest.mark.parametrize("case", list(CASES))
def test_an_arm_no_path_can_take_binds_nothing(lint, monkeypatch, case):
    branches, seeds = CASES[case]
    source = {"train.py": SCRIPT.format(branches=branches)}
    found = reported(lint(source, {"select": ["TRP101"]}), lint.root)
    assert (found == set()) is seeds, found
    # the same as splitting the paths at every branch
    monkeypatch.setattr(run.Interpreter, "binds_only", lambda self, branch: False)
    assert reported(lint(source, {"select": ["TRP101"]}), lint.root) == found
