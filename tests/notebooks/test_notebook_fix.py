"""`--fix` on notebooks: only the fixed cells' sources change; every other byte stays."""

from __future__ import annotations

import io
import json
import os
import stat
import sys

import pytest

from notebook_support import cell_sources, notebook, write_notebook, write_pyproject
from torchrepro_lint.cli import main

OUTPUTS = {
    1: [
        {"name": "stdout", "output_type": "stream", "text": ["Gerät: cpu\n", "ready\n"]},
        {
            "data": {"image/png": "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==", "text/plain": ["<Figure size 640x480 with 1 Axes>"]},
            "metadata": {"needs_background": "light"},
            "output_type": "display_data",
        },
    ]
}
CELLS = (
    ("markdown", "# Übung: deterministic training\nThe cells below set the switches."),
    "import torch\n%matplotlib inline\nprint('Gerät: cpu')",
    "!nvidia-smi\ntorch.backends.cudnn.deterministic = True\ntorch.backends.cudnn.benchmark = True  # faster\nprint('ready')",
)


@pytest.fixture
def root(tmp_path, monkeypatch):
    write_pyproject(tmp_path)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def fix(*args: str) -> int:
    return main(["check", "--fix", "--quiet", *args])


def test_a_safe_fix_changes_only_the_fixed_line(root, capsys):
    path = write_notebook(root / "train.ipynb", *CELLS, outputs=OUTPUTS)
    before = path.read_bytes()
    fix("train.ipynb")
    after = path.read_bytes()
    assert after == before.replace(b"benchmark = True", b"benchmark = False", 1)
    assert after.endswith(b"}\n")
    fix("train.ipynb")
    assert path.read_bytes() == after  # nothing left to fix
    assert "fixed" not in capsys.readouterr().out


def test_another_layout_is_kept_too(root):
    # Not what nbformat writes: two-space indent, keys unsorted, sources as strings, non-ASCII
    # escaped, CRLF line ends and no final newline. The fix must not normalise any of it.
    document = {
        "nbformat": 4,
        "nbformat_minor": 2,
        "metadata": {"title": "Lösung"},
        "cells": [
            {"source": "# Schritt 1 \u2013 imports", "cell_type": "markdown", "metadata": {}},
            {"cell_type": "code", "source": "import torch\ntorch.backends.cudnn.deterministic = True\n"
             "torch.backends.cudnn.benchmark = True\nlabel = 'Größe'", "outputs": [], "metadata": {}, "execution_count": None},
        ],
    }
    text = json.dumps(document, indent=2).replace("\n", "\r\n")
    path = root / "layout.ipynb"
    path.write_bytes(text.encode("utf-8"))
    fix("layout.ipynb")
    assert path.read_bytes() == text.replace("benchmark = True", "benchmark = False").encode("utf-8")


def test_an_inserted_line_becomes_a_new_item_in_the_same_layout(root):
    path = write_notebook(root / "claim.ipynb", *CELLS, outputs=OUTPUTS)
    before = path.read_text(encoding="utf-8")
    fix("--unsafe-fixes", "claim.ipynb")
    after = path.read_text(encoding="utf-8")
    deterministic = '    "torch.backends.cudnn.deterministic = True\\n",\n'
    inserted = '    "torch.use_deterministic_algorithms(True)\\n",\n'
    expected = before.replace(deterministic, deterministic + inserted).replace("benchmark = True", "benchmark = False")
    assert after == expected


def test_a_line_added_after_a_cells_last_line_keeps_it_without_a_final_newline(root):
    path = write_notebook(root / "last.ipynb", "import torch", "torch.backends.cudnn.deterministic = True", "print(1)")
    fix("--unsafe-fixes", "last.ipynb")
    assert cell_sources(path)[1] == "torch.backends.cudnn.deterministic = True\ntorch.use_deterministic_algorithms(True)"
    assert json.loads(path.read_text(encoding="utf-8"))["cells"][1]["source"] == [
        "torch.backends.cudnn.deterministic = True\n",
        "torch.use_deterministic_algorithms(True)",
    ]


def test_a_fix_in_another_cell_than_its_finding(root):
    path = write_notebook(root / "draws.ipynb", "%pip install torch", "import torch", "noise = torch.randn(3)")
    fix("--unsafe-fixes", "draws.ipynb")
    assert cell_sources(path) == ["%pip install torch", "import torch", "torch.manual_seed(0)\nnoise = torch.randn(3)"]


def test_a_fix_on_a_timed_line_keeps_the_magic(root):
    path = write_notebook(
        root / "timed.ipynb",
        "import torch\ntorch.backends.cudnn.deterministic = True",
        "%time torch.backends.cudnn.benchmark = True",
    )
    fix("timed.ipynb")
    assert cell_sources(path)[1] == "%time torch.backends.cudnn.benchmark = False"


def test_the_file_is_replaced_atomically_with_its_mode(root):
    path = write_notebook(root / "mode.ipynb", *CELLS)
    os.chmod(path, 0o640)
    fix("mode.ipynb")
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    assert sorted(p.name for p in root.iterdir()) == ["mode.ipynb", "pyproject.toml"]  # no temporary left


def test_diff_writes_nothing(root, capsys):
    path = write_notebook(root / "dry.ipynb", *CELLS)
    before = path.read_bytes()
    assert main(["check", "--diff", "dry.ipynb"]) == 1
    out = capsys.readouterr().out
    assert '-    "torch.backends.cudnn.benchmark = True  # faster\\n",' in out
    assert '+    "torch.backends.cudnn.benchmark = False  # faster\\n",' in out
    assert path.read_bytes() == before


def test_standard_input_named_as_a_notebook(root, monkeypatch, capsys):
    text = notebook(*CELLS)
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(text.encode("utf-8"))))
    assert main(["check", "--fix", "--stdin-filename", "buffer.ipynb", "-"]) == 0
    out, err = capsys.readouterr()
    assert out == text.replace("benchmark = True", "benchmark = False")
    assert err.startswith("buffer.ipynb:cell 3:2:1: TRP202 warning:")


def test_show_fixes_names_the_cell(root, capsys):
    write_notebook(root / "shown.ipynb", *CELLS)
    main(["check", "--fix", "--show-fixes", "shown.ipynb"])
    assert "fixed shown.ipynb:cell 3:3:1: TRP201 " in capsys.readouterr().out
