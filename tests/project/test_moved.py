"""interpreter/moved.py's ref_map: the refs of an edited module's statements before the edit
stay, those after it follow their statement, and those in the edited region have none."""

from __future__ import annotations

from types import SimpleNamespace

from torchrepro_lint.analysis.module_index import ModuleIndex
from torchrepro_lint.parsing.source import SourceFile
from torchrepro_lint.project import ir
from torchrepro_lint.project.extract.lowering import ExpressionTexts, Lowering
from torchrepro_lint.project.interpreter.moved import _leaves, ref_map

BEFORE = '''\
import torch


def setup(seed):
    torch.manual_seed(seed)
    noise = torch.randn(2)
    return noise


def train(model, loader):
    for batch in loader:
        if batch is None:
            torch.rand(1)
        try:
            model(batch)
        except RuntimeError:
            torch.randn(3)


setup(0)
'''


def _module(text: str) -> SimpleNamespace:
    lowering = Lowering(ModuleIndex(SourceFile("script.py", text), "pkg"), None, ExpressionTexts.start())
    return SimpleNamespace(ir=lowering.build())


def _effects(module) -> dict:
    """ref -> (kind, detail) of each Effect leaf, to name what a ref points at."""
    return {leaf.ref: (leaf.kind, leaf.detail) for leaf in _leaves(module.ir) if isinstance(leaf, ir.Effect)}


def test_a_line_inserted_in_a_function_keeps_refs_above_and_shifts_those_below_to_the_same_statement():
    old = _module(BEFORE)
    new = _module(BEFORE.replace("    noise = torch.randn(2)\n", "    noise = torch.randn(2)\n    extra = torch.rand(5)\n"))
    mapped = ref_map(old, new)
    old_effects, new_effects = _effects(old), _effects(new)
    assert len(new_effects) == len(old_effects) + 1
    # setup's seed and draw stay; the draws in train's loop branch and try handler shift by one
    assert [ref for ref in old_effects if mapped[ref] != ref] == [5, 6]
    assert {mapped[5], mapped[6]} == {6, 7}
    for ref, effect in old_effects.items():  # every old statement lands on its own content
        assert new_effects[mapped[ref]] == effect
    assert mapped[1] == 1  # the top-level call (the top level's refs come first)


def test_a_changed_statement_has_no_counterpart():
    old = _module(BEFORE)
    new = _module(BEFORE.replace("    noise = torch.randn(2)\n", "    noise = torch.manual_seed(2)\n"))
    mapped = ref_map(old, new)
    assert 3 not in mapped  # the draw became a seed
    assert all(mapped[ref] == ref for ref in (0, 1, 2, 5, 6))


def test_the_same_ir_maps_every_leaf_to_itself():
    old = _module(BEFORE)
    assert ref_map(old, old) == {leaf.ref: leaf.ref for leaf in _leaves(old.ir)}
