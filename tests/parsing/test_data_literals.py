"""Large tables of constants read by LibCST as blanks of the same shape (parsing/data_literals.py):
which displays are blanked and which never are, that every other node keeps its place, that
findings and fixes around a table land where they did, and that a fix never rewrites a table."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path
from types import SimpleNamespace

import libcst as cst

from conftest import lint_project, write_project
from torchrepro_lint.config import load_config
from torchrepro_lint.fixes.runner import fix_sources
from torchrepro_lint.parsing.data_literals import BLANKED_SIZE, blanked_text, blanks
from torchrepro_lint.parsing.source import SourceFile
from torchrepro_lint.rules.edits import replace

ROWS = BLANKED_SIZE // 30 + 10  # rows of the tables below: each holds more than BLANKED_SIZE characters


def table(rows: int = ROWS, indent: str = "    ") -> str:
    """A dict display of tuples of numbers, one entry a row."""
    return "{\n" + "".join(f"{indent}({i}, {i + 1}, -{i + 2}): (1.5, 'x', None),\n" for i in range(rows)) + "}"


def source(text: str) -> SourceFile:
    return SourceFile(Path("m.py"), text)


def blanked(text: str) -> list[str]:
    """The blanked insides, stripped (empty when the whole inside was blanked)."""
    return [text[start:end] for start, end in blanks(text)]


def test_a_large_constant_table_is_blanked_inside_its_brackets():
    text = f"TABLE = {table()}\n"
    (start, end), = blanks(text)
    assert text[start - 1] == "{" and text[end] == "}"
    assert end - start > BLANKED_SIZE


def test_blanking_keeps_length_and_every_line_break():
    text = f"TABLE = {table()}\r\nOTHER = 1\n"
    out = blanked_text(text, blanks(text))
    assert len(out) == len(text)
    assert [i for i, c in enumerate(out) if c in "\r\n"] == [i for i, c in enumerate(text) if c in "\r\n"]
    assert out.startswith("TABLE = {") and out.endswith("}\r\nOTHER = 1\n")


def test_libcst_reads_the_table_as_an_empty_display():
    module = source(f"TABLE = {table()}\n").module
    value = module.body[0].body[0].value
    assert isinstance(value, cst.Dict) and not value.elements


def test_small_tables_sets_all_and_call_arguments_are_never_blanked():
    rows = "".join(f"    'name{i}',\n" for i in range(ROWS * 2))
    assert blanks("SMALL = " + table(rows=10) + "\n") == ()
    assert blanks("NAMES = {\n" + rows + "}\n") == ()  # a set: TRP602 reads its order
    assert blanks("__all__ = [\n" + rows + "]\n") == ()  # star imports read it
    assert blanks("values = torch.tensor([\n" + rows + "])\n") == ()  # an argument, not a value
    assert blanks("PAIRS = 1, 2, " + "3, " * BLANKED_SIZE + "\n") == ()  # a tuple without parentheses


def test_a_table_that_names_anything_keeps_its_names_and_blanks_its_constant_parts():
    text = "REGISTRY = {\n    'fast': make_fast,\n    'grid': " + table(indent="        ") + ",\n}\n"
    (inside,) = blanked(text)
    assert "make_fast" in blanked_text(text, blanks(text))
    assert "(1.5, 'x', None)" in inside and "make_fast" not in inside


def test_tables_in_classes_and_blocks_are_found_and_non_ascii_before_one_is_counted_in_characters():
    text = "if True:\n    größe = " + table(indent="        ") + "\n"
    (start, end), = blanks(text)
    assert text[start - 1] == "{" and text[end] == "}"
    text = "class Grid:\n    CELLS = " + table(indent="        ") + "\n"
    assert len(blanks(text)) == 1


def test_tables_in_functions_are_left_as_they_are():
    # (walking every function body cost more than the rare table there saves)
    assert blanks("def build():\n    cells = " + table(indent="        ") + "\n    return cells\n") == ()


def test_nodes_after_a_table_keep_their_rows_and_columns(tmp_path):
    text = "import os\n\nTABLE = " + table() + "  # tuned on one device\nfirst = os.listdir('runs')[0]\n"
    root = tmp_path / "p"
    root.mkdir()
    result = lint_project(root, {"tables.py": text})
    (finding,) = [f for f in result.findings if f.code == "TRP601"]
    row = text.splitlines().index("first = os.listdir('runs')[0]") + 1
    assert (finding.row, finding.column) == (row, 9)
    assert (finding.end_row, finding.end_column) == (row, 27)


def test_a_fix_next_to_a_table_keeps_the_table(tmp_path):
    text = "import os\n\nTABLE = " + table() + "\nfirst = os.listdir('runs')[0]\n"
    write_project(tmp_path, {"tables.py": text})
    outcome = fix_sources({tmp_path / "tables.py": text}, load_config([tmp_path]), unsafe=True)
    after = outcome.fixed[tmp_path / "tables.py"]
    assert after == text.replace("os.listdir('runs')[0]", "sorted(os.listdir('runs'))[0]")


def test_a_fix_never_rewrites_a_node_that_holds_a_table():
    text = "TABLE = " + table() + "\nx = 1\n"
    file = source(text)
    statement = file.module.body[0]
    module = SimpleNamespace(source=file)
    assert replace(module, statement, "TABLE = {}") is None
    assert replace(module, file.module.body[1], "x = 2") is not None


def test_text_that_does_not_compile_is_not_blanked():
    assert blanks("TABLE = " + table() + "\ndef broken(:\n") == ()


def test_a_table_lints_like_the_same_code_without_it(tmp_path):
    body = textwrap.dedent("""
        import random
        import torch

        def main():
            torch.manual_seed(0)
            return random.random()

        if __name__ == "__main__":
            main()
        """)
    small, large = tmp_path / "small", tmp_path / "large"
    small.mkdir(), large.mkdir()
    plain = lint_project(small, {"tune.py": "TABLE = " + table(rows=3) + "\n" + body})
    padded = lint_project(large, {"tune.py": "TABLE = " + table() + "\n" + body})
    shift = ROWS - 3

    def unshifted(message: str) -> str:  # the rows a message cites, as in the small project
        message = message.replace(str(large), str(small))
        return re.sub(r"tune\.py:(\d+)", lambda m: f"tune.py:{int(m.group(1)) - shift}", message)

    assert [(f.code, f.row - shift, f.column, unshifted(f.message)) for f in padded.findings] == [
        (f.code, f.row, f.column, f.message) for f in plain.findings
    ]
    assert [f.code for f in plain.findings] == ["TRP102"]


def test_the_ir_and_its_refs_are_the_same_whether_a_table_is_blanked_or_not():
    # An editor's buffer re-parses an edited table's statement without blanks; its IR and refs
    # must be those of the cache's, lowered from the blanked tree of the same text.
    from torchrepro_lint.analysis.module_index import ModuleIndex
    from torchrepro_lint.project.extract.lowering import Lowering

    names = "".join(f'    "key{i}": "value{i}",\n' for i in range(ROWS * 2))
    text = (
        "import torch\n\nTABLE = " + table() + '\nCFG = {\n    "device": "cuda",\n' + names + "}\n\n"
        'def f():\n    torch.manual_seed(0)\n    return torch.randn(3, device=CFG["device"])\n'
    )
    whole, blanked_file = source(text), source(text)
    whole._blanks = ()  # (as if found no table)

    def lowered(file):
        lowering = Lowering(ModuleIndex(file, None), {})
        return lowering.build(), [type(node) for node in lowering.nodes]

    assert len(blanks(text)) == 2
    assert lowered(whole) == lowered(blanked_file)


def test_a_buffer_compiled_whole_is_not_compiled_again_to_find_its_tables(monkeypatch):
    # The language server compiles every buffer (server/recompile.py): where no statement moved,
    # that tree's line numbers are the text's, and finding the tables needs no second compile.
    import ast

    from torchrepro_lint.parsing import data_literals
    from torchrepro_lint.parsing.positions import LineOffsets

    text = "TABLE = " + table() + "\nx = 1\n"
    tree = ast.parse(text)
    compiled: list[str] = []

    def counting_compile(*args, **kwargs):
        compiled.append("again")
        return compile(*args, **kwargs)

    monkeypatch.setattr(data_literals, "compile", counting_compile, raising=False)
    whole = SourceFile(Path("m.py"), text, syntax_tree=tree, syntax_offsets=LineOffsets((0, 0), {}), _compiles=True)
    assert not whole.module.body[0].body[0].value.elements and compiled == []
    moved = SourceFile(Path("m.py"), text, syntax_tree=tree, syntax_offsets=LineOffsets((0, 3), {}), _compiles=True)
    assert not moved.module.body[0].body[0].value.elements and compiled == ["again"]
