"""Syntax newer than the Python that runs the linter, which LibCST reads: PEP 695 generics and
`type` aliases (3.12), PEP 696 type parameter defaults (3.13), PEP 701 f-strings (3.12), PEP 758's
`except A, B:` (3.14) and `match` (3.10). pre-commit builds its hook with the default `python3` and
CI images lag behind a project's Python: such a file is linted like any other, its findings placed
from LibCST's tree, and TRP000 stays for code that no Python accepts (parsing/source.py).

Which Python runs this file decides what CPython refuses, not what the tests expect: on 3.9-3.11
every module below goes through LibCST's verdict; on 3.12/3.13 the generics and f-strings compile
and only `except A, B:` (and 3.13's defaults on 3.12) does. `refused` names the cases where it
matters. Each test states what holds on every version from 3.9 (pyproject's oldest) on.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import libcst as cst
import pytest
from libcst.metadata import MetadataWrapper, PositionProvider

from conftest import lint_project, write_project
from torchrepro_lint.analysis.module_index import ModuleIndex
from torchrepro_lint.analysis.syntax import evaluated_string
from torchrepro_lint.config import load_config
from torchrepro_lint.fixes.apply import edit_text
from torchrepro_lint.fixes.noqa import edit_for_row
from torchrepro_lint.fixes.runner import fix_paths
from torchrepro_lint.parsing import source as source_module
from torchrepro_lint.parsing.positions import _span
from torchrepro_lint.parsing.source import SourceFile
from torchrepro_lint.pipeline.engine import lint_paths


def refused(text: str) -> bool:
    """Whether the Python running the tests refuses `text` (the fallback is then what is tested)."""
    try:
        ast.parse(text)
    except SyntaxError:
        return True
    return False


# -- a project on Python 3.14, in modules that a training script imports ------------------------
GENERICS = '''# Generic pieces of the pipeline.

import functools
import random

import numpy as np
import torch

type JsonLike = (
    dict[str, "JsonLike"] | list["JsonLike"] | str | int | float | None
)
type Pair[T] = tuple[T, T]


@functools.cache
# one buffer per width
def buffer[T: (int, float)](width: T) -> torch.Tensor:
    return torch.zeros(width, device="cuda")


class Pipeline[TIn, TOut = TIn](torch.nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.proj = torch.nn.Linear(width, width)

    def forward(self, batch: TIn) -> TOut:
        totals = torch.zeros(batch.shape[0], device="cuda")
        totals.index_add_(0, batch.argmax(1), batch.sum(1))  # <-- TRP401
        return totals


def load[T: JsonLike](path: str) -> T:
    return path


def seed_everything[S: int](seed: S) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def count(index, values):
    counts = torch.zeros(8, device="cuda")
    counts.index_add_(0, index, values)  # <-- TRP401
    return counts
'''

FSTRINGS = '''import os

import torch


def describe(config: dict, width: int) -> str:
    return f"{config["name"]!r:{width}} with {f"{config["layers"]} layers"}"


def shard_names(root: str) -> dict[str, int]:
    banner = f"{
        root.upper()  # a comment in a replacement field
    }: {'shards'!r:>{12}}"
    print(banner)
    return {name: i for i, name in enumerate(os.listdir(root))}  # <-- TRP601


def first_shard(root: str) -> str:
    return f"{
        os.listdir(root)[0]
    }.bin"  # noqa: TRP601 (read here, where the f-string ends, as Python 3.12's tokens have it)


def scatter(values, index):
    out = torch.zeros(16, device="cuda")
    return out.scatter_add_(0, index, values)  # <-- TRP401
'''

HANDLERS = '''import json
import os

import torch


def read_manifest(path: str) -> dict[str, int]:
    try:
        with open(path) as handle:
            return json.load(handle)
    except FileNotFoundError, json.JSONDecodeError:
        return {name: i for i, name in enumerate(os.listdir(os.path.dirname(path)))}  # <-- TRP601


def fast_mode(mode: str) -> None:
    match mode:
        case "fast":
            try:
                torch.backends.cudnn.benchmark = True  # <-- TRP201
            except* ValueError, TypeError:
                pass
'''

TRAIN = '''import torch

from fstrings import first_shard, scatter, shard_names
from generics import Pipeline, count, seed_everything
from handlers import fast_mode, read_manifest


def main() -> None:
    seed_everything(0)
    torch.backends.cudnn.deterministic = True  # <-- TRP202
    fast_mode("fast")
    model = Pipeline(8)
    data = torch.randn(4, 8)
    print(model(data), shard_names("."), first_shard("."), read_manifest("m.json"))
    print(scatter(data[0], torch.arange(8)), count(torch.arange(8), data[0]))


if __name__ == "__main__":
    main()
'''

PROJECT = {"generics.py": GENERICS, "fstrings.py": FSTRINGS, "handlers.py": HANDLERS, "train.py": TRAIN}

# The same code in the syntax of Python 3.9, line for line: a finding on a line that is not
# rewritten must be the same finding, at the same place.
OLDER = {
    "generics.py": [
        ("type JsonLike = (", "JsonLike = ("),
        ("type Pair[T] = tuple[T, T]", "Pair = tuple"),
        ("def buffer[T: (int, float)](width: T)", "def buffer(width)"),
        ("class Pipeline[TIn, TOut = TIn](torch.nn.Module):", "class Pipeline(torch.nn.Module):"),
        ("def load[T: JsonLike](path: str) -> T:", "def load(path: str):"),
        ("def seed_everything[S: int](seed: S) -> None:", "def seed_everything(seed) -> None:"),
    ],
    "fstrings.py": [
        ('f"{config["name"]!r:{width}} with {f"{config["layers"]} layers"}"', "f\"{config['name']!r:{width}} with layers\""),
        ('banner = f"{', "banner = ("),
        ("        root.upper()  # a comment in a replacement field", "        root.upper()"),
        ("    }: {'shards'!r:>{12}}\"", "    )"),
        ('    return f"{\n', "    return (\n"),
        ("        os.listdir(root)[0]\n", "        os.listdir(root)[0]  # noqa: TRP601\n"),
        ('    }.bin"  # noqa: TRP601 (read here', "    )  # (read here"),
    ],
    "handlers.py": [
        ("except FileNotFoundError, json.JSONDecodeError:", "except (FileNotFoundError, json.JSONDecodeError):"),
        ("    match mode:", "    if mode:"),
        ('        case "fast":', '        if "fast":'),
        ("except* ValueError, TypeError:", "except (ValueError, TypeError):"),
    ],
}


def older(name: str) -> str:
    text = PROJECT[name]
    for newer, old in OLDER.get(name, ()):
        assert text.count(newer) == 1, newer
        text = text.replace(newer, old)
    return text


def _found(result, root: Path | None = None) -> list[tuple]:
    """(file name, place, code, message) of each finding, paths in messages relative to `root`."""
    where = f"{root}/" if root is not None else None
    return sorted(
        (Path(f.path).name, f.row, f.column, f.end_row, f.end_column, f.code, f.message.replace(where, "") if where else f.message)
        for f in result.findings
    )


def _lint(root: Path, files: dict[str, str]):
    root.mkdir(parents=True, exist_ok=True)
    return lint_project(root, files)


def test_every_syntax_sample_is_read_by_libcst_and_refused_by_some_python():
    # The premise: LibCST reads each module whatever Python runs it, and the one with PEP 758
    # is refused by every Python before 3.14 (the older twins compile on 3.9).
    for name, text in PROJECT.items():
        cst.parse_module(text)
        ast.parse(older(name))
    assert refused(HANDLERS) == (sys.version_info < (3, 14))


def test_a_project_in_newer_syntax_is_linted_as_its_older_twin_is(tmp_path: Path):
    newer = _found(_lint(tmp_path / "newer", PROJECT), tmp_path / "newer")
    twin = _found(_lint(tmp_path / "older", {name: older(name) for name in PROJECT}), tmp_path / "older")
    assert newer == twin
    # what the markers say: no TRP000; the seed helper in a generic function seeds the program
    # (no TRP101), the cuDNN switch of a module with `except A, B:` meets train.py's claim (TRP201)
    marked = sorted(
        (name, row, line.split("# <-- ")[1])
        for name, text in PROJECT.items()
        for row, line in enumerate(text.splitlines(), start=1)
        if "# <-- " in line
    )
    assert sorted((name, row, code) for name, row, _, _, _, code, _ in newer) == marked
    columns = {(name, row): column for name, row, column, *_ in newer}
    assert columns[("generics.py", 28)] == 9  # `totals.index_add_(...)` in a generic class's method
    assert columns[("generics.py", 44)] == 5  # in a function after the decorated generic one and the class
    assert columns[("fstrings.py", 15)] == 46  # after a multi-line f-string with a comment inside


def test_findings_are_placed_like_libcst_places_every_node():
    for name in ("generics.py", "fstrings.py", "handlers.py"):
        source = SourceFile(Path(name), PROJECT[name])
        ModuleIndex(source)
        assert source._newer_syntax == refused(source.text)
        whole = MetadataWrapper(source.module, unsafe_skip_copy=True).resolve(PositionProvider)
        nodes = list(source.parents)
        assert len(nodes) > 100
        for node in nodes:
            assert source.span(node) == _span(whole[node], 0), (name, type(node).__name__)
        if source._newer_syntax:  # each placed in its top-level statement, not the whole module
            assert source._spans._whole is None  # (CPython's path places a decorated statement's own nodes so)


def test_a_refused_file_is_parsed_once_and_a_compiled_one_is_not_sent_to_the_fallback(monkeypatch):
    asked = []
    monkeypatch.setattr(source_module, "newer_syntax", lambda text, error: asked.append(text) or source_module.parse_unvalidated(text))
    before = source_module.PARSES[0]
    SourceFile(Path("handlers.py"), HANDLERS).module
    assert source_module.PARSES[0] - before == 1  # the tree that said "LibCST reads it" is the file's
    assert asked == ([HANDLERS] if refused(HANDLERS) else [])
    SourceFile(Path("train.py"), TRAIN).module
    assert len(asked) == (1 if refused(HANDLERS) else 0)  # CPython compiled it: no LibCST verdict asked


def test_the_module_is_not_dropped_from_the_programs_that_import_it(tmp_path: Path):
    # The seeding helper is the only seed: were generics.py left out, train.py's program would
    # draw unseeded (TRP101) and the determinism claim would miss handlers.py's switch.
    result = lint_project(tmp_path, PROJECT)
    codes = {(Path(f.path).name, f.code) for f in result.findings}
    assert ("train.py", "TRP101") not in codes and ("handlers.py", "TRP201") in codes
    assert not any(code == "TRP000" for _, code in codes)


# -- what no Python accepts is still TRP000 -------------------------------------------------------
@pytest.mark.parametrize(
    "text, message, row, column",
    [
        ("import torch\n\ndef train(:\n    pass\n", "file does not parse: invalid syntax", 3, 11),
        ("x = 1\ny = '\\x1'\n", "file does not parse: (unicode error)", 2, None),
        ("x = " + "(" * 201 + "1" + ")" * 201 + "\n", "file does not parse: too many nested parentheses", 1, None),
    ],
    ids=["syntax error", "bad escape", "nesting past CPython's limit"],
)
def test_code_that_no_python_accepts_is_trp000_with_cpythons_message_and_place(tmp_path: Path, text, message, row, column):
    # (LibCST reads the last two: its grammar is looser there, CPython's message decides)
    result = lint_project(tmp_path, {"broken.py": text, "generics.py": GENERICS})
    (finding,) = [f for f in result.findings if Path(f.path).name == "broken.py"]
    assert finding.code == "TRP000" and finding.message.startswith(message) and finding.row == row
    assert column is None or finding.column == column
    assert not any(f.code == "TRP000" for f in result.findings if Path(f.path).name == "generics.py")


def test_a_real_error_in_a_file_with_newer_syntax_is_trp000():
    text = GENERICS + "\ndef broken(:\n    pass\n"
    with pytest.raises(source_module.ParseFailure) as failure:
        SourceFile(Path("generics.py"), text).module
    assert failure.value.message == "file does not parse: invalid syntax"
    # at CPython's first error: on 3.14 the broken function; before, the first newer syntax
    # (3.13: the class's type parameter default; 3.12 too; before 3.12, the first `type`)
    with pytest.raises(SyntaxError) as cpython:
        ast.parse(text)
    assert (failure.value.row, failure.value.column) == (cpython.value.lineno, cpython.value.offset)


def test_deep_nesting_that_would_overflow_libcst_is_trp000_not_a_crash(tmp_path: Path):
    # LibCST's native parser overflows its stack on 5,000 nested parentheses (a segfault): CPython's
    # limit decides before LibCST is asked. In a process of its own, so a crash fails this test only.
    write_project(tmp_path, {"deep.py": "x = " + "(" * 5000 + "1" + ")" * 5000 + "\n"})
    run = subprocess.run(
        [sys.executable, "-m", "torchrepro_lint", "check", "--no-cache", "deep.py"], cwd=tmp_path, capture_output=True, text=True
    )
    assert run.returncode == 1, run.stderr
    assert "deep.py:1:" in run.stdout and "TRP000 error: file does not parse: too many nested parentheses" in run.stdout


def test_a_string_that_does_not_decode_is_no_value_rather_than_an_exception():
    # LibCST reads `"\x1"`; in a file refused for newer syntax it reaches the rules
    assert evaluated_string(cst.parse_expression('"\\x1"')) is None
    assert evaluated_string(cst.parse_expression('"a\\tb"')) == "a\tb"


# -- fixes and noqa comments work on such files as on any other ----------------------------------
def test_a_fix_is_applied_to_a_file_in_newer_syntax(tmp_path: Path):
    write_project(tmp_path, PROJECT)
    outcome = fix_paths([tmp_path], load_config([tmp_path]), unsafe=False)
    fixed = {path.name: text for path, text in outcome.fixed.items()}["handlers.py"]
    assert "enumerate(sorted(os.listdir(os.path.dirname(path))))" in fixed  # TRP601's
    assert "torch.backends.cudnn.benchmark = False" in fixed  # TRP201's
    assert fixed.replace("sorted(os.listdir(os.path.dirname(path)))", "os.listdir(os.path.dirname(path))").replace(
        "benchmark = False", "benchmark = True"
    ) == HANDLERS  # nothing else


def test_noqa_comments_in_newer_syntax_go_where_they_are_read_and_never_change_the_code():
    text = "type Pair = tuple[int, int]\ny = 1 + \\\n    2\nz = 3\n"
    assert edit_text(text, edit_for_row(text, 4, "TRP201")).endswith("z = 3  # noqa: TRP201\n")
    assert edit_for_row(text, 2, "TRP201") is None  # after the backslash it would not parse
    text = 'type Pair = tuple[int, int]\nname = f"{\n    os.listdir(root)[0]\n}.bin"\n'
    edit = edit_for_row(text, 3, "TRP601")
    assert edit_text(text, edit).endswith('}.bin"  # noqa: TRP601\n')  # where the f-string ends


def test_a_noqa_where_a_multi_line_f_string_ends_silences_a_finding_inside_it(tmp_path: Path):
    lines = FSTRINGS.splitlines()
    row = next(i for i, line in enumerate(lines, start=1) if "os.listdir(root)[0]" in line)
    without = FSTRINGS.replace("  # noqa: TRP601 (read here", "  # (read here")
    found = _lint(tmp_path / "a", {**PROJECT, "fstrings.py": without})
    assert any(f.code == "TRP601" and f.row == row for f in found.findings)
    kept = _lint(tmp_path / "b", PROJECT)
    assert not any(f.code == "TRP601" and f.row == row for f in kept.findings)


# -- notebooks ------------------------------------------------------------------------------------
def test_a_notebook_cell_in_newer_syntax_is_checked_not_left_out(tmp_path: Path):
    cells = [
        "import os\nimport torch\n",
        "type Names = list[str]\n\ndef listing[T](root: T) -> Names:\n    return {n: i for i, n in enumerate(os.listdir(root))}\n",
    ]
    document = {
        "cells": [
            {"cell_type": "code", "execution_count": i + 1, "id": f"c{i}", "metadata": {}, "outputs": [], "source": c.splitlines(True)}
            for i, c in enumerate(cells)
        ],
        "metadata": {"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    write_project(tmp_path, {"explore.ipynb": json.dumps(document)})
    result = lint_paths([tmp_path], load_config([tmp_path]))
    assert [(f.code, f.cell, f.row) for f in result.findings] == [("TRP601", 2, 4)]


# -- the language server sees what `check` sees --------------------------------------------------
def test_the_language_server_lints_a_buffer_in_newer_syntax_as_check_does(tmp_path: Path, monkeypatch):
    from session_checks import fresh_findings
    from torchrepro_lint.server.session import Workspace

    monkeypatch.chdir(tmp_path)
    write_project(tmp_path, PROJECT)
    generics, train = (tmp_path / "generics.py").resolve(), (tmp_path / "train.py").resolve()
    checked = _found(lint_paths([tmp_path], load_config([tmp_path])), tmp_path)
    session = Workspace(tmp_path, persistent=False).open(generics, GENERICS)
    analysis = session.analyse()
    served = sorted((p.name, f.row, f.column, f.end_row, f.end_column, f.code, f.message) for p, fs in analysis.findings.items() for f in fs)
    assert served == checked
    assert not any(f.code == "TRP000" for fs in analysis.findings.values() for f in fs)
    # the syntax gate's verdict is the buffer's last good text; where CPython refused it, the
    # tree LibCST parsed to say so is the one the engine linted (one parse per edit)
    assert session._good[generics] == GENERICS
    if refused(GENERICS):
        assert session._syntax[generics].tree is None
        assert session._parsed[generics].module is session._syntax[generics].module

    # an edit above the class: its findings move with it, as a fresh session has them
    session.buffers[generics] = GENERICS.replace("class Pipeline", "# the model\nclass Pipeline")
    rows = sorted(f.row for f in session.analyse().findings[generics])
    assert rows == [29, 45] and session.analyse().findings == fresh_findings(tmp_path, session)

    # a real syntax error typed into it: TRP000 with CPython's message; the project keeps the
    # last text that parsed, whose helper seeds train.py's program (no TRP101 there)
    session.buffers[generics] = session.buffers[generics].replace("def load[T: JsonLike](path: str)", "def load[T: JsonLike](path: str")
    findings = session.analyse().findings
    (broken,) = findings[generics]
    assert broken.code == "TRP000" and broken.message.startswith("file does not parse")
    assert sorted(f.code for f in findings[train]) == ["TRP202"]
