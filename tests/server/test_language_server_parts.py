"""The language server's parts without a client: positions, noqa edits, the memory cache, sessions,
and notebooks' cells mapped to and from what the linter reads."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

pytest.importorskip("lsprotocol")
from lsprotocol import types  # noqa: E402

from torchrepro_lint import notebooks  # noqa: E402
from torchrepro_lint.findings import Edit, Finding, Fix, Severity  # noqa: E402
from torchrepro_lint.server.actions import fix_all, noqa_edit  # noqa: E402
from torchrepro_lint.parsing.lines import line_texts  # noqa: E402
from torchrepro_lint.server.convert import diagnostic, from_position, to_position  # noqa: E402
from torchrepro_lint.server.memory_cache import MemoryCache  # noqa: E402
from torchrepro_lint.server.notebook_sync import CODE, MARKDOWN, RAW, Cell, CellEdits, OpenNotebooks, cell_kind, replacement  # noqa: E402
from torchrepro_lint.server.session import Workspace  # noqa: E402
from session_checks import fresh_findings  # noqa: E402
from torchrepro_lint.fixes.apply import edit_text  # noqa: E402

UTF16, UTF8, UTF32 = types.PositionEncodingKind.Utf16, types.PositionEncodingKind.Utf8, types.PositionEncodingKind.Utf32


@pytest.fixture(autouse=True)
def _in_the_workspace(tmp_path, monkeypatch):
    """The server's workspace is the directory it runs in (Workspace's cwd defaults to it), and
    the engine resolves the display paths it is given against it: so do these tests."""
    monkeypatch.chdir(tmp_path)


def test_columns_count_utf16_code_units_after_astral_characters():
    lines = line_texts('s = "\U0001F600é"; torch.manual_seed(0)\r\nnext\rlast')
    assert lines == ['s = "\U0001F600é"; torch.manual_seed(0)', "next", "last"]
    column = lines[0].index("torch") + 1  # ours: 1-based code points
    assert to_position(lines, 1, column, UTF16) == types.Position(0, column - 1 + 1)  # the emoji is two units
    assert to_position(lines, 1, column, UTF8) == types.Position(0, column - 1 + 3 + 1)  # four bytes, é two
    assert to_position(lines, 1, column, UTF32) == types.Position(0, column - 1)
    for encoding in (UTF16, UTF8, UTF32):
        assert from_position(lines, to_position(lines, 1, column, encoding), encoding) == (1, column)
    assert to_position(lines, 3, 5, UTF16) == types.Position(2, 4)


def test_a_diagnostic_carries_code_link_severity_and_range():
    finding = Finding("TRP403", "dropout", Severity.NOTE, "m.py", 2, 5, 2, 9)
    result = diagnostic(finding, ["", "    F.dropout(x)"], UTF16, Path("/"), Path("/m.py"))
    assert result.code == "TRP403" and result.severity == types.DiagnosticSeverity.Information
    assert result.code_description.href.endswith("rules/TRP403.md")
    assert (result.range.start, result.range.end) == (types.Position(1, 4), types.Position(1, 8))
    assert result.related_information is None


@pytest.mark.parametrize(
    "line, expected",
    [
        ("torch.manual_seed(1)", "torch.manual_seed(1)  # noqa: TRP201"),
        ("x = 1   ", "x = 1  # noqa: TRP201"),
        ("x = 1  # keep", "x = 1  # keep  # noqa: TRP201"),
        ("x = 1  # noqa: E501", "x = 1  # noqa: E501, TRP201"),
        ("x = 1  # NOQA:TRP1", "x = 1  # NOQA:TRP1, TRP201"),
    ],
)
def test_noqa_is_added_where_it_is_read(line, expected):
    text = f"import torch\n{line}\nz = 2\n"
    edit = noqa_edit(text, 2, "TRP201")
    assert edit_text(text, edit) == f"import torch\n{expected}\nz = 2\n"


@pytest.mark.parametrize("line", ["x = 1  # noqa", "x = 1  # noqa: TRP2"])
def test_no_noqa_edit_where_the_code_is_already_suppressed(line):
    assert noqa_edit(f"{line}\n", 1, "TRP201") is None


def test_a_noqa_edit_inside_a_string_goes_where_the_string_ends():
    text = 'doc = """first\nsecond\n"""\n'
    for row in (1, 2, 3):
        assert edit_text(text, noqa_edit(text, row, "TRP201")) == 'doc = """first\nsecond\n"""  # noqa: TRP201\n'


def test_no_noqa_edit_after_a_backslash():
    assert noqa_edit("y = 1 + \\\n    2\n", 1, "TRP201") is None


def test_fix_all_is_none_without_safe_fixes():
    assert fix_all("x = 1\n", [Finding("TRP101", "m", Severity.WARNING, "m.py", 1, 1, 1, 2)]) is None


class _Disk:
    usable = True

    def __init__(self):
        self.entries = {}

    def get(self, kind, key):
        return self.entries.get((kind, key))

    def put(self, kind, key, value):
        self.entries[(kind, key)] = value

    def warning(self, message):
        pass


def test_memory_cache_keeps_what_the_last_two_runs_used_and_writes_through_only_when_told():
    disk = _Disk()
    disk.entries[("ir", "on-disk")] = "ir"
    cache = MemoryCache(disk)
    assert cache.get("ir", "on-disk") == "ir" and cache.disk_reads == 1
    cache.put("module", "unsaved", 1)
    assert ("module", "unsaved") not in disk.entries
    cache.end_run()
    cache.persist = True
    cache.put("module", "saved", 2)
    assert disk.entries[("module", "saved")] == 2
    cache.end_run()
    assert len(cache) == 3  # the previous run's entries are kept for an undo
    assert cache.get("module", "saved") == 2
    cache.end_run()
    assert len(cache) == 1 and cache.get("module", "unsaved") is None


def test_a_buffer_that_never_compiled_is_trp000_from_the_engine(tmp_path: Path):
    (tmp_path / "pyproject.toml").write_text("")
    path = tmp_path / "train.py"
    path.write_text("import torch\n")
    session = Workspace(tmp_path, persistent=False).open(path.resolve(), "def broken(:\n")
    (finding,) = session.analyse().findings[path.resolve()]
    assert (finding.code, finding.row) == ("TRP000", 1)


def test_the_server_command_without_the_extra_says_how_to_install_it(monkeypatch, capsys):
    from torchrepro_lint import cli

    monkeypatch.setitem(sys.modules, "pygls", None)  # as if pygls were not installed
    monkeypatch.delitem(sys.modules, "torchrepro_lint.server.app", raising=False)
    assert cli.main(["server"]) == cli.EXIT_ERROR
    assert "pip install 'torchrepro-lint[server]'" in capsys.readouterr().err


TRAIN_WITH_IMPORTED_SEED = "import torch\nfrom {module} import fix_seeds\n\nfix_seeds()\nmodel = torch.nn.Linear(2, 2)\n"
SEEDING = "import torch\n\n\ndef fix_seeds():\n    torch.manual_seed(0)\n"


def _codes_in(session, path: Path) -> list[str]:
    return [f.code for f in session.analyse().findings.get(path, [])]


def test_a_module_that_appears_next_to_the_script_is_imported_at_the_next_analysis(tmp_path: Path):
    # The session remembers import candidates missing on disk between analyses; a new file in a
    # listed directory changes the listing, which forgets them.
    (tmp_path / "pyproject.toml").write_text("[tool.torchrepro-lint]\n")
    train = (tmp_path / "train.py").resolve()
    train.write_text(TRAIN_WITH_IMPORTED_SEED.format(module="seeding"))
    session = Workspace(tmp_path, persistent=False).open(train, train.read_text())
    assert _codes_in(session, train) == ["TRP101"]
    assert (tmp_path / "seeding.py").resolve() in session.absent
    (tmp_path / "seeding.py").write_text(SEEDING)
    assert _codes_in(session, train) == []


def test_an_unchanged_file_keeps_its_source_object_and_one_changed_on_disk_is_read_anew(tmp_path: Path):
    # The session passes the last analysis's SourceFile for a file whose text did not change
    # (what was worked out on it stays: a speed-up only); a file rewritten on disk, not open,
    # must be read again.
    (tmp_path / "pyproject.toml").write_text("[tool.torchrepro-lint]\n")
    train, seeding = (tmp_path / "train.py").resolve(), (tmp_path / "seeding.py").resolve()
    train.write_text(TRAIN_WITH_IMPORTED_SEED.format(module="seeding"))
    seeding.write_text(SEEDING)
    session = Workspace(tmp_path, persistent=False).open(train, train.read_text())
    assert _codes_in(session, train) == []
    kept = session._modules[seeding].source
    session.buffers[train] = train.read_text() + "steps = 1\n"
    assert _codes_in(session, train) == []
    assert session._modules[seeding].source is kept
    assert session._unchanged_source(seeding, session.display(seeding), session._disk_text(seeding)) is kept
    seeding.write_text(SEEDING.replace("torch.manual_seed(0)", "print('no seed')"))
    assert _codes_in(session, train) == ["TRP101"]
    assert session._modules[seeding].source is not kept


def test_an_edit_digests_only_the_ir_parts_it_changed_and_closing_the_buffer_forgets_them(tmp_path: Path, monkeypatch):
    from torchrepro_lint.pipeline import lowered_store

    (tmp_path / "pyproject.toml").write_text("[tool.torchrepro-lint]\n")
    train, seeding = (tmp_path / "train.py").resolve(), (tmp_path / "seeding.py").resolve()
    functions = "".join(f"\n\ndef step_{n}(x):\n    return torch.relu(x) + {n}\n" for n in range(6))
    text = "import torch\nfrom seeding import fix_seeds\n" + functions + "\n\nfix_seeds()\n"
    train.write_text(text)
    seeding.write_text(SEEDING)
    workspace = Workspace(tmp_path, persistent=False)
    session = workspace.open(train, text)
    session.analyse()
    assert train in session.cache.ir_digest_parts and seeding not in session.cache.ir_digest_parts  # (an open buffer's only)
    digested = []
    original = lowered_store.structural_digest
    monkeypatch.setattr(lowered_store, "structural_digest", lambda value: digested.append(value) or original(value))
    # (in the last function: the refs of the functions after an added draw shift, a new IR each)
    session.buffers[train] = text.replace("    return torch.relu(x) + 5\n", "    x = torch.randn(3)\n    return torch.relu(x) + 5\n")
    found = session.analyse().findings
    assert 1 <= len(digested) <= 3, digested  # the edited function, the whole (and a part read), not all 6 functions
    monkeypatch.undo()
    assert found == fresh_findings(tmp_path, session)
    workspace.close(train)
    assert train not in session.cache.ir_digest_parts


def test_a_module_created_where_nothing_is_listed_counts_once_the_client_says_files_changed(tmp_path: Path):
    # vendor/ is excluded from linting but importable: its listing does not change when a file
    # comes, so the missing candidate is forgotten when the client reports the change.
    (tmp_path / "pyproject.toml").write_text('[tool.torchrepro-lint]\nexclude = ["vendor"]\n')
    (tmp_path / "vendor").mkdir()
    (tmp_path / "vendor" / "__init__.py").write_text("")
    train = (tmp_path / "train.py").resolve()
    train.write_text(TRAIN_WITH_IMPORTED_SEED.format(module="vendor.seeding"))
    session = Workspace(tmp_path, persistent=False).open(train, train.read_text())
    assert _codes_in(session, train) == ["TRP101"]
    (tmp_path / "vendor" / "seeding.py").write_text(SEEDING)
    session.files_changed()
    assert _codes_in(session, train) == []


# -- notebooks (notebook_sync.py): cells in, findings and edits back to cells -------------------
def _cells(*cells: tuple[str, str]) -> list[Cell]:
    return [Cell(f"cell:{index}", kind, text) for index, (kind, text) in enumerate(cells)]


def _apply(text: str, edit: types.TextEdit) -> str:
    lines = text.splitlines(keepends=True) or [""]

    def offset(position: types.Position) -> int:
        line = lines[position.line] if position.line < len(lines) else ""
        return sum(len(x) for x in lines[: position.line]) + len(line.encode("utf-16-le")[: 2 * position.character].decode("utf-16-le"))

    return text[: offset(edit.range.start)] + edit.new_text + text[offset(edit.range.end) :]


@pytest.mark.parametrize(
    "old, new",
    [
        ("import torch", "import torch\ntorch.manual_seed(0)"),  # after a cell without a final newline
        ("a\r\nb\r\n", "a\r\nx\r\nb\r\n"),  # a line inserted between \r\n's
        ("a\r\nb", "a\nb"),  # \r\n -> \n: a position never splits the pair
        ('s = "\U0001F600"; torch.backends.cudnn.benchmark = True', 's = "\U0001F600"; torch.backends.cudnn.benchmark = False'),
        ("x = 1\ny = 2\n", "y = 2\n"),
        ("", "x"),
    ],
)
def test_a_replacement_turns_the_old_cell_text_into_the_new(old, new):
    edit = replacement(old, new, UTF16)
    assert _apply(old, edit) == new
    assert len(edit.new_text) <= len(new)


def test_a_replacement_counts_utf16_units_and_touches_only_what_changed():
    edit = replacement('s = "\U0001F600"; b = True', 's = "\U0001F600"; b = False', UTF16)
    # `True` -> `False` keeps the shared `e`: only `Tru` is replaced.
    assert (edit.range.start, edit.range.end, edit.new_text) == (types.Position(0, 14), types.Position(0, 17), "Fals")


def test_cell_kinds_from_the_editor():
    assert cell_kind(types.NotebookCellKind.Code, "python") == CODE
    assert cell_kind(types.NotebookCellKind.Markup, "markdown") == MARKDOWN
    assert cell_kind(types.NotebookCellKind.Code, "raw") == RAW


def test_the_cells_become_the_module_check_reads_with_cells_numbered_as_jupyter_numbers_them(tmp_path: Path):
    cells = _cells((MARKDOWN, "# title"), (CODE, "import torch\n%matplotlib inline"), (RAW, "raw"), (CODE, "x = 1"))
    notebook, gone = OpenNotebooks().update("file:///nb.ipynb", tmp_path / "nb.ipynb", cells)
    assert gone == [] and notebook.numbers == {"cell:1": 2, "cell:3": 4}
    source = notebooks.load_source(tmp_path / "nb.ipynb", notebook.text)
    assert source.text == "import torch\n#matplotlib inline\nx = 1\n"
    assert [(cell.number, cell.first_row) for cell in source.cells.cells] == [(2, 1), (4, 3)]


def test_the_file_on_disk_is_linted_while_its_code_cells_are_the_editors(tmp_path: Path):
    path = tmp_path / "nb.ipynb"
    on_disk = json.dumps(
        {
            "cells": [
                {"cell_type": "raw", "metadata": {}, "source": ["not synced by the editor"]},
                {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": 1, "source": ["import torch\n", "x = 1"]},
            ],
            "metadata": {},
            "nbformat": 4,
            "nbformat_minor": 5,
        }
    )
    path.write_text(on_disk)
    notebooks_open = OpenNotebooks()
    same, _ = notebooks_open.update("file:///nb.ipynb", path, _cells((CODE, "import torch\nx = 1")))
    assert same.text == on_disk and same.numbers == {"cell:0": 2}  # the raw cell on disk counts
    edited, gone = notebooks_open.update("file:///nb.ipynb", path, _cells((CODE, "import torch\nx = 2")))
    assert edited.text != on_disk and edited.numbers == {"cell:0": 1} and gone == []
    fewer, gone = notebooks_open.update("file:///nb.ipynb", path, _cells((MARKDOWN, "now markdown")))
    assert fewer.numbers == {} and gone == ["cell:0"]


def test_findings_land_in_their_cells_with_utf16_columns(tmp_path: Path):
    (tmp_path / "pyproject.toml").write_text("")
    path = (tmp_path / "nb.ipynb").resolve()
    cells = _cells(
        (CODE, "import torch"),
        (MARKDOWN, "text"),
        (CODE, 'torch.use_deterministic_algorithms(True)\nlabel = "\U0001F600"; torch.backends.cudnn.benchmark = True'),
    )
    notebook, _ = OpenNotebooks().update(path.as_uri(), path, cells)
    session = Workspace(tmp_path, persistent=False).open(path, notebook.text)
    found = session.analyse().findings[path]
    (trp201,) = notebook.findings_in(cells[2], [f for f in found if f.code == "TRP201"])
    assert (trp201.cell, trp201.row) == (3, 2)
    result = diagnostic(trp201, line_texts(cells[2].text), UTF16, tmp_path, path)
    line = cells[2].text.splitlines()[1]
    assert result.range.start == types.Position(1, line.index("torch") + 1)  # the emoji is two units
    assert notebook.findings_in(cells[0], [trp201]) == []


def test_a_fix_edits_the_cell_it_counts_in_and_none_spans_cells(tmp_path: Path):
    cells = _cells((CODE, "import torch"), (CODE, "x = torch.randn(1)\n"))
    notebook, _ = OpenNotebooks().update("file:///nb.ipynb", tmp_path / "nb.ipynb", cells)
    seed = Fix("unsafe", "seed", (Edit("torch.manual_seed(0)\n", (2, 1), (2, 1)),), cell=1)
    finding = Finding("TRP101", "m", Severity.WARNING, "nb.ipynb", 1, 1, 1, 1, fix=seed, cell=2)
    edit = CellEdits(notebook, cells[1], UTF16).fix_edit(finding)
    (text_edit,) = edit.changes["cell:0"]  # the fix's cell, not the finding's
    assert list(edit.changes) == ["cell:0"]
    assert _apply(cells[0].text, text_edit) == "import torch\ntorch.manual_seed(0)"
    # notebooks.to_cells leaves a fix that spans cells without a cell: it is not offered.
    spanning = Finding("TRP101", "m", Severity.WARNING, "nb.ipynb", 1, 1, 1, 1, fix=Fix("unsafe", "seed", seed.edits), cell=2)
    assert CellEdits(notebook, cells[1], UTF16).fix_edit(spanning) is None


SEEDED_IN_A_FUNCTION = """\
import torch


