"""project/extract/function_reuse.py: lowering an edited buffer with the untouched functions'
IR taken from the previous lowering gives the IR, and the node table, of a whole lowering."""

from __future__ import annotations

import random
from types import SimpleNamespace

import pytest

from edit_chains import edit_chain
from torchrepro_lint.analysis.module_index import ModuleIndex
from torchrepro_lint.pipeline.cache import structural_digest
from torchrepro_lint.parsing.source import SourceFile
from torchrepro_lint.pipeline.lowered_store import LoweredStore, ir_digest_of
from torchrepro_lint.project import ir
from torchrepro_lint.project.reads import IR_CODE
from torchrepro_lint.project.extract.function_reuse import function_reuse
from torchrepro_lint.project.extract.lowering import ExpressionTexts, Lowering
from torchrepro_lint.server.edited_source import EditedSource

# Functions that read each other's facts: a class whose methods store and read a device, a
# helper the others call, a traced model, a nested function, module-level names.
SCRIPT = '''\
import random

import torch
from torch import nn

DEVICE = "cuda"


def set_seed(seed):
    random.seed(seed)
    torch.manual_seed(seed)


class Trainer:
    def __init__(self, model, device=DEVICE):
        self.model = model
        self.device = device

    def fit(self, loader):
        self.model.to(self.device)
        for batch in loader:
            noise = torch.randn(4)
            loss = self.model(batch + noise)
            loss.backward()
        return loss

    def export(self, example):
        return torch.jit.trace(self.model, example)


def build(width):
    def block():
        return nn.Linear(width, width)

    layers = [block() for _ in range(3)]
    model = nn.Sequential(*layers)
    return model


def main():
    set_seed(0)
    trainer = Trainer(build(8))
    trainer.device = "cuda"
    example = torch.randn(2, 8)
    trainer.fit([example])
    if torch.cuda.is_available():
        torch.backends.cudnn.benchmark = True


try:
    def fast_path(x):
        return x
except ImportError:
    fast_path = None


if __name__ == "__main__":
    main()
VERSION = 1
'''

SNIPPETS = [
    "        x = 1\n",
    "    total = 0\n",
    "        self.device = 'cpu'\n",
    "    trainer.device = 'cpu'\n",
    "        torch.manual_seed(1)\n",
    "    set_seed(1)\n",
    "        import os\n",
    "    global DEVICE\n",
    "    def inner():\n        return 1\n",
    "        example = torch.randn(2, 8)\n",
    "        torch.jit.trace(self.model, noise)\n",
    "    lam = lambda: 1\n",
    "    # a comment\n",
    "DEVICE = 'cpu'\n",
    "LIMIT = 2\n",
    "STEPS = LIMIT\n",
    "    main()\n",
]


def _lowered(source, previous):
    """The index, the lowering and what it took, of `source` (from `previous`, the last one)."""
    index = ModuleIndex(source, "pkg")
    lowering = Lowering(index, None, previous[1].texts if previous is not None else ExpressionTexts.start())
    if previous is not None:
        old_source, old_lowering, module_ir = previous
        lowering.reuse = function_reuse(index, old_source.module, module_ir, old_lowering.nodes, old_lowering.layout, old_source.text)
    module_ir = lowering.build()
    return index, lowering, module_ir


def _whole(text: str, tree):
    source = SourceFile("script.py", text)
    source.__dict__["module"] = tree  # the same tree, lowered whole
    lowering = Lowering(ModuleIndex(source, "pkg"), None, ExpressionTexts.start())
    return lowering, lowering.build()


def _check(source, previous):
    index, lowering, module_ir = _lowered(source, previous)
    whole_lowering, whole_ir = _whole(source.text, source.module)
    assert structural_digest(module_ir) == structural_digest(whole_ir)
    if previous is not None:  # the digest put together from the last IR's parts (the server's)
        assert ir_digest_of(module_ir, ir_digest_of(previous[2])[1])[0] == ir_digest_of(whole_ir)[0]
    for path, function in module_ir.functions.items():  # IR_CODE values, kept by function (the server's)
        expected = structural_digest((IR_CODE, ir.without_refs(whole_ir.functions[path])))
        assert _CODE_DIGESTS._code_digest(function) == expected
    assert [id(node) for node in lowering.nodes] == [id(node) for node in whole_lowering.nodes]
    # the texts a whole lowering generates are there for the next one (with those of earlier
    # lowerings still in the tree)
    assert set(whole_lowering.texts.now) <= set(lowering.texts.now)
    assert all(text == lowering.texts.now[key][1] for key, (_, text) in whole_lowering.texts.now.items())
    assert all(node in index.parents for node, _ in lowering.texts.now.values())  # only this tree's
    taken = len(lowering.reuse.paths) + lowering.reuse.top if lowering.reuse is not None else 0  # (and the top level)
    return (source, lowering, module_ir), taken


# A store whose cache keeps IR_CODE digests by function, across each test's edits, as the
# language server's does: a function shifted by an edit above it has its origin's.
_CODE_DIGESTS = LoweredStore(SimpleNamespace(code_digests={}))


