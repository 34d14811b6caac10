"""Notebooks linted as programs: cells top to bottom, findings at cells, bad notebooks reported."""

from __future__ import annotations

from pathlib import Path

import pytest

from notebook_support import write_notebook, write_pyproject
from torchrepro_lint.cli import main
from torchrepro_lint.config import load_config
from torchrepro_lint.pipeline.discovery import discover
from torchrepro_lint.pipeline.engine import lint_paths


def lint(root: Path):
    return lint_paths([root], load_config([root]))


def found(result, code: str | None = None) -> list[tuple[str, int | None, int, int, str]]:
    return [(Path(f.path).name, f.cell, f.row, f.column, f.code) for f in result.findings if code in (None, f.code)]


@pytest.fixture
def root(tmp_path):
    write_pyproject(tmp_path)
    return tmp_path


# A notebook in the way people write them: imports and magics first, a model, then a seed too late.
LATE_SEED = (
    ("markdown", "# Fitting a small classifier\nEverything below runs top to bottom."),
    "import torch\nfrom torch import nn\n%matplotlib inline\n!nvidia-smi",
    "classifier = nn.Sequential(nn.Linear(16, 8), nn.ReLU(), nn.Linear(8, 3))\n"
    "optimizer = torch.optim.Adam(classifier.parameters())",
    ("markdown", "Fix the seed so that the batches repeat."),
    "torch.manual_seed(1234)\nfeatures = torch.randn(32, 16)",
    "%%time\nfor epoch in range(2):\n    optimizer.zero_grad()\n    classifier(features).sum().backward()\n    optimizer.step()",
)


def test_a_seed_after_the_model_cell_is_a_late_seed(root):
    write_notebook(root / "fit.ipynb", *LATE_SEED)
    result = lint(root)
    assert not result.errors
    assert found(result) == [("fit.ipynb", 5, 1, 1, "TRP105")]
    [finding] = result.findings
    assert f"`nn.Linear(16, 8)` at {finding.path}:cell 3:1 already drew" in finding.message
    assert (finding.end_row, finding.end_column) == (1, 24)


def test_magics_and_shell_escapes_neither_break_parsing_nor_move_positions(root):
    write_notebook(
        root / "magic.ipynb",
        "%load_ext autoreload\n%autoreload 2\n!pip install -q torch\nimport torch\nsizes = !ls data\ntorch.manual_seed?",
        "%%bash\necho 'this is (not python'\n",
        "%time torch.backends.cudnn.deterministic = True\n%time torch.backends.cudnn.benchmark = True",
    )
    result = lint(root)
    assert found(result) == [
        ("magic.ipynb", 3, 1, 7, "TRP202"),
        ("magic.ipynb", 3, 2, 7, "TRP201"),
    ]
    benchmark = result.findings[1]
    line = "%time torch.backends.cudnn.benchmark = True"
    assert line[benchmark.column - 1 : benchmark.end_column - 1] == "torch.backends.cudnn.benchmark = True"


def test_a_dataloader_cell(root):
    write_notebook(
        root / "loader.ipynb",
        "import torch\nfrom torch.utils.data import DataLoader, TensorDataset",
        "data = TensorDataset(torch.arange(100.0))",
        "# batches for the training loop\nbatches = DataLoader(data, batch_size=10, shuffle=True, num_workers=2)",
    )
    result = lint(root)
    assert ("loader.ipynb", 3, 2, 11, "TRP301") in found(result)


def test_noqa_on_the_reported_line_inside_a_cell(root):
    cells = list(LATE_SEED)
    cells[4] = "torch.manual_seed(1234)  # noqa: TRP105\nfeatures = torch.randn(32, 16)"
    write_notebook(root / "quiet.ipynb", *cells)
    cells[4] = "torch.manual_seed(1234)\nfeatures = torch.randn(32, 16)  # noqa: TRP105"
    write_notebook(root / "wrong_line.ipynb", *cells)
    assert found(lint(root)) == [("wrong_line.ipynb", 5, 1, 1, "TRP105")]


def test_a_file_wide_noqa_in_any_cell(root):
    write_notebook(root / "all.ipynb", *LATE_SEED, "# torchrepro-lint: noqa: TRP1")
    assert found(lint(root)) == []


def test_empty_notebooks(root, monkeypatch, capsys):
    write_notebook(root / "empty.ipynb")
    write_notebook(root / "prose.ipynb", ("markdown", "Only words here."), "")
    monkeypatch.chdir(root)
    assert main(["check", "."]) == 0
    assert capsys.readouterr().out == "No reproducibility hazards found in 2 files.\n"


