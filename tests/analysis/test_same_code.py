"""analysis/same_code.py: trees whose code is the same apart from trivia between statements."""

import libcst as cst
import pytest

from torchrepro_lint.analysis.module_index import ModuleIndex
from torchrepro_lint.analysis.same_code import code_lines_differ, node_pairs
from torchrepro_lint.pipeline.cache import structural_digest
from torchrepro_lint.parsing.reparse import ParsedText, edit_span, reparse
from torchrepro_lint.parsing.source import SourceFile
from torchrepro_lint.project.extract.lowering import Lowering

SCRIPT = '''import torch


def build(width):
    layer = torch.nn.Linear(width, width)
    return layer


model = build(
    8,
)
torch.manual_seed(0)
'''

SAME_CODE = [
    ("a comment line above a function", "\n\ndef build", "\n\n# builds the layer\ndef build"),
    ("a comment at the end of a statement", "return layer\n", "return layer  # the layer\n"),
    ("a blank line inside a function", "    return layer", "\n    return layer"),
    ("a comment after a block's colon", "def build(width):\n", "def build(width):  # one layer\n"),
    ("a comment at the end of the file", "torch.manual_seed(0)\n", "torch.manual_seed(0)\n# done\n"),
]
OTHER_CODE = [
    ("another argument", "build(\n    8,", "build(\n    16,"),
    ("a comment inside a call (kept in its text)", "    8,\n)", "    8,  # width\n)"),
    ("spaces inside an expression", "Linear(width, width)", "Linear(width,  width)"),
    ("a statement more", "torch.manual_seed(0)\n", "torch.manual_seed(0)\nx = 1\n"),
]


def _lowered(text, tree):
    source = SourceFile("train.py", text)
    source.__dict__["module"] = tree
    lowering = Lowering(ModuleIndex(source))
    return lowering.build(), lowering.nodes


@pytest.mark.parametrize("old, new", [(o, n) for _, o, n in SAME_CODE], ids=[i for i, _, _ in SAME_CODE])
def test_trivia_between_statements_leaves_the_ir_and_maps_every_node(old, new):
    text = SCRIPT.replace(old, new, 1)
    assert text != SCRIPT
    before = ParsedText(SCRIPT, cst.parse_module(SCRIPT))
    after = reparse(before, text) or ParsedText(text, cst.parse_module(text))
    pairs = node_pairs(before.module, after.module)
    assert pairs is not None
    old_ir, old_nodes = _lowered(SCRIPT, before.module)
    new_ir, new_nodes = _lowered(text, after.module)
    assert structural_digest(old_ir) == structural_digest(new_ir)
    assert [pairs.get(id(node), node) for node in old_nodes] == new_nodes
    assert all(a is b for a, b in zip([pairs.get(id(n), n) for n in old_nodes], new_nodes))


@pytest.mark.parametrize("old, new", [(o, n) for _, o, n in OTHER_CODE], ids=[i for i, _, _ in OTHER_CODE])
def test_code_that_changed_is_not_the_same(old, new):
    text = SCRIPT.replace(old, new, 1)
    assert text != SCRIPT
    assert node_pairs(cst.parse_module(SCRIPT), cst.parse_module(text)) is None


def _lines_differ(text: str) -> bool:
    old, new, (start, end, delta) = edit_span(SCRIPT, text)
    return code_lines_differ(old[start:end], new[start : end + delta])


@pytest.mark.parametrize("old, new", [(o, n) for _, o, n in SAME_CODE], ids=[i for i, _, _ in SAME_CODE])
def test_the_line_check_never_calls_trivia_a_code_change(old, new):
    # (it lets the index skip node_pairs: saying True here would lose the kept IR)
    assert not _lines_differ(SCRIPT.replace(old, new, 1))


@pytest.mark.parametrize(
    "old, new, differ",
    [(o, n, i != "a comment inside a call (kept in its text)") for i, o, n in OTHER_CODE],
    ids=[i for i, _, _ in OTHER_CODE],
)
def test_the_line_check_tells_code_edits_and_leaves_comments_inside_expressions_to_node_pairs(old, new, differ):
    assert _lines_differ(SCRIPT.replace(old, new, 1)) is differ


def test_the_line_check_cannot_tell_a_hash_after_a_quote():
    assert code_lines_differ(['x = "a"  # one\n'], ['x = "a"  # two\n']) is False
    assert code_lines_differ(['x = "#a"\n'], ['x = "#b"\n']) is False  # (node_pairs tells)
    assert code_lines_differ(["x = 1  # one\n"], ["x = 2  # one\n"]) is True
    assert code_lines_differ(["    x = 1\n"], ["  x = 1\n"]) is False  # indentation: node_pairs tells