def setup():
    torch.manual_seed(0)


def main():
    model = torch.nn.Linear(2, 2)
    return model


setup()
main()
"""


def test_an_edit_in_a_function_parses_that_function_only_and_finds_what_a_fresh_session_finds(tmp_path: Path):
    (tmp_path / "pyproject.toml").write_text("[tool.torchrepro-lint]\n")
    train = (tmp_path / "train.py").resolve()
    train.write_text(SEEDED_IN_A_FUNCTION)
    session = Workspace(tmp_path, persistent=False).open(train, SEEDED_IN_A_FUNCTION)
    assert _codes_in(session, train) == []
    before = session._parsed[train].module
    edited = SEEDED_IN_A_FUNCTION.replace("    torch.manual_seed(0)\n", "    pass\n")
    session.buffers[train] = edited
    assert _codes_in(session, train) == ["TRP101"]
    after = session._parsed[train].module
    assert after.code == edited
    kept = [a is b for a, b in zip(before.body, after.body)]
    assert kept == [True, False, True, True, True]  # the import, main and the calls: the same objects
    fresh = Workspace(tmp_path, persistent=False).open(train, edited)
    assert fresh.analyse().findings == session.analyse().findings


UPSAMPLE = """import torch.nn.functional as F


def upsample(x):
    return F.interpolate(x, scale_factor=2, mode="bilinear")