def _edit(previous_source, text):
    return EditedSource("script.py", text, previous=previous_source.parsed)


def _lowering_after(old: str, new: str) -> Lowering:
    """The lowering of SCRIPT with `old` replaced by `new`, from SCRIPT's (checked as whole)."""
    first = EditedSource("script.py", SCRIPT)
    state, _ = _check(first, None)
    (_, lowering, _), _ = _check(_edit(first, SCRIPT.replace(old, new)), state)
    return lowering


def test_an_edit_in_one_method_takes_the_other_functions():
    lowering = _lowering_after("            loss.backward()\n", "            loss.backward()\n            step = 1\n")
    assert lowering.reuse is not None
    assert lowering.reuse.paths == {"set_seed", "Trainer.__init__", "Trainer.export", "build", "build.block", "main", "fast_path"}


@pytest.mark.parametrize(
    "line",
    [
        "        self.device = 'cpu'\n",  # a store other methods' lowering reads
        "        import os\n",
        "        torch.jit.trace(self.model, noise)\n",  # makes `noise` an example input (calls._only_traced)
    ],
)
def test_an_edit_that_other_functions_read_takes_none(line):
    lowering = _lowering_after("            loss.backward()\n", "            loss.backward()\n" + "    " + line)
    assert lowering.reuse is None


END = "VERSION = 1\n"  # the script's last line (a line added after it is parsed alone)


@pytest.mark.parametrize(
    "old,new",
    [
        ("    main()\n", "    torch.manual_seed(1)\n    main()\n"),  # `torch`: a name functions read
        (END, END + 'DEVICE = "cpu"\n'),  # read by Trainer.__init__'s default
        (END, END + "FALLBACK = DEVICE\n"),  # a name functions read, read
        (END, END + "set_seed = build\n"),  # main() calls another function now: taken, its IR would differ
        ("class Trainer:\n", "class Trainer:\n    retries = 2\n"),  # a class body: its methods may read it
    ],
    ids=["reads a name functions read", "rebinds a name a default reads", "reads it at the top level", "rebinds a function", "class body"],
)
def test_a_top_level_edit_that_functions_can_read_takes_nothing(old, new):
    assert _lowering_after(old, new).reuse is None


def test_a_top_level_edit_of_names_read_nowhere_else_takes_every_function():
    # The top level is lowered again (its IR changed); no function can read the new name.
    lowering = _lowering_after(END, END + "STEPS = 3\n")
    assert lowering.reuse is not None and not lowering.reuse.top
    assert lowering.reuse.paths == {"set_seed", "Trainer.__init__", "Trainer.fit", "Trainer.export", "build", "build.block", "main", "fast_path"}


def test_a_top_level_edit_whose_values_reach_no_function_through_other_names():
    # `LIMIT` is new, and only the new statements read it.
    lowering = _lowering_after(END, END + "LIMIT = 3\nDEPTH = LIMIT\n")
    assert lowering.reuse is not None and not lowering.reuse.top and "main" in lowering.reuse.paths


def test_an_edit_in_a_function_under_a_top_level_try_lowers_the_top_level_again():
    # The `try` is a new statement on the way down to the edit, and top-level code: the top
    # level is lowered again, with the edited function; the other functions are taken.
    lowering = _lowering_after("        return x\n", "        y = x\n        return x\n")
    assert not lowering.reuse.top and "fast_path" not in lowering.reuse.paths and "main" in lowering.reuse.paths


def test_a_function_nested_in_the_edited_one_is_lowered_again():
    lowering = _lowering_after("    return model\n", "    width = 4\n    return model\n")
    assert "build" not in lowering.reuse.paths and "build.block" not in lowering.reuse.paths
    assert "main" in lowering.reuse.paths


def _chain(seed: int) -> tuple[int, int, int]:
    """Lowers a chain of random edits, each checked against a whole lowering: (parts taken,
    lowerings that took the functions but lowered the top level again, statements taken)."""
    rng = random.Random(seed)
    source = EditedSource("script.py", SCRIPT)
    state, _ = _check(source, None)
    taken = top_again = statements = 0
    for text in edit_chain(rng, SCRIPT, SNIPPETS, 30):
        source = _edit(source, text)
        state, count = _check(source, state)
        taken += count
        top_again += state[1].reuse is not None and not state[1].reuse.top
        statements += state[1].statements_taken
    return taken, top_again, statements


@pytest.mark.parametrize("seed", range(10))
def test_random_edits_give_the_ir_of_a_whole_lowering(seed):
    _chain(seed)  # (each lowering is compared with a whole one)


def test_random_edits_take_parts_both_ways():
    # (a chain of a few edits may happen to take nothing: the ten together must take both ways)
    counts = [_chain(seed) for seed in range(10)]
    assert sum(taken for taken, _, _ in counts) > 0
    assert sum(top_again for _, top_again, _ in counts) > 0
    assert sum(statements for _, _, statements in counts) > 0  # (statements of an edited function)


