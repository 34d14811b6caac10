"""pipeline/lowered_store.ir_digest_of: a module's IR digest put together from its parts' digests, each
part taken from the file's last IR where it is the same object (an edited buffer's functions)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from torchrepro_lint.analysis.module_index import ModuleIndex
from torchrepro_lint.parsing.source import SourceFile
from torchrepro_lint.pipeline.lowered_store import ir_digest_of
from torchrepro_lint.project import ir
from torchrepro_lint.project.extract.lowering import Lowering

SCRIPT = """import torch
from torch import nn as layers

STEPS = 3


def fix_seeds():
    torch.manual_seed(0)


class Model(layers.Module):
    def forward(self, x):
        return x


if __name__ == "__main__":
    fix_seeds()
"""


def lowered(text: str = SCRIPT) -> ir.ModuleIR:
    return Lowering(ModuleIndex(SourceFile(Path("/project/train.py"), text), None)).build()


def test_equal_irs_lowered_apart_have_one_digest():
    first, second = lowered(), lowered()
    assert first.functions["fix_seeds"] is not second.functions["fix_seeds"]
    assert ir_digest_of(first)[0] == ir_digest_of(second)[0]


def test_every_field_of_the_module_ir_counts():
    # A field left out of the digest would let a cached result survive an edit of that field.
    module_ir = lowered()
    other = lowered("import random\n\n\ndef other():\n    random.seed(1)\n")
    digest = ir_digest_of(module_ir)[0]
    changed = {
        "top": other.top,
        "main_guard": None,
        "functions": {**module_ir.functions, "other": other.functions["other"]},
        "classes": {},
        "aliases": {**module_ir.aliases, "extra": "random.seed"},
        "imported_modules": (),
        "has_top_level_work": not module_ir.has_top_level_work,
    }
    assert set(changed) == {field.name for field in dataclasses.fields(ir.ModuleIR)}
    for name, value in changed.items():
        assert getattr(module_ir, name) != value
        assert ir_digest_of(dataclasses.replace(module_ir, **{name: value}))[0] != digest, name


def test_a_part_is_taken_from_before_only_when_it_is_the_same_object():
    module_ir = lowered()
    seeds = module_ir.functions["fix_seeds"]
    digest, parts = ir_digest_of(module_ir)
    assert parts[id(seeds)] == (seeds, ir_digest_of(module_ir)[1][id(seeds)][1])
    assert {id(value) for value, _ in parts.values()} == {id(module_ir.top), *map(id, module_ir.functions.values())}
    # the digest kept for the same object is taken (a wrong one shows it was)
    planted = {**parts, id(seeds): (seeds, "planted")}
    assert ir_digest_of(module_ir, planted)[0] != digest
    # under the same id but for another object (one since gone), it is not
    stale = {**parts, id(seeds): (lowered().functions["fix_seeds"], "planted")}
    assert ir_digest_of(module_ir, stale)[0] == digest
