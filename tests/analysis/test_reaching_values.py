"""dataflow.core's reaching_value: the nearest assignment before a name, not one in another
branch of an `if` (whisper's pad_or_trim rebinds its argument in the tensor branch and calls
NumPy's `take` in the other; the op rules took the array for a tensor)."""

from __future__ import annotations

from pathlib import Path

import libcst as cst

from torchrepro_lint.analysis.dataflow.core import flow
from torchrepro_lint.analysis.module_index import ModuleIndex
from torchrepro_lint.parsing.source import SourceFile

SOURCE = """import torch

def pad(array, flag):
    if torch.is_tensor(array):
        array = array.index_select(0, torch.arange(3))
    elif flag:
        array = array.copy()
        first = array
    else:
        second = array
    third = array
    if (found := flag):
        fourth = found
    return first, second, third, fourth
"""


def _value_at(target: str) -> str | None:
    index = ModuleIndex(SourceFile(Path("m.py"), SOURCE))
    fl = flow(index)
    for node in index.nodes_of(cst.Assign):
        if isinstance(node.targets[0].target, cst.Name) and node.targets[0].target.value == target:
            value = fl.reaching_value(node.value)
            return None if value is None else index.module.code_for_node(value)
    raise AssertionError(target)


def test_an_assignment_in_another_branch_does_not_reach():
    assert _value_at("first") == "array.copy()"  # its own branch's
    assert _value_at("second") is None  # neither branch's: the parameter, unknown
    assert _value_at("third") == "array.copy()"  # after the if: the nearest, as before


def test_a_name_bound_in_the_test_reaches_its_body():
    assert _value_at("fourth") == "flag"