def test_an_edit_of_main_that_binds_a_new_name_takes_its_other_statements():
    first = EditedSource("script.py", SCRIPT)
    state, _ = _check(first, None)
    texts = [
        SCRIPT.replace("    set_seed(0)\n", "    set_seed(0)\n    total = 0\n"),
        SCRIPT.replace("    set_seed(0)\n", "    set_seed(0)\n    total = 0\n    noise_a = torch.randn(3)\n"),
        SCRIPT.replace("    set_seed(0)\n", "    set_seed(0)\n    total = 0\n    noise_a = torch.randn(3)\n    noise_b = 1\n"),
    ]
    taken = []
    source = first
    for text in texts:
        source = _edit(source, text)
        state, _ = _check(source, state)
        taken.append((state[1].reuse.in_functions, state[1].statements_taken > 0))
    # (the first edit lowers main() whole and keeps its statements; the next ones take them)
    assert taken == [(frozenset(), False), ({"main"}, True), ({"main"}, True)]


@pytest.mark.parametrize(
    "after, line",
    [
        ("    trainer.fit([example])\n", "    example = 3\n"),  # the value `example` last holds: read elsewhere
        ("    total = 0\n", "    if total:\n        torch.randn(1)\n"),  # a header statements could sit under
        ("    total = 0\n", "    def helper():\n        return 1\n"),  # a scope of its own
    ],
)
def test_an_edit_of_main_that_rebinds_a_name_or_adds_a_header_takes_none_of_its_statements(after, line):
    first = EditedSource("script.py", SCRIPT)
    state, _ = _check(first, None)
    with_total = SCRIPT.replace("    set_seed(0)\n", "    set_seed(0)\n    total = 0\n")
    source = _edit(first, with_total)
    state, _ = _check(source, state)
    source = _edit(source, with_total.replace(after, after + line))
    state, _ = _check(source, state)
    assert state[1].statements_taken == 0


MAIN_SNIPPETS = [
    "    total = 0\n", "    noise_{n} = torch.randn({n})\n", "    torch.manual_seed({n})\n", "    example = torch.randn(2, 8)\n",
    "    if torch.cuda.is_available():\n        torch.backends.cudnn.benchmark = False\n", "    set_seed({n})\n",
    "    for step in range(2):\n        trainer.fit([example])\n", "    count_{n} = len([example])\n",
]


def _main_chain(seed: int) -> int:
    """Random edits between main()'s statements, each lowering checked against a whole one:
    the statements taken from the lowering before."""
    rng = random.Random(seed)
    lines = SCRIPT.splitlines(keepends=True)
    start = lines.index("def main():\n") + 1
    end = lines.index("try:\n") - 2  # (main()'s body ends before the blank lines)
    source = EditedSource("script.py", SCRIPT)
    state, _ = _check(source, None)
    taken = 0
    for n in range(20):
        # (between main()'s own statements: a line of its body that is not inside a block)
        places = [i for i in range(start, end) if lines[i].startswith("    ") and lines[i][4] != " "] + [end]
        at = rng.choice(places)
        if rng.random() < 0.8:
            snippet = rng.choice(MAIN_SNIPPETS).format(n=n)
            lines[at:at] = snippet.splitlines(keepends=True)
            end += snippet.count("\n")
        elif at < end and end - start > 3 and not lines[at].rstrip().endswith(":"):
            del lines[at]
            end -= 1
        source = _edit(source, "".join(lines))
        state, _ = _check(source, state)
        taken += state[1].statements_taken
    return taken


@pytest.mark.parametrize("seed", range(6))
def test_random_edits_of_main_give_the_ir_of_a_whole_lowering(seed):
    _main_chain(seed)


def test_random_edits_of_main_take_its_other_statements():
    assert sum(_main_chain(seed) for seed in range(6, 12)) > 0


TRACED = """\
import torch


def build():
    return torch.nn.Linear(8, 8)


def main():
    model = build()
    example = torch.randn(2, 8)
    traced = torch.jit.trace(model, example)
    steps = 10
    name = "run"
    total = 0
    limit = 5
    rate = 0.1
"""


def test_a_line_that_uses_a_name_of_the_function_lowers_its_statements_again():
    # The draw is an example input only traced (no draw of the program's): a line that uses
    # it for something else makes it a draw. Its statement is not the one edited, so the edit
    # must not take it: every lowering is checked against a whole one.
    source = EditedSource("script.py", TRACED)
    state, _ = _check(source, None)
    taken = []
    for line in ("    a_1 = 1\n", "    a_2 = 2\n", "    out = model(example)\n"):
        text = source.text.replace("    total = 0\n", line + "    total = 0\n")
        source = _edit(source, text)
        state, _ = _check(source, state)
        taken.append(state[1].statements_taken)
    assert taken[1] > 0 and taken[2] == 0


def test_a_name_is_mentioned_only_as_a_whole_word():
    from torchrepro_lint.project.extract.function_reuse import _mentions

    assert _mentions("noise = edit_3 + 1", "edit_3") and _mentions("f(edit_3)", "edit_3") and _mentions("edit_3", "edit_3")
    assert not _mentions("edit_30 = 1\nxedit_3 = 2\n", "edit_3") and not _mentions("", "edit_3")
