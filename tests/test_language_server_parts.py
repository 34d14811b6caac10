"""The language server's parts without a client: positions, noqa edits, the memory cache, sessions."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytest.importorskip("lsprotocol")
from lsprotocol import types  # noqa: E402

from torchrepro_lint.findings import Finding, Severity  # noqa: E402
from torchrepro_lint.server.actions import fix_all, noqa_edit  # noqa: E402
from torchrepro_lint.server.convert import diagnostic, from_position, physical_lines, to_position  # noqa: E402
from torchrepro_lint.server.memory_cache import MemoryCache  # noqa: E402
from torchrepro_lint.server.session import Workspace  # noqa: E402
from torchrepro_lint.fixes.apply import edit_text  # noqa: E402

UTF16, UTF8, UTF32 = types.PositionEncodingKind.Utf16, types.PositionEncodingKind.Utf8, types.PositionEncodingKind.Utf32


def test_columns_count_utf16_code_units_after_astral_characters():
    lines = physical_lines('s = "\U0001F600é"; torch.manual_seed(0)\r\nnext\rlast')
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
