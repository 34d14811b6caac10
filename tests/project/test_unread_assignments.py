"""Lowering leaves out the assignments nothing in their body reads (lowering.live): a line such
as `total = 0` typed in the language server then leaves the module's IR, and every program
that ran it, as they were."""

from __future__ import annotations

from pathlib import Path

from torchrepro_lint.analysis.module_index import ModuleIndex
from torchrepro_lint.parsing.source import SourceFile
from torchrepro_lint.project import ir
from torchrepro_lint.project.extract.lowering import Lowering


def lowered(text: str) -> ir.ModuleIR:
    return Lowering(ModuleIndex(SourceFile(Path("/project/m.py"), text), None)).build()


def assigned(statements) -> list[str]:
    out = []
    for statement in statements:
        if isinstance(statement, ir.Assign):
            out.append(statement.name)
        elif isinstance(statement, ir.Branch):
            out += assigned(statement.then) + assigned(statement.orelse)
        elif isinstance(statement, ir.Try):
            out += [name for block in ir.blocks_of(statement) for name in assigned(block)]
    return out


def test_an_assignment_nothing_reads_is_not_lowered_one_a_condition_reads_is():
    module = lowered(
        "import torch\nunused = 1\nflag = True\nif flag:\n    torch.manual_seed(0)\n\n\n"
        "def f(x):\n    total = 0\n    on = x is None\n    if on:\n        late = 2\n        torch.manual_seed(1)\n"
    )
    assert assigned(module.top) == ["flag"]
    assert assigned(module.functions["f"].body) == ["on"]


def test_an_object_a_method_is_called_on_and_what_is_stored_on_it_are_kept():
    header = "from lib import Trainer\n\ntrainer = Trainer()\ntrainer.device = 'cuda'\n"
    assert assigned(lowered(header + "trainer.fit()\n").top) == ["trainer", "trainer.device"]
    assert assigned(lowered(header).top) == []  # nothing is called on it: nothing reads either
    called = "seed = 1\nrun(seed)\n\n\ndef run(value):\n    pass\n"
    assert assigned(lowered(header + called).top) == ["seed"]  # an argument of a project call
