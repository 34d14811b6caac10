"""lowering.ExpressionTexts: expression texts carried from one lowering of a file to the next
(the language server), exact: the IR is the one a fresh lowering gives, after any edit."""

import libcst as cst
import pytest

from torchrepro_lint.analysis import syntax
from torchrepro_lint.analysis.module_index import ModuleIndex
from torchrepro_lint.pipeline.cache import structural_digest
from torchrepro_lint.parsing.reparse import ParsedText, reparse
from torchrepro_lint.parsing.source import SourceFile
from torchrepro_lint.project.extract import lowering as lowering_module
from torchrepro_lint.project.extract.lowering import ExpressionTexts, Lowering

SCRIPT = '''import torch
from helpers import build_table, set_seed

TABLE = build_table({
    "small": dict(width=8, depth=2),  # the default
    "large": dict(width=64, depth=12),
})


def train(config):
    set_seed(config.seed + 1)
    model = build_table(config.widths[0] * 2, name=config.name or "model")
    return model


if __name__ == "__main__":
    train(parse_args())
'''

EDITS = [
    ("a statement at the end", SCRIPT + "train(other_args())\n"),
    ("an argument inside the table", SCRIPT.replace("depth=12", "depth=24")),
    ("the seed expression", SCRIPT.replace("config.seed + 1", "config.seed + 2")),
    ("a comment inside the table", SCRIPT.replace("# the default", "# smallest")),
    ("a function above the others", SCRIPT.replace("\n\ndef train", "\n\ndef other():\n    pass\n\n\ndef train")),
]


def _lower(text, tree, texts_before):
    source = SourceFile("train.py", text)
    source.__dict__["module"] = tree
    lowering = Lowering(ModuleIndex(source), None, texts_before)
    return lowering.build(), lowering


@pytest.fixture
def generated(monkeypatch):
    """The expressions whose text was generated (not taken from the previous lowering)."""
    made = []

    def counting(module, node):
        made.append(node)
        return syntax.expression_code(module, node)

    monkeypatch.setattr(lowering_module, "expression_code", counting)
    return made


def _inside(statements) -> set[int]:
    found = set()
    for statement in statements:
        stack = [statement]
        while stack:
            node = stack.pop()
            found.add(id(node))
            stack.extend(node.children)
    return found


@pytest.mark.parametrize("text", [t for _, t in EDITS], ids=[i for i, _ in EDITS])
def test_carried_texts_give_the_ir_of_a_fresh_lowering(text, generated):
    before = ParsedText(SCRIPT, cst.parse_module(SCRIPT))
    _, first = _lower(SCRIPT, before.module, ExpressionTexts.start())
    assert len(generated) >= 3  # the table, the seed and the name: opaque values keep their text
    after = reparse(before, text) or ParsedText(text, cst.parse_module(text))
    generated.clear()
    carried_ir, carried = _lower(text, after.module, first.texts)
    made = list(generated)
    fresh_ir, _ = _lower(text, after.module, None)
    assert structural_digest(carried_ir) == structural_digest(fresh_ir)
    # Texts are generated only inside the statements the reparse made anew.
    kept = _inside([s for s in after.module.body if any(s is old for old in before.module.body)])
    assert not any(id(node) in kept for node in made)
    assert len(carried.texts.now) >= len(made)


def test_a_statement_at_the_end_generates_no_earlier_text(generated):
    before = ParsedText(SCRIPT, cst.parse_module(SCRIPT))
    _, first = _lower(SCRIPT, before.module, ExpressionTexts.start())
    made_first = len(generated)
    text = SCRIPT + "train(other_args())\n"
    after = reparse(before, text)
    assert after is not None and after.module.body[2] is before.module.body[2]  # (the table)
    generated.clear()
    _, second = _lower(text, after.module, first.texts)
    # the table, the seed and the name were taken; only the last two statements' calls were made
    assert {syntax.expression_code(after.module, node) for node in generated} <= {"parse_args()", "other_args()"}
    assert len(second.texts.now) - len(generated) >= made_first - 1


def test_only_the_texts_used_are_handed_on():
    before = ParsedText(SCRIPT, cst.parse_module(SCRIPT))
    _, first = _lower(SCRIPT, before.module, ExpressionTexts.start())
    text = SCRIPT.replace('TABLE = build_table({', 'TABLE = build_table({\n    "tiny": dict(width=2, depth=1),')
    after = reparse(before, text) or ParsedText(text, cst.parse_module(text))
    _, second = _lower(text, after.module, first.texts)
    old_table = before.module.body[2]
    assert all(node is not old_table.body[0].value for node, _ in second.texts.now.values())
    assert any('"tiny"' in code for _, code in second.texts.now.values())


def test_another_newline_starts_afresh(generated):
    crlf = SCRIPT.replace("\n", "\r\n")
    tree = cst.parse_module(SCRIPT)
    _, first = _lower(SCRIPT, tree, ExpressionTexts.start())
    texts = ExpressionTexts.following(first.texts, cst.parse_module(crlf))
    assert texts.before == {}
    # and the same defaults keep them
    assert ExpressionTexts.following(first.texts, tree).before is first.texts.now


def test_the_command_line_keeps_no_texts():
    tree = cst.parse_module(SCRIPT)
    _, lowering = _lower(SCRIPT, tree, None)
    assert lowering.texts is None