def test_a_syntax_error_in_one_cell_is_reported_there_and_the_rest_is_linted(root):
    cells = list(LATE_SEED)
    cells.insert(3, "print('unfinished'")
    write_notebook(root / "typo.ipynb", *cells)
    result = lint(root)
    assert found(result) == [("typo.ipynb", 4, 1, 6, "TRP000"), ("typo.ipynb", 6, 1, 1, "TRP105")]
    assert result.findings[0].message == (
        "cell 4 does not parse ('(' was never closed); the rest of the notebook was checked without it"
    )


def test_a_malformed_notebook_is_a_one_line_error_and_the_rest_is_still_linted(root, monkeypatch, capsys):
    (root / "broken.ipynb").write_text('{"cells": [\n  {"cell_type": "code",\n}', encoding="utf-8")
    (root / "old.ipynb").write_text('{"nbformat": 3, "nbformat_minor": 0, "worksheets": []}', encoding="utf-8")
    write_notebook(root / "fit.ipynb", *LATE_SEED)
    monkeypatch.chdir(root)
    code = main(["check", "."])
    out, err = capsys.readouterr()
    assert code == 2
    assert out.startswith("fit.ipynb:cell 5:1:1: TRP105 warning: ")
    assert err.splitlines() == [
        "torchrepro-lint: error: broken.ipynb: not a valid notebook: invalid JSON: "
        "Expecting property name enclosed in double quotes (line 3, column 1)",
        "torchrepro-lint: error: old.ipynb: not an nbformat 4 notebook (nbformat 3); re-save it with Jupyter to convert it",
    ]


def test_notebooks_are_discovered_but_not_their_checkpoints(root):
    write_notebook(root / "nb" / "a.ipynb", "x = 1")
    write_notebook(root / "nb" / ".ipynb_checkpoints" / "a-checkpoint.ipynb", "x = 1")
    files, _ = discover([root], load_config([root]))
    assert [p.relative_to(root).as_posix() for p in files] == ["nb/a.ipynb"]


# -- a notebook is an entry point ------------------------------------------------------------
def test_a_notebook_is_a_program_that_may_use_modules_beside_it(root):
    (root / "helpers.py").write_text(
        "import os\nimport random\nimport torch\n\n\ndef fix_seeds(seed):\n    random.seed(seed)\n"
        "    torch.manual_seed(seed)\n    os.environ['PYTHONHASHSEED'] = str(seed)\n",
        encoding="utf-8",
    )
    write_notebook(root / "seeded.ipynb", "import torch\nfrom helpers import fix_seeds", "fix_seeds(0)\nlayer = torch.nn.Linear(3, 3)")
    write_notebook(root / "unseeded.ipynb", "import torch", "layer = torch.nn.Linear(3, 3)\nlayer(torch.ones(3)).sum().backward()")
    result = lint(root)
    # The helper's code runs only because the notebook calls it: the program-level rules see it.
    assert found(result) == [("helpers.py", None, 9, 5, "TRP204"), ("unseeded.ipynb", 1, 1, 1, "TRP101")]


def test_nothing_can_import_a_notebook(root):
    # `import analysis` finds no module: analysis.ipynb is not analysis.py, and stays an entry point.
    write_notebook(root / "analysis.ipynb", "import torch", "weights = torch.randn(4)")
    (root / "report.py").write_text("import analysis\n\nprint(analysis.weights)\n", encoding="utf-8")
    assert ("analysis.ipynb", 1, 1, 1, "TRP101") in found(lint(root))


def test_a_notebook_runs_its_main_guard(root):
    # Jupyter runs a notebook as `__main__`: code under the guard runs, as in a script.
    write_notebook(root / "guarded.ipynb", "import torch", "if __name__ == '__main__':\n    torch.randn(2)")
    assert found(lint(root), "TRP101") == [("guarded.ipynb", 2, 1, 1, "TRP101")]


# -- regressions from real notebooks ----------------------------------------------------------
def test_draws_from_an_explicit_generator_do_not_need_the_global_seed(root):
    # makemore-style notebooks draw every weight from `g = torch.Generator().manual_seed(...)`.
    write_notebook(
        root / "explicit.ipynb",
        "import torch",
        "g = torch.Generator().manual_seed(2147483647)\nW = torch.randn((27, 27), generator=g)\n"
        "idx = torch.multinomial(W.exp()[0], num_samples=1, replacement=True, generator=g)\n"
        "W.normal_(0, 1, generator=g)",
    )
    (root / "explicit.py").write_text(
        "import torch\n\ng = torch.Generator().manual_seed(7)\nnoise = torch.rand(3, generator=g)\n", encoding="utf-8"
    )
    write_notebook(root / "mixed.ipynb", "import torch", "g = torch.Generator().manual_seed(1)\na = torch.randn(2, generator=g)\nb = torch.randn(2)")
    assert found(lint(root)) == [("mixed.ipynb", 1, 1, 1, "TRP101")]
