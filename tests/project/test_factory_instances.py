"""Methods on what a project factory returns are followed: guided-diffusion's sampling scripts do
`model, diffusion = create_model_and_diffusion(...)` (which returns what
`create_gaussian_diffusion()` returns, a `SpacedDiffusion(...)`), then `diffusion.p_sample_loop(...)`,
whose noise the program model missed."""

from __future__ import annotations

import pytest
from conftest import reported

LIBRARY = '''import torch


class Diffusion:
    def sample(self, n):
        return torch.randn(n)


class Quiet:
    def sample(self, n):
        return torch.zeros(n)


def create_diffusion(steps=10):
    diffusion = Diffusion()
    return diffusion


def create_either(quiet):
    if quiet:
        return Quiet()
    return Diffusion()


def create_pair():
    model = torch.nn.Identity()
    return model, create_diffusion()
'''

SCRIPT = '''from library import create_diffusion, create_either, create_pair


def main():
    {make}
    return diffusion.sample(4)


if __name__ == "__main__":
    main()
'''


@pytest.mark.parametrize(
    "make",
    ["diffusion = create_diffusion()", "model, diffusion = create_pair()"],
    ids=["returned object", "item of a returned tuple, through a second factory"],
)
def test_a_method_of_what_a_factory_returns_is_followed(lint, make):
    result = lint({"library.py": LIBRARY, "sample.py": SCRIPT.format(make=make)}, {"select": ["TRP101"]})
    assert {code for _, _, code in reported(result, lint.root)} == {"TRP101"}


@pytest.mark.parametrize(
    "make",
    ["diffusion = create_either(True)", "diffusion, model = create_pair()"],
    ids=["two classes returned", "the other item"],
)
def test_an_object_of_no_single_known_class_is_not_followed(lint, make):
    result = lint({"library.py": LIBRARY, "sample.py": SCRIPT.format(make=make)}, {"select": ["TRP101"]})
    assert reported(result, lint.root) == set()