"""
TRAIN_WITHOUT_GRAD = """import torch
from models import upsample

torch.manual_seed(0)
x = torch.randn(1, 3, 8, 8, device="cuda", requires_grad=True)
with torch.no_grad():
    y = upsample(x)
"""


def test_results_that_read_another_module_follow_its_edits_as_a_fresh_session_does(tmp_path: Path):
    # The per-file findings of models.py read which modules mention `upsample` and what those
    # modules do with it: an edit of train.py, or eval.py starting to use it, must reach them
    # though models.py did not change.
    (tmp_path / "pyproject.toml").write_text("[tool.torchrepro-lint]\n")
    models, train, evaluate = ((tmp_path / name).resolve() for name in ("models.py", "train.py", "eval.py"))
    models.write_text(UPSAMPLE)
    train.write_text(TRAIN_WITHOUT_GRAD)
    evaluate.write_text("x = 1\n")
    workspace = Workspace(tmp_path, persistent=False)
    session = workspace.open(train, TRAIN_WITHOUT_GRAD)
    workspace.open(evaluate, "x = 1\n")
    with_grad = TRAIN_WITHOUT_GRAD.replace("with torch.no_grad():\n    y = upsample(x)\n", "y = upsample(x)\ny.sum().backward()\n")
    renamed = with_grad.replace("upsample", "upscale").replace("from models import upscale", "from models import upsample as upscale")
    steps = [(train, with_grad), (train, with_grad + "# a comment\n"), (train, renamed), (train, TRAIN_WITHOUT_GRAD)]
    steps.append((evaluate, with_grad.replace("torch.manual_seed(0)\n", "")))  # the word appears in eval.py
    seen = []
    for path, text in [(train, TRAIN_WITHOUT_GRAD), *steps]:
        session.buffers[path] = text
        found = session.analyse().findings
        assert found == fresh_findings(tmp_path, session)
        seen.append(("models.py", "TRP401") in [(p.name, f.code) for p, fs in found.items() for f in fs])
    assert seen == [False, True, True, True, False, True]


def test_a_script_that_becomes_imported_stops_being_a_program_of_its_own(tmp_path: Path):
    # Which modules the project imports is carried from one analysis to the next while no
    # import changed; an edit that adds or removes one must count at once.
    (tmp_path / "pyproject.toml").write_text("[tool.torchrepro-lint]\n")
    augment, train = (tmp_path / "augment.py").resolve(), (tmp_path / "train.py").resolve()
    augment.write_text("import torch\n\nnoise = torch.randn(8)\n")
    plain = "import torch\n\ntorch.manual_seed(0)\nweights = torch.randn(8)\n"
    importing = "import torch\n\ntorch.manual_seed(0)\nimport augment\nweights = torch.randn(8)\n"
    session = Workspace(tmp_path, persistent=False).open(train, plain)
    seen = []
    for text in (plain, importing, importing + "# a comment\n", plain):
        session.buffers[train] = text
        found = session.analyse().findings
        assert found == Workspace(tmp_path, persistent=False).open(train, text).analyse().findings
        seen.append(sorted((p.name, f.code) for p, fs in found.items() for f in fs))
    assert seen[0] == seen[3] == [("augment.py", "TRP101")]  # a script that draws unseeded
    assert seen[1] == seen[2] == []  # imported after train.py's seed: seeded


TURNS_BENCHMARK_ON = "import torch\n\ntorch.backends.cudnn.benchmark = True\n"
IMPORTS_IT_FIRST = (
    "import torch\nimport lib\n\ntorch.manual_seed(0)\ntorch.use_deterministic_algorithms(True)\n"
    'x = torch.randn(3, device="cuda")\n'
)


def _lib_and_train(tmp_path: Path, lib_text: str, train_text: str):
    """A workspace of lib.py and train.py, both open in the editor: (session, lib, train)."""
    (tmp_path / "pyproject.toml").write_text("[tool.torchrepro-lint]\n")
    lib, train = (tmp_path / "lib.py").resolve(), (tmp_path / "train.py").resolve()
    lib.write_text(lib_text)
    train.write_text(train_text)
    workspace = Workspace(tmp_path, persistent=False)
    session = workspace.open(train, train_text)
    workspace.open(lib, lib_text)
    return session, lib, train


def test_an_import_walk_is_replayed_from_the_last_analysis_only_while_the_imported_module_is_unchanged(tmp_path: Path):
    # train.py's first import walks lib.py's top level; the server keeps that walk for the next
    # edit of train.py, and must walk lib.py again once lib.py changed.
    session, lib, train = _lib_and_train(tmp_path, TURNS_BENCHMARK_ON, IMPORTS_IT_FIRST)
    steps = [
        (train, IMPORTS_IT_FIRST + "y = 1\n"),  # the walk of lib.py is replayed
        (lib, TURNS_BENCHMARK_ON.replace("True", "False")),  # walked again: no TRP201
        (train, IMPORTS_IT_FIRST + "y = 2\n"),
        (lib, TURNS_BENCHMARK_ON),
        (train, IMPORTS_IT_FIRST),
    ]
    seen = []
    for path, text in [(train, IMPORTS_IT_FIRST), *steps]:
        session.buffers[path] = text
        found = session.analyse().findings
        assert found == fresh_findings(tmp_path, session)
        seen.append([f.code for f in found.get(lib, [])])
    assert seen == [["TRP201"], ["TRP201"], [], [], ["TRP201"], ["TRP201"]]
    assert session._recorded is not None and any(session._recorded[0].values())  # walks were kept


def test_an_import_walk_is_not_replayed_once_a_module_it_missed_appears(tmp_path: Path):
    (tmp_path / "pyproject.toml").write_text("[tool.torchrepro-lint]\n")
    lib, train = (tmp_path / "lib.py").resolve(), (tmp_path / "train.py").resolve()
    # lib.py's top level does something tracked (so importing it is walked, not skipped as
    # inert) and imports extra.py, which does not exist yet
    lib.write_text("import torch\nimport extra\n\ntorch.backends.cudnn.deterministic = True\n")
    train.write_text(IMPORTS_IT_FIRST)
    workspace = Workspace(tmp_path, persistent=False)
    session = workspace.open(train, IMPORTS_IT_FIRST)
    session.analyse()
    assert any(session._recorded[0].values())  # the walk of lib.py, kept for the next analysis
    (tmp_path / "extra.py").write_text(TURNS_BENCHMARK_ON)
    session.files_changed()  # the client saw it appear
    session.buffers[train] = IMPORTS_IT_FIRST + "y = 1\n"
    found = session.analyse().findings
    assert [f.code for f in found.get((tmp_path / "extra.py").resolve(), [])] == ["TRP201"]
    assert found == Workspace(tmp_path, persistent=False).open(train, IMPORTS_IT_FIRST + "y = 1\n").analyse().findings


HELPER_THEN_SEED = (
    "import torch\nimport lib\n\n\ndef helper():\n    return 1\n\n\n"
    'torch.manual_seed(0)\ntorch.use_deterministic_algorithms(True)\nx = torch.randn(3, device="cuda")\nhelper()\n'
)


def test_a_comment_typed_above_a_finding_keeps_the_ir_and_moves_the_finding(tmp_path: Path):
    (tmp_path / "pyproject.toml").write_text("[tool.torchrepro-lint]\n")
    train = (tmp_path / "train.py").resolve()
    train.write_text(HELPER_THEN_SEED)
    (tmp_path / "lib.py").write_text(TURNS_BENCHMARK_ON)
    session = Workspace(tmp_path, persistent=False).open(train, HELPER_THEN_SEED)
    before = session.analyse().findings

    def train_ir():
        return next(m._ir for m in session._modules.values() if m.path.name == "train.py")

    ir_before = train_ir()
    commented = HELPER_THEN_SEED.replace("torch.use_det", "# deterministic from here on\ntorch.use_det")
    session.buffers[train] = commented
    after = session.analyse().findings
    assert train_ir() is ir_before  # not lowered again
    index = next(m._index for m in session._modules.values() if m.path.name == "train.py")
    assert index.walk.taken and index.walk.before is None  # indexed from the last walk, which is let go
    assert after == Workspace(tmp_path, persistent=False).open(train, commented).analyse().findings
    quoted = [f.message for fs in after.values() for f in fs if "train.py:" in f.message]
    assert quoted and all("train.py:11" in message for message in quoted)  # was line 10
    assert before != after


SEEDING_LIB = """import torch


