"""`check --add-noqa`: comments where the linter reads them, merged, idempotent, bytes kept."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

from torchrepro_lint.cli import main
from torchrepro_lint.config import Config
from torchrepro_lint.pipeline.engine import lint_sources
from torchrepro_lint.findings import Finding, Severity
from torchrepro_lint.fixes.noqa import add_to_text, comment_edit
from torchrepro_lint.fixes.apply import edit_text

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parents[1] / "notebooks"))
from notebook_support import cell_sources, notebook, write_notebook  # noqa: E402
from test_fix_properties import programs  # noqa: E402

# A script with a hazard in a multi-line call (TRP301) and an unseeded program (TRP101).
SCRIPT = """\
import torch
from torch.utils.data import DataLoader


def main(data):
    loader = DataLoader(data, num_workers=4,
                        shuffle=True)
    return torch.rand(3), loader


if __name__ == "__main__":
    main([1, 2])
"""


@pytest.fixture
def root(tmp_path, monkeypatch):
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "fixture"\n\n[tool.torchrepro-lint]\n', encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def check(*args: str) -> int:
    return main(["check", "--no-cache", *args])


def finding(code: str, row: int) -> Finding:
    return Finding(code, "m", Severity.WARNING, "t.py", row, 1, row, 1)


# -- one line -------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("line", "codes", "expected"),
    [
        ("x = f()", ["TRP101"], "x = f()  # noqa: TRP101"),
        ("x = f()   \t", ["TRP101"], "x = f()  # noqa: TRP101"),
        ("x = f()  # why", ["TRP101"], "x = f()  # why  # noqa: TRP101"),
        ("x = f()  # noqa: E501", ["TRP101"], "x = f()  # noqa: E501, TRP101"),
        ("x = f()  # noqa:E501,W291 because", ["TRP301", "TRP101"], "x = f()  # noqa:E501,W291, TRP101, TRP301 because"),
        ("x = f()  # NOQA: e501", ["TRP101", "TRP101"], "x = f()  # NOQA: e501, TRP101"),
        ("", ["TRP101"], "# noqa: TRP101"),
    ],
)
def test_a_comment_is_added_or_merged(line, codes, expected):
    edit = comment_edit(line, codes, 1)
    assert edit_text(line + "\n", edit) == expected + "\n"


@pytest.mark.parametrize("line", ["x = f()  # noqa", "x = f()  # noqa: TRP101", "x = f()  # noqa: TRP1, E501", "x = f()  # noqa: trp101"])
def test_a_line_already_silenced_is_left_alone(line):
    assert comment_edit(line, ["TRP101"], 1) is None


def test_a_line_ending_inside_a_string_gets_its_comment_where_the_string_ends():
    # A comment cannot go inside the string; the noqa is read on the string's last line (flake8 too).
    text = 'x = f("""a\nb\nc""")\nz = 3\n'
    outcome = add_to_text(text, [finding("TRP101", 1), finding("TRP102", 2), finding("TRP103", 4)])
    assert outcome.text == 'x = f("""a\nb\nc""")  # noqa: TRP101, TRP102\nz = 3  # noqa: TRP103\n'
    assert [f.code for f in outcome.added] == ["TRP101", "TRP102", "TRP103"]
    assert outcome.left == []


def test_a_line_after_a_backslash_is_left_out_and_reported():
    text = "y = 1 + \\\n    2\nz = 3\n"
    outcome = add_to_text(text, [finding("TRP102", 1), finding("TRP103", 3)])
    assert outcome.text == "y = 1 + \\\n    2\nz = 3  # noqa: TRP103\n"
    assert [f.code for f in outcome.left] == ["TRP102"]
    assert [f.code for f in outcome.added] == ["TRP103"]


def test_a_shebang_line_gets_no_comment():
    outcome = add_to_text("#!/usr/bin/env python\nx = 1\n", [finding("TRP101", 1)])
    assert outcome.text == "#!/usr/bin/env python\nx = 1\n"
    assert [f.code for f in outcome.left] == ["TRP101"]


# -- through the command line ----------------------------------------------------------------
def test_add_noqa_then_a_clean_run(root, capsys):
    path = root / "train.py"
    path.write_text(SCRIPT, encoding="utf-8")
    assert check("train.py") == 1
    capsys.readouterr()
    assert check("--add-noqa", "train.py") == 0
    out = capsys.readouterr().out
    assert "train.py: 2 noqa comments for 2 findings" in out
    assert "Added noqa comments for 2 findings in 1 file." in out
    text = path.read_text(encoding="utf-8")
    assert "    loader = DataLoader(data, num_workers=4,  # noqa: TRP301\n" in text
    assert 'if __name__ == "__main__":  # noqa: TRP101\n' in text
    ast.parse(text)
    assert check("train.py") == 0
    assert "No reproducibility hazards" in capsys.readouterr().out
    assert check("--add-noqa", "train.py") == 0  # idempotent
    assert path.read_text(encoding="utf-8") == text


def test_bytes_elsewhere_are_kept(root):
    # CRLF endings, a Latin-1 cookie and byte, no final newline: only the comments are new.
    original = ("# -*- coding: latin-1 -*-\r\n" + SCRIPT.replace("\n", "\r\n").replace("data, num", "data,  num") + "# caf\xe9").encode("latin-1")
    path = root / "train.py"
    path.write_bytes(original)
    assert check("--add-noqa", "train.py") == 0
    after = path.read_bytes()
    expected = original.replace(b"num_workers=4,\r\n", b"num_workers=4,  # noqa: TRP301\r\n").replace(
        b'"__main__":\r\n', b'"__main__":  # noqa: TRP101\r\n'
    )
    assert after == expected
    assert check("train.py") == 0


def test_existing_noqa_codes_of_other_tools_are_kept(root):
    path = root / "train.py"
    path.write_text(SCRIPT.replace('"__main__":', '"__main__":  # noqa: E999'), encoding="utf-8")
    assert check("--add-noqa", "train.py") == 0
    assert 'if __name__ == "__main__":  # noqa: E999, TRP101\n' in path.read_text(encoding="utf-8")
    assert check("train.py") == 0


def test_a_line_no_comment_can_go_on_is_reported_and_the_status_says_so(root, capsys):
    path = root / "train.py"
    path.write_text(SCRIPT.replace('if __name__ == "__main__":', 'if __name__ == \\\n        "__main__":'), encoding="utf-8")
    assert check("--add-noqa", "train.py") == 1
    err = capsys.readouterr().err
    assert "train.py:11:1: TRP101: no noqa comment can go on this line" in err
    assert check("train.py") == 1  # still reported, file still parses
    ast.parse(path.read_text(encoding="utf-8"))


def test_a_script_that_opens_with_a_docstring_is_silenced_at_the_docstring_end(root, capsys):
    # TRP101 is reported at 1:1, inside a multi-line module docstring (a notebook's first cell
    # often opens the same way): found on a real course repository, where it stayed reported.
    path = root / "train.py"
    path.write_text('"""\nTrain a small model.\n"""\nimport torch\n\nprint(torch.rand(3))\n', encoding="utf-8")
    assert check("--add-noqa", "train.py") == 0
    assert path.read_text(encoding="utf-8").startswith('"""\nTrain a small model.\n"""  # noqa: TRP101\nimport torch\n')
    capsys.readouterr()
    assert check("train.py") == 0


def test_a_noqa_on_a_string_end_line_silences_a_finding_inside_the_string(root, capsys):
    path = root / "train.py"
    path.write_text('"""\nTrain.\n"""  # noqa: TRP101\nimport torch\n\nprint(torch.rand(3))\n', encoding="utf-8")
    assert check("train.py") == 0
    path.write_text('"""\nTrain.\n"""  # noqa: TRP102\nimport torch\n\nprint(torch.rand(3))\n', encoding="utf-8")
    assert check("train.py") == 1  # another code: still reported
    assert "train.py:1:1: TRP101" in capsys.readouterr().out


def test_add_noqa_refuses_standard_input_and_fix(root, capsys):
    assert check("--add-noqa", "--fix", "train.py") == 2
    assert "--add-noqa" in capsys.readouterr().err


def test_a_notebook_cell_gets_its_comment_and_keeps_its_layout(root):
    cells = ["import torch\n", "torch.backends.cudnn.benchmark = True\ntorch.use_deterministic_algorithms(True)\nx = torch.rand(2)"]
    path = write_notebook(root / "nb.ipynb", *cells)
    before = path.read_bytes()
    assert check("nb.ipynb") == 1
    assert check("--add-noqa", "nb.ipynb") == 0
    after = path.read_bytes()
    sources = cell_sources(path)
    assert sources[0] == "import torch  # noqa: TRP101\n"  # the program's finding sits on its first line
    assert sources[1] == cells[1].replace("= True\n", "= True  # noqa: TRP201\n", 1)  # still no final newline
    changed = [line for line in after.splitlines() if line not in before.splitlines()]
    assert changed and all(b"# noqa: TRP" in line for line in changed)
    assert len(after.splitlines()) == len(before.splitlines())
    assert check("nb.ipynb") == 0
    assert check("--add-noqa", "nb.ipynb") == 0
    assert path.read_bytes() == after


# -- generated programs --------------------------------------------------------------------
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(programs())
def test_generated_programs_are_silenced_and_keep_their_code(tmp_path, text):
    path = tmp_path / "prog.py"
    config = Config(root=tmp_path, torch_version=(2, 9))
    findings = lint_sources([(path, text)], config).findings
    outcome = add_to_text(text, findings)
    assert ast.dump(ast.parse(outcome.text)) == ast.dump(ast.parse(text))
    assert outcome.left == [f for f in findings if f.code == "TRP000"]
    assert lint_sources([(path, outcome.text)], config).findings == outcome.left
    assert add_to_text(outcome.text, []).text == outcome.text
    before, after = text.splitlines(keepends=True), outcome.text.splitlines(keepends=True)
    assert len(after) == len(before)
    for old, new in zip(before, after):  # a line is kept, or is itself followed by a comment
        assert new == old or (new.startswith(old.rstrip("\n").rstrip(" \t")) and "# noqa: TRP" in new[len(old.rstrip()):])


# -- rows are Python's physical lines: a form feed (`^L` page break) is not a line break ----------
FORM_FEED = 'import torch\n\x0c\nif __name__ == "__main__":\n    torch.backends.cudnn.benchmark = True\n    torch.use_deterministic_algorithms(True)\n    torch.rand(3)\n'


def test_a_noqa_after_a_form_feed_is_read_on_the_reported_line(root, capsys):
    path = root / "train.py"
    path.write_text(FORM_FEED.replace('"__main__":', '"__main__":  # noqa: TRP101'), encoding="utf-8")
    assert check("--select", "TRP101", "train.py") == 0
    path.write_text(FORM_FEED, encoding="utf-8")
    assert check("--select", "TRP101", "--add-noqa", "train.py") == 0
    assert path.read_text(encoding="utf-8") == FORM_FEED.replace('"__main__":', '"__main__":  # noqa: TRP101')


def test_a_fix_after_a_form_feed_edits_the_reported_line(root):
    path = root / "train.py"
    path.write_text(FORM_FEED, encoding="utf-8")
    main(["check", "--no-cache", "--fix", "--select", "TRP201", "train.py"])
    assert path.read_text(encoding="utf-8") == FORM_FEED.replace("benchmark = True", "benchmark = False")
