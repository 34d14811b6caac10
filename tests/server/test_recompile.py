"""server/recompile.py: CPython's verdict on an edited buffer from the statements the edit touched."""

import random

from torchrepro_lint.parsing.source import ParseFailure
from torchrepro_lint.server import recompile

SCRIPT = """import torch


def build(width):
    return torch.nn.Linear(width, width)


if torch.cuda.is_available():
    device = "cuda"
model = build(8)
total = 0; count = 1
for step in range(3):
    total += step
"""


def _first_lines(compiled):
    return [recompile._first_line(s) + o for s, o in zip(compiled.tree.body, compiled.offsets)]


def _check(old: str, new: str):
    """The verdict from `old`'s compile, asserted equal to a whole compile of `new`."""
    previous = recompile.compile_text("train.py", old)
    got = recompile.compile_text("train.py", new, previous)
    whole = recompile.compile_text("train.py", new)
    if isinstance(whole, ParseFailure):
        assert isinstance(got, ParseFailure) and (got.message, got.row, got.column) == (whole.message, whole.row, whole.column)
    else:
        assert _first_lines(got) == _first_lines(whole)
        assert [type(s) for s in got.tree.body] == [type(s) for s in whole.tree.body]
        assert recompile.statement_lines(got) == recompile.statement_lines(whole)
    return got


def test_an_edit_inside_a_function_compiles_that_function_alone():
    new = SCRIPT.replace("    return torch", "    width = width * 2\n    return torch")
    assert recompile._recompiled("train.py", recompile.compile_text("train.py", SCRIPT), new) is not None
    got = _check(SCRIPT, new)
    assert got.offsets[-1] == 1  # the statements after it were not compiled again, one line behind


NESTED = """import torch


def main(args):
    model = torch.nn.Linear(2, 2)
    if args.cuda:
        model = model.cuda()
        device = "cuda"
    else:
        device = "cpu"
    for step in range(3):
        loss = model(torch.randn(2))
        loss.backward()
    return model


main(None)
"""


def test_an_edit_in_a_nested_body_compiles_only_its_statements():
    new = NESTED.replace("        loss = model", "        step += 1\n        loss = model")
    _check(NESTED, new)
    previous = recompile.compile_text("train.py", NESTED)
    got = recompile.compile_text("train.py", new, previous)
    main, before = got.tree.body[1], previous.tree.body[1]
    assert main is not before  # a copy on the way down ...
    assert main.body[0] is before.body[0]  # ... keeping the statements before the edit
    assert main.body[-1] is before.body[-1]  # and after it, moved by a line
    loop = main.body[2]
    assert loop is not before.body[2] and loop.body[1] is before.body[2].body[0]
    assert got.nested


def test_a_line_added_at_the_end_of_a_nested_body_is_not_taken_for_the_outer_one():
    # Between the loop and `return`, more indented than `return`: the loop's body, as a whole
    # compile has it.
    _check(NESTED, NESTED.replace("        loss.backward()\n", "        loss.backward()\n        step += 1\n"))


def test_a_line_typed_out_of_its_block_is_cpythons_error():
    # At column 0 in the middle of a body: the lines after it are indented unexpectedly.
    got = _check(NESTED, NESTED.replace("        loss.backward()\n", "x = 1\n        loss.backward()\n"))
    assert isinstance(got, ParseFailure)


def test_an_else_typed_after_an_unchanged_if_is_compiled_whole():
    new = SCRIPT.replace('    device = "cuda"\n', '    device = "cuda"\nelse:\n    device = "cpu"\n')
    assert recompile._recompiled("train.py", recompile.compile_text("train.py", SCRIPT), new) is None
    _check(SCRIPT, new)


def test_a_syntax_error_gets_cpythons_own_message_and_place():
    got = _check(SCRIPT, SCRIPT.replace("model = build(8)", "model = build(8"))
    assert isinstance(got, ParseFailure)


def test_a_statement_sharing_a_line_with_an_unchanged_one_is_not_split():
    new = SCRIPT.replace("total = 0; count = 1", "total = 0; count = 2")
    _check(SCRIPT, new)


def test_offsets_add_up_over_a_chain_of_edits():
    rng = random.Random(7)
    lines = SCRIPT.splitlines(keepends=True)
    previous = recompile.compile_text("train.py", SCRIPT)
    for _ in range(40):
        at = rng.randrange(len(lines) + 1)
        choice = rng.random()
        if choice < 0.4:
            lines.insert(at, rng.choice(["x = 1\n", "# note\n", "\n", "    y = 2\n", "def f():\n    pass\n", "    if y:\n        z = 3\n", "        z = 4\n"]))
        elif choice < 0.7 and at < len(lines) and len(lines) > 3:
            del lines[at]
        text = "".join(lines)
        whole = recompile.compile_text("train.py", text)
        got = recompile.compile_text("train.py", text, previous)
        if isinstance(whole, ParseFailure):
            assert isinstance(got, ParseFailure)
            continue
        assert _first_lines(got) == _first_lines(whole)
        assert recompile.statement_lines(got) == recompile.statement_lines(whole)
        previous = got


def test_an_edited_buffer_keeps_the_sessions_tree_when_a_run_forgets_positions():
    """A kept tree may drop its index and positions (ProjectModule.drop_index); the edited
    buffer's CPython tree is the session's, which the next edit builds on."""
    from torchrepro_lint.server.edited_source import edited_source

    new = SCRIPT.replace("    return torch", "    width = width * 2\n    return torch")
    compiled = recompile.compile_text("train.py", new, recompile.compile_text("train.py", SCRIPT))
    source = edited_source("train.py", new, None, compiled)
    source.forget_positions()
    assert source.syntax_tree is compiled.tree and source.syntax_offsets == compiled.line_offsets()
    assert source.parents is None  # the rest is forgotten as for any source


def test_findings_in_a_body_compiled_in_part_are_placed_as_in_a_whole_compile():
    """Over a chain of edits inside `main`, every call of the edited buffer (its tree compiled
    in part, its lines moved per statement) is placed where a fresh source places it."""
    from torchrepro_lint.analysis.module_index import ModuleIndex
    from torchrepro_lint.parsing.source import SourceFile
    from torchrepro_lint.server.edited_source import edited_source

    import libcst as cst

    rng = random.Random(3)
    lines = NESTED.splitlines(keepends=True)
    compiled, parsed, inner = recompile.compile_text("train.py", NESTED), None, 0
    for _ in range(30):
        at = rng.randrange(5, 14)  # inside main's body
        lines.insert(at, rng.choice(["        z = torch.zeros(1)\n", "    w = torch.ones(2)\n", "    # note\n", "\n"]))
        text = "".join(lines)
        got = recompile.compile_text("train.py", text, compiled)
        if isinstance(got, ParseFailure):
            del lines[at]
            continue
        inner += bool(got.nested)
        compiled = got
        source = edited_source("train.py", text, parsed, compiled)
        calls = ModuleIndex(source).nodes_of(cst.Call)
        fresh = SourceFile("train.py", text)
        fresh_calls = ModuleIndex(fresh).nodes_of(cst.Call)
        assert [source.span(c) for c in calls] == [fresh.span(c) for c in fresh_calls]
        parsed = source.parsed
    assert inner > 0
