"""Reading notebooks: IPython syntax masked line for line, code cells joined, rows mapped back."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from notebook_support import notebook
from torchrepro_lint.notebooks import lines_of, load_source, mask
from torchrepro_lint.parsing.source import SourceError


def masked_lines(source: str) -> list[str]:
    return mask(source)[0].splitlines()


@pytest.mark.parametrize(
    "line, expected",
    [
        ("%matplotlib inline", "#matplotlib inline"),
        ("!pip install --quiet torchvision", "#pip install --quiet torchvision"),
        ("!!ls -la", "#!ls -la"),
        ("%load_ext autoreload", "#load_ext autoreload"),
        ("listing = !ls data/", "#isting = !ls data/"),
        ("lr_value = %env LR", "#r_value = %env LR"),
        ("?torch.manual_seed", "#torch.manual_seed"),
        ("torch.manual_seed??", "#orch.manual_seed??"),
        ("/print hello", "#print hello"),
    ],
)
def test_top_level_escapes_become_comments_of_the_same_length(line, expected):
    assert masked_lines(line + "\nx = 1\n") == [expected, "x = 1"]
    assert len(expected) == len(line)


def test_escapes_inside_a_block_keep_the_block_non_empty():
    source = "for name in ['a', 'b']:\n    !echo {name}\nif True:\n    %pwd\n    ?x\n"
    masked = mask(source)[0]
    assert masked.splitlines() == ["for name in ['a', 'b']:", "    pass", "if True:", "    pass", "    0"]
    ast.parse(masked)


def test_whole_cell_magics_blank_the_cell_and_keep_its_rows():
    source = "%%bash\nfor f in *.csv; do\n  wc -l $f\ndone"
    masked = mask(source)[0]
    assert masked == "\n\n\n\n" and len(lines_of(masked)) == len(lines_of(source))
    assert mask("\n%%writefile helper.py\nimport torch\n")[0] == "\n\n\n"


def test_python_cell_magics_keep_their_body():
    masked = masked_lines("%%time\nweights = torch.randn(3)\n")
    assert masked == ["#%time", "weights = torch.randn(3)"]
    assert masked_lines("%%capture out\nprint('quiet')\n") == ["#%capture out", "print('quiet')"]


def test_timed_statements_are_kept_and_their_columns_recorded():
    masked, shifts = mask("%time model = build()\n    \n%timeit -n 10 -r3 step()\n")
    assert masked.splitlines() == ["model = build()", "    ", "step()"]
    assert shifts == {1: (0, 6), 3: (0, 18)}
    assert mask("%time !ls\n")[0] == "#time !ls\n"  # not a Python statement after all


def test_only_lines_that_start_a_statement_are_magic():
    source = (
        "total = (count\n"
        "         % 7)\n"
        "notes = '''\n"
        "!this is prose, not a shell escape\n"
        "%so is this\n"
        "'''\n"
        "path = 'a' \\\n"
        "    '!b'\n"
    )
    assert mask(source)[0] == source


def test_a_continued_shell_escape_masks_its_continuation():
    masked = masked_lines("!pip install \\\n    numpy scipy\nx = 1\n")
    assert masked == ["#pip install \\", "", "x = 1"]


def test_code_cells_are_joined_in_order_and_rows_map_back(tmp_path):
    text = notebook(
        ("markdown", "# A heading\nsome prose"),
        "import torch\n%matplotlib inline",
        ("raw", "raw text"),
        "",
        "x = torch.zeros(2)\ny = x + 1",
    )
    source = load_source(tmp_path / "walk.ipynb", text)
    assert source.text == "import torch\n#matplotlib inline\nx = torch.zeros(2)\ny = x + 1\n"
    assert [(c.number, c.first_row, c.rows) for c in source.cells.cells] == [(2, 1, 2), (5, 3, 2)]
    cell, row, column = source.cells.locate(4, 5)
    assert (cell.number, row, column) == (5, 2, 5)


def test_file_rows_point_at_the_json_lines_holding_each_source_line(tmp_path):
    text = notebook("a = 1\nb = 2", "c = 3")
    source = load_source(tmp_path / "rows.ipynb", text)
    json_lines = text.splitlines()
    for cell in source.cells.cells:
        for row, file_row in enumerate(cell.file_rows, start=1):
            module_line = source.text.splitlines()[cell.first_row + row - 2]
            assert module_line in json_lines[file_row - 1]


def test_a_cell_that_does_not_parse_is_left_out_and_listed(tmp_path):
    text = notebook("import torch", "def broken(:\n    pass", "torch.manual_seed(0)")
    source = load_source(tmp_path / "broken.ipynb", text)
    assert source.text == "import torch\n\n\ntorch.manual_seed(0)\n"
    [failure] = source.cells.broken
    assert (failure.row, failure.column) == (2, 12)
    assert failure.message.startswith("cell 2 does not parse (invalid syntax)")


def test_non_python_notebooks_have_no_code(tmp_path):
    source = load_source(tmp_path / "r.ipynb", notebook("library(ggplot2)", language="R"))
    assert source.text == "" and source.cells.cells == []


def test_a_string_source_is_read_like_a_list(tmp_path):
    text = notebook("a = 1\nb = 2", source_as_list=False, indent=2)
    assert load_source(tmp_path / "s.ipynb", text).text == "a = 1\nb = 2\n"


@pytest.mark.parametrize(
    "text, message",
    [
        ('{"cells": [,]}', "not a valid notebook: invalid JSON: Expecting value (line 1, column 12)"),
        ("", "not a valid notebook: invalid JSON: Expecting value (line 1, column 1)"),
        ("[1, 2]", "not a valid notebook: the JSON document is not an object"),
        ('{"nbformat": 3, "worksheets": []}', "not an nbformat 4 notebook (nbformat 3); re-save it with Jupyter to convert it"),
        ('{"cells": []}', "not an nbformat 4 notebook (no `nbformat` field); re-save it with Jupyter to convert it"),
        ('{"nbformat": 4, "cells": {}}', "not a valid notebook: `cells` is missing or not a list"),
        (
            '{"nbformat": 4, "cells": [{"cell_type": "code", "source": 7}]}',
            "not a valid notebook: the source of cell 1 is neither a string nor a list of strings",
        ),
    ],
)
def test_malformed_notebooks_raise_a_clear_source_error(text, message):
    with pytest.raises(SourceError) as raised:
        load_source(Path("bad.ipynb"), text)
    assert str(raised.value) == message


def test_positions_in_messages_are_rewritten_to_cells(tmp_path):
    from torchrepro_lint.findings import Finding, Severity
    from torchrepro_lint.notebooks import to_cells

    source = load_source(tmp_path / "nb.ipynb", notebook("import os", ("markdown", "text"), "a = 1\nb = os.listdir('.')\nc = b[0]"))
    maps = {"sub/nb.ipynb": source.cells}
    own = Finding("TRP601", "order decides the first entry (line 4): sort it", Severity.WARNING, "sub/nb.ipynb", 3, 5, 3, 20)
    other = Finding("TRP105", "after `x` at sub/nb.ipynb:2 and at other/sub/nb.ipynb:2, sub/nb.ipynb:2:3", Severity.WARNING, "lib.py", 7, 1, 7, 9)
    mapped_own, mapped_other = to_cells([own, other], maps)
    assert (mapped_own.cell, mapped_own.row, mapped_own.column, mapped_own.end_row) == (3, 2, 5, 2)
    assert mapped_own.message == "order decides the first entry (cell 3, line 3): sort it"
    assert mapped_other.cell is None and mapped_other.row == 7
    assert mapped_other.message == "after `x` at sub/nb.ipynb:cell 3:1 and at other/sub/nb.ipynb:2, sub/nb.ipynb:2:3"
