"""server/recompile.py: CPython's verdict on an edited buffer from the statements the edit touched."""

import random

from torchrepro_lint.pipeline.source import ParseFailure
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
    return got


def test_an_edit_inside_a_function_compiles_that_function_alone():
    new = SCRIPT.replace("    return torch", "    width = width * 2\n    return torch")
    assert recompile._recompiled("train.py", recompile.compile_text("train.py", SCRIPT), new) is not None
    got = _check(SCRIPT, new)
    assert got.offsets[-1] == 1  # the statements after it were not compiled again, one line behind


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
            lines.insert(at, rng.choice(["x = 1\n", "# note\n", "\n", "    y = 2\n", "def f():\n    pass\n"]))
        elif choice < 0.7 and at < len(lines) and len(lines) > 3:
            del lines[at]
        text = "".join(lines)
        whole = recompile.compile_text("train.py", text)
        got = recompile.compile_text("train.py", text, previous)
        if isinstance(whole, ParseFailure):
            assert isinstance(got, ParseFailure)
            continue
        assert _first_lines(got) == _first_lines(whole)
        previous = got


def test_an_edited_buffer_keeps_the_sessions_tree_when_a_run_forgets_positions():
    """A kept tree may drop its index and positions (ProjectModule.drop_index); the edited
    buffer's CPython tree is the session's, which the next edit builds on."""
    from torchrepro_lint.server.edited_source import edited_source

    new = SCRIPT.replace("    return torch", "    width = width * 2\n    return torch")
    compiled = recompile.compile_text("train.py", new, recompile.compile_text("train.py", SCRIPT))
    source = edited_source("train.py", new, None, compiled)
    source.forget_positions()
    assert source.syntax_tree is compiled.tree and source.syntax_offsets == compiled.offsets
    assert source.parents is None  # the rest is forgotten as for any source