def seed_all():
    enabled = True
    if enabled:
        torch.manual_seed(0)


def unused():
    return 1
"""
CALLS_SEED_ALL = "import torch\nimport lib\n\nlib.seed_all()\nx = torch.randn(3)\n"


def _interpreted(session) -> int:
    """How many programs the last analysis interpreted (the others' facts were still valid)."""
    return session.last.statistics.programs_resolved


def test_an_edit_in_a_function_re_runs_only_the_programs_that_ran_it(tmp_path: Path):
    # A program's facts are kept while the parts of the IR its run read are unchanged: the
    # function it called, the top levels it ran. An edit in a function it never calls, or an
    # assignment nothing reads, leaves them; an edit in the function it calls does not.
    session, lib, train = _lib_and_train(tmp_path, SEEDING_LIB, CALLS_SEED_ALL)
    session.analyse()
    assert _interpreted(session) == 1
    steps = [
        (lib, SEEDING_LIB.replace("    return 1\n", "    torch.manual_seed(1)\n    return torch.randn(2)\n"), 0),
        (lib, SEEDING_LIB.replace("    enabled = True\n", "    total = 0\n    enabled = True\n"), 0),  # read by nothing
        (train, CALLS_SEED_ALL + "y = 2\n", 0),
        (lib, SEEDING_LIB.replace("enabled = True", "enabled = False"), 1),  # now unseeded: TRP101
        (lib, SEEDING_LIB.replace("        torch.manual_seed(0)\n", "        pass\n"), 1),
        (lib, SEEDING_LIB, 1),
    ]
    seen = []
    for path, text, interpreted in steps:
        session.buffers[path] = text
        found = session.analyse().findings
        assert found == fresh_findings(tmp_path, session)
        assert _interpreted(session) == interpreted, text
        seen.append([f.code for f in found.get(train, [])])
    assert seen == [[], [], [], ["TRP101"], ["TRP101"], []]


REGISTERS = "import helpers\n\nhelpers.register()\n"
DRAWS_AFTER_IMPORT = "import torch\nimport lib\n\nx = torch.randn(3)\n"
CALLS_IT_FIRST = "import torch\nimport helpers\n\nhelpers.register()\nimport lib\n\nx = torch.randn(3)\n"


def test_a_kept_inert_import_answer_counts_what_it_read_for_every_program_that_takes_it(tmp_path: Path):
    # Importing lib.py is inert (its top level calls a helper that does nothing tracked): found
    # once in a run, for a.py, and taken by b.py. When the helper starts seeding, both programs
    # must run again, though b.py's run never looked at the helper's body itself (and a.py had
    # looked at it, and the function it calls, before it asked about lib.py).
    (tmp_path / "pyproject.toml").write_text("[tool.torchrepro-lint]\n")
    helpers, lib = (tmp_path / "helpers.py").resolve(), (tmp_path / "lib.py").resolve()
    scripts = [(tmp_path / name).resolve() for name in ("a.py", "b.py")]
    plain = "import torch\n\n\ndef register():\n    setup()\n\n\ndef setup():\n    return 1\n"
    helpers.write_text(plain)
    lib.write_text(REGISTERS)
    for script, text in zip(scripts, (CALLS_IT_FIRST, DRAWS_AFTER_IMPORT)):
        script.write_text(text)
    workspace = Workspace(tmp_path, persistent=False)
    session = workspace.open(scripts[0], CALLS_IT_FIRST)
    workspace.open(helpers, plain)
    session.analyse()
    assert _interpreted(session) == 2
    seen = []
    for text in (plain.replace("return 1", "torch.manual_seed(0)"), plain):
        session.buffers[helpers] = text
        found = session.analyse().findings
        assert found == fresh_findings(tmp_path, session)
        assert _interpreted(session) == 2
        seen.append(sorted(f.code for script in scripts for f in found.get(script, [])))
    assert seen == [[], ["TRP101", "TRP101"]]


LIB_IN_ORDER = """import torch


def early():
    return 0


def seed_all():
    torch.manual_seed(0)


def unused():
    return 1


def pure():
    return 2
"""
CALLS_PURE_AND_SEED_ALL = "import torch\nimport lib\n\nlib.pure()\nlib.seed_all()\nx = torch.randn(3)\n"


def test_refs_shifted_by_an_edit_above_re_run_the_programs_that_walked_the_function_only(tmp_path: Path):
    # A statement that makes an occurrence, added in one function, shifts the node refs of every
    # function after it. A program that only asked whether a function does anything tracked
    # (`pure`, which does nothing) keeps its facts; one that walked it (`seed_all`: its seed is
    # an occurrence at a ref) runs again.
    session, lib, train = _lib_and_train(tmp_path, LIB_IN_ORDER, CALLS_PURE_AND_SEED_ALL)
    session.analyse()
    shift_pure = LIB_IN_ORDER.replace("    return 1\n", "    return torch.randn(2)\n")
    shift_both = shift_pure.replace("    return 0\n", "    return torch.randn(2)\n")
    for text, interpreted in ((shift_pure, 0), (shift_both, 1), (LIB_IN_ORDER, 1)):
        session.buffers[lib] = text
        found = session.analyse().findings
        assert found == fresh_findings(tmp_path, session)
        assert _interpreted(session) == interpreted
        assert found.get(train, []) == []


def test_open_only_runs_per_file_rules_on_the_open_buffers_and_keeps_their_findings(tmp_path: Path):
    # The editor shows open documents only: checking every other file's cached per-file results
    # on each edit was wasted work. The open file's findings must be the full analysis's.
    (tmp_path / "pyproject.toml").write_text("[tool.torchrepro-lint]\n")
    helper = (tmp_path / "helper.py").resolve()
    helper.write_text("import torch\n\ntorch.seed()\n")
    train = (tmp_path / "train.py").resolve()
    train.write_text("import torch\nimport helper\n\nmodel = torch.nn.Linear(2, 2)\ntorch.seed()\n")
    session = Workspace(tmp_path, persistent=False).open(train, train.read_text())
    everything = session.analyse()
    assert [f.code for f in everything.findings[helper]] == ["TRP104"]
    assert [f.code for f in everything.findings[train]] == ["TRP101", "TRP104"]
    session.buffers[train] = train.read_text() + "torch.seed()\n"
    open_only = session.analyse(open_only=True)
    assert helper not in open_only.findings  # a per-file rule's finding in a file not open
    assert [(f.code, f.row) for f in open_only.findings[train]] == [("TRP101", 1), ("TRP104", 5), ("TRP104", 6)]
    assert open_only.findings[train] == session.analyse().findings[train]


def test_entries_made_while_unsaved_are_written_when_a_run_of_the_saved_files_uses_them():
    disk = _Disk()
    cache = MemoryCache(disk)
    cache.put("ir", "same text as saved", "ir")  # a run with an unsaved buffer
    cache.put("module", "the unsaved text", 1)
    cache.end_run()
    assert disk.entries == {}
    cache.persist = True  # the buffer saved: this run uses the IR again, not the unsaved text's
    assert cache.get("ir", "same text as saved") == "ir"
    cache.put("module", "the saved text", 2)
    cache.end_run()
    assert disk.entries == {("ir", "same text as saved"): "ir", ("module", "the saved text"): 2}
