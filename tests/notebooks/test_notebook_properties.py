"""Generated notebooks: positions always land inside their cell, and fixing never touches more
than the code cells' sources, nor leaves a cell that stops parsing."""

from __future__ import annotations

import ast
import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from notebook_support import notebook
from torchrepro_lint.config import Config
from torchrepro_lint.pipeline.engine import lint_sources
from torchrepro_lint.fixes.runner import fix_sources
from torchrepro_lint.notebooks import lines_of, load_source, mask

SNIPPETS = [
    "import torch",
    "import random\nimport numpy as np",
    "from torch import nn",
    "%matplotlib inline",
    "!pip install -q torch",
    "names = !ls",
    "torch.manual_seed?",
    "%time weights = torch.randn(4)",
    "%%time\nbias = torch.zeros(4)",
    "%%bash\necho (not python",
    "torch.manual_seed(0)",
    "torch.cuda.manual_seed(3)",
    "layer = nn.Linear(4, 4)",
    "torch.backends.cudnn.deterministic = True",
    "torch.backends.cudnn.benchmark = True",
    "for step in range(2):\n    !echo {step}\n    value = torch.rand(1)",
    "text = '''\n!not a shell line\n'''",
    "def broken(:\n    pass",
    "total = (1\n         % 2)",
    "",
    "# only a comment",
    "x = 1\n",
]
CELL = st.one_of(st.sampled_from(SNIPPETS), st.tuples(st.just("markdown"), st.sampled_from(["# Title", "prose\nmore"])))


@st.composite
def notebooks(draw):
    cells = ["import torch\nfrom torch import nn", *draw(st.lists(CELL, min_size=2, max_size=8))]
    return notebook(*cells, indent=draw(st.sampled_from([1, 2, None])), source_as_list=draw(st.booleans()))


PROPERTY = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@PROPERTY
@given(notebooks())
def test_findings_land_inside_their_cell(tmp_path, text):
    path = tmp_path / "gen.ipynb"
    source = load_source(path, text)
    cells = json.loads(text)["cells"]
    for cell in source.cells.cells:
        original = cells[cell.number - 1]["source"]
        original = "".join(original) if isinstance(original, list) else original
        assert cell.rows == len(lines_of(original))
    result = lint_sources([(path, text)], Config(root=tmp_path))
    assert not result.errors
    for finding in result.findings:
        cell = next(c for c in source.cells.cells if c.number == finding.cell)
        assert 1 <= finding.row <= finding.end_row <= cell.rows
        if finding.fix is not None:
            target = next(c for c in source.cells.cells if c.number == finding.fix.cell)
            assert all(1 <= edit.start[0] <= edit.end[0] <= target.rows + 1 for edit in finding.fix.edits)


def _without_sources(document: dict) -> dict:
    return {**document, "cells": [{k: v for k, v in cell.items() if k != "source"} for cell in document["cells"]]}


@PROPERTY
@given(notebooks())
def test_fixing_changes_only_code_cell_sources_and_keeps_them_parsing(tmp_path, text):
    path = tmp_path / "gen.ipynb"
    outcome = fix_sources({path: text}, Config(root=tmp_path), unsafe=True)
    new = outcome.fixed.get(path, text)
    before, after = json.loads(text), json.loads(new)
    assert _without_sources(after) == _without_sources(before)
    for old_cell, new_cell in zip(before["cells"], after["cells"]):
        if old_cell["source"] != new_cell["source"]:
            assert old_cell["cell_type"] == "code"
            assert type(old_cell["source"]) is type(new_cell["source"])
            source = "".join(new_cell["source"]) if isinstance(new_cell["source"], list) else new_cell["source"]
            ast.parse(mask(source)[0])
    assert new.endswith("\n") == text.endswith("\n")
