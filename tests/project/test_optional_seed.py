"""A program that seeds only when asked (`if args.seed is not None: set_seed(args.seed)`) and
reseeds later for something else (sample images for a fixed prompt seed) did not seed late on
the path without a seed: that run chose to stay random. Found on kohya-ss/sd-scripts, whose
training scripts all got TRP105 at their `sample_images(...)` calls."""

from __future__ import annotations

import pytest
from conftest import reported

SCRIPT = '''import argparse
import torch
import torch.nn as nn


def sample_images(model, prompt_seed=1234):
    torch.manual_seed(prompt_seed)
    return model(torch.randn(1, 4))


def main(args):
    {seeding}
    model = nn.Linear(4, 4)
    noise = torch.randn(8, 4)
    sample_images(model)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--seed", type=int, default=None)
    main(parser.parse_args())
'''


def test_a_reseed_after_a_declined_seed_is_not_a_late_seed(lint):
    seeding = "if args.seed is not None:\n        torch.manual_seed(args.seed)"
    result = lint({"train.py": SCRIPT.format(seeding=seeding)}, {"select": ["TRP105", "TRP101"]})
    assert reported(result, lint.root) == set()


@pytest.mark.parametrize(
    "seeding",
    ["pass", "if args.seed is not None:\n        print(args.seed)"],
    ids=["never seeded first", "a branch that does not seed"],
)
def test_a_reseed_in_a_program_that_never_offered_a_seed_is_still_late(lint, seeding):
    result = lint({"train.py": SCRIPT.format(seeding=seeding)}, {"select": ["TRP105"]})
    assert {code for _, _, code in reported(result, lint.root)} == {"TRP105"}


def test_both_arms_seeding_is_no_declined_seed(lint):
    # peft's LoRA-FA example builds a seeding Trainer in either arm of `if lorafa:`; the adapter
    # drawn before it is still a draw before the seed on both paths.
    source = """import sys
import torch
import torch.nn as nn


def main(flag):
    model = nn.Linear(4, 4)
    if flag:
        torch.manual_seed(1)
    else:
        torch.manual_seed(2)


if __name__ == "__main__":
    main(len(sys.argv) > 1)
"""
    result = lint({"train.py": source}, {"select": ["TRP105"]})
    assert {code for _, _, code in reported(result, lint.root)} == {"TRP105"}


def test_a_branch_that_happens_to_seed_on_another_condition_is_no_declined_seed(lint):
    # accelerate's test script: `if ...: check_seedable_sampler()` (which seeds) is work, not an
    # optional seed; the path that skips it still seeds late at the end.
    source = """import sys
import torch
import torch.nn as nn


def check_sampler():
    torch.manual_seed(42)


def main(verbose):
    model = nn.Linear(4, 4)
    if verbose:
        check_sampler()
    torch.manual_seed(0)


if __name__ == "__main__":
    main(len(sys.argv) > 1)
"""
    result = lint({"train.py": source}, {"select": ["TRP105"]})
    assert (("train.py", 14, "TRP105")) in reported(result, lint.root)
