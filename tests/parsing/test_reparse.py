"""parsing/reparse.py: parsing only the statements an edit touched gives the tree LibCST gives
for the whole new text, or says to parse the whole text."""

from __future__ import annotations

import random

import libcst as cst
import pytest

from torchrepro_lint.parsing.reparse import ParsedText, _lines, reparse
from edit_chains import SCRIPT, SNIPPETS, edit_chain


def _check(previous: ParsedText, text: str) -> ParsedText | None:
    """Reparse, and compare with LibCST's parse of the whole text (tree and line counts)."""
    whole = cst.parse_module(text)
    got = reparse(previous, text)
    if got is not None:
        assert got.module.deep_equals(whole)
        assert got.module.code == whole.code
        for node, counts in got.line_counts.values():
            assert counts == [_lines(got.module.code_for_node(s)) for s in node.body]
        for clause, count in got.clause_line_counts.values():
            assert count == _lines(got.module.code_for_node(clause))
    return got


def test_an_edit_inside_a_loop_keeps_every_other_statement_object():
    previous = ParsedText(SCRIPT, cst.parse_module(SCRIPT))
    text = SCRIPT.replace("            loss.backward()\n", "            loss.backward()\n            clip(model)\n")
    got = _check(previous, text)
    assert got is not None
    old_body, new_body = previous.module.body, got.module.body
    train = next(i for i, s in enumerate(old_body) if isinstance(s, cst.FunctionDef) and s.name.value == "train")
    assert [a is b for a, b in zip(old_body, new_body)] == [i != train for i in range(len(old_body))]
    old_function, new_function = old_body[train].body.body, new_body[train].body.body
    assert new_function[0] is old_function[0]  # the optimiser line is kept
    old_loop, new_loop = old_function[1].body.body[0].body.body, new_function[1].body.body[0].body.body
    assert new_loop[0] is old_loop[0]  # in the inner loop, only the statements around the edit


@pytest.mark.parametrize(
    "old, new",
    [
        ("        model = Net(4)\n", "        model = Net(8)\n        model.eval()\n"),
        ("        state = torch.load(path)\n", "        state = torch.load(path, weights_only=True)\n"),
    ],
)
def test_an_edit_in_a_body_followed_by_other_clauses_parses_only_that_body(old, new):
    previous = ParsedText(SCRIPT, cst.parse_module(SCRIPT))
    got = _check(previous, SCRIPT.replace(old, new))
    assert got is not None
    find = lambda module: next(s for s in module.body if isinstance(s, cst.FunctionDef) and s.name.value == "load")
    old_load, new_load = find(previous.module).body.body, find(got.module).body.body
    # the `try` or the `if` holds the edit: the clauses after its body are kept, and the
    # statement after the edited one in its body
    changed = [(a, b) for a, b in zip(old_load, new_load) if a is not b]
    assert len(changed) == 1
    old_statement, new_statement = changed[0]
    assert new_statement.orelse is old_statement.orelse
    assert new_statement.body.body[-1] is old_statement.body.body[-1]


def test_edits_one_after_another_in_a_try_body_parse_only_that_body():
    # The lines of the clauses after the body (`except`, `else`, `finally`) place its end; they
    # are counted once and kept with the next text's tree, whose clauses are the same nodes.
    # (The first edit here parses the whole `try`, as it did before they were kept.)
    previous = ParsedText(SCRIPT, cst.parse_module(SCRIPT))
    text = SCRIPT
    find = lambda module: next(s for s in module.body if isinstance(s, cst.FunctionDef) and s.name.value == "load")
    kept = []
    for n in range(3):
        loaded = "        state = torch.load(path)\n"
        text = text.replace(loaded, f"{loaded}        noise_{n} = torch.randn(1)\n")
        got = _check(previous, text)
        assert got is not None
        old_try, new_try = find(previous.module).body.body[0], find(got.module).body.body[0]
        kept.append(new_try.handlers[0] is old_try.handlers[0] and new_try.finalbody is old_try.finalbody)
        previous = got
    assert kept == [False, True, True]
    assert len(previous.clause_line_counts) >= 3  # (the handler, `else` and `finally`)


def test_an_edit_at_the_end_of_the_first_class_parses_the_whole_text():
    # The file's first indented block sets the default indent: it is never parsed alone.
    previous = ParsedText(SCRIPT, cst.parse_module(SCRIPT))
    text = SCRIPT.replace("            parameter.zero_()\n", "            parameter.zero_()\n            parameter.grad = None\n")
    assert _check(previous, text) is None


def test_appending_at_the_end_of_the_file_parses_the_last_statement_only():
    previous = ParsedText(SCRIPT, cst.parse_module(SCRIPT))
    got = _check(previous, SCRIPT + "print('done')\n")
    assert got is not None
    assert all(a is b for a, b in zip(previous.module.body[:-1], got.module.body))


def test_an_unchanged_text_is_the_previous_parse():
    previous = ParsedText(SCRIPT, cst.parse_module(SCRIPT))
    assert reparse(previous, SCRIPT) is previous


def test_edits_in_the_import_block_parse_the_whole_text():
    # Before the first indented block: the default indent could change with it.
    previous = ParsedText(SCRIPT, cst.parse_module(SCRIPT))
    assert _check(previous, SCRIPT.replace("import random\n", "import random\nimport os\n")) is None


def test_a_line_that_continues_the_block_above_is_parsed_with_that_block():
    previous = ParsedText(SCRIPT, cst.parse_module(SCRIPT))
    text = SCRIPT.replace("    return loader\n", "    return loader\n    # trailing\n    loader = None\n")
    assert _check(previous, text) is not None


def test_a_file_without_a_final_newline():
    text = SCRIPT.rstrip("\n")
    previous = ParsedText(text, cst.parse_module(text))
    assert _check(previous, text.replace("# end", "# the end")) is not None
    assert _check(previous, text + "\n") is not None


def test_a_different_indentation_in_the_edited_block_is_kept_exactly():
    text = SCRIPT.replace("        super().__init__()\n", "        super().__init__()\n        if width:\n          width += 1\n")
    previous = ParsedText(SCRIPT, cst.parse_module(SCRIPT))
    assert _check(previous, text) is not None


@pytest.mark.parametrize("seed", range(8))
def test_random_edits_give_the_tree_of_a_whole_parse(seed):
    """Chains of random insertions, deletions and line changes; each text that compiles is
    reparsed from the previous one and compared with a whole parse."""
    rng = random.Random(seed)
    previous = ParsedText(SCRIPT, cst.parse_module(SCRIPT))
    reparsed = 0
    for text in edit_chain(rng, SCRIPT, SNIPPETS, 40):
        got = _check(previous, text)
        reparsed += got is not None
        previous = got if got is not None else ParsedText(text, cst.parse_module(text))
    assert reparsed > 0
