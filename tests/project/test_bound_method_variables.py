"""Calls through a variable that holds a bound method are followed: guided-diffusion's sampling
scripts pick a sampler with `sample_fn = diffusion.p_sample_loop if not args.use_ddim else
diffusion.ddim_sample_loop` and call `sample_fn(...)`, whose noise the program model missed."""

from __future__ import annotations

import pytest
from conftest import reported

SCRIPT = '''import torch


class Sampler:
    def ancestral(self, n):
        return {ancestral}

    def deterministic(self, n):
        return torch.zeros(n)


def main(fast=False):
    sampler = Sampler()
    {choice}
    return sample_fn(4)


if __name__ == "__main__":
    main()
'''


@pytest.mark.parametrize(
    "choice",
    ["sample_fn = sampler.ancestral", "sample_fn = sampler.ancestral if not fast else sampler.deterministic"],
    ids=["one method", "either of two"],
)
def test_a_draw_reached_through_a_bound_method_in_a_variable_counts(lint, choice):
    source = SCRIPT.format(ancestral="torch.randn(n)", choice=choice)
    result = lint({"sample.py": source}, {"select": ["TRP101"]})
    assert {code for _, _, code in reported(result, lint.root)} == {"TRP101"}


def test_methods_that_draw_nothing_stay_quiet(lint):
    source = SCRIPT.format(ancestral="torch.ones(n)", choice="sample_fn = sampler.ancestral if not fast else sampler.deterministic")
    result = lint({"sample.py": source}, {"select": ["TRP101"]})
    assert reported(result, lint.root) == set()
