"""The command line as users meet it: output formats, selection, suppression, bad input, exit codes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import write_project
from torchrepro_lint import __version__
from torchrepro_lint.cli import main

UNSEEDED = "import torch\n\nif __name__ == '__main__':\n    torch.rand(3)\n"
SEEDED = "import torch\n\nif __name__ == '__main__':\n    torch.manual_seed(0)\n    torch.rand(3)\n"


def run(capsys, *args):
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def project(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write_project(tmp_path, {"bad.py": UNSEEDED, "good.py": SEEDED})
    return tmp_path


def test_text_output_and_exit_code(project, capsys):
    code, out, _ = run(capsys, "check")
    assert code == 1
    assert out.splitlines()[0].startswith("bad.py:3:1: TRP101 warning: program never seeds torch")
    assert out.splitlines()[-1] == "Found 1 finding (1 warning) in 2 files. 1 more with --unsafe-fixes."


def test_clean_run_exits_zero(project, capsys):
    code, out, _ = run(capsys, "check", "good.py")
    assert code == 0 and out == "No reproducibility hazards found in 1 file.\n"


def test_json_output_has_ruffs_shape(project, capsys):
    code, out, _ = run(capsys, "check", "--output-format", "json")
    data = json.loads(out)
    assert code == 1 and len(data) == 1
    item = data[0]
    assert set(item) == {"cell", "code", "message", "severity", "filename", "location", "end_location", "fix", "url", "noqa_row"}
    assert item["cell"] is None  # a notebook cell number in .ipynb files, as ruff writes it
    assert item["code"] == "TRP101" and item["severity"] == "warning" and item["filename"] == "bad.py"
    assert item["location"] == {"row": 3, "column": 1} and item["noqa_row"] == 3
    assert item["fix"]["applicability"] == "unsafe" and item["fix"]["edits"][0]["content"] == "    torch.manual_seed(0)\n"
    assert item["url"].endswith("/rules/TRP101.md")


def test_select_ignore_extend_select(project, capsys):
    assert run(capsys, "check", "--select", "TRP2")[0] == 0
    assert run(capsys, "check", "--ignore", "TRP1")[0] == 0
    assert run(capsys, "check", "--select", "TRP2", "--extend-select", "TRP101")[0] == 1
    assert run(capsys, "check", "--select", "TRP1", "--ignore", "TRP101")[0] == 0
    assert run(capsys, "check", "--select", "TRP101", "--ignore", "TRP1")[0] == 1  # the more specific wins


def test_exit_zero_and_quiet(project, capsys):
    code, out, _ = run(capsys, "check", "--exit-zero", "--quiet")
    assert code == 0 and len(out.splitlines()) == 1 and "TRP101" in out


def test_noqa_on_the_line_and_for_the_file(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    line = UNSEEDED.replace("'__main__':", "'__main__':  # noqa: TRP1")
    other = UNSEEDED.replace("'__main__':", "'__main__':  # noqa: TRP2")
    whole = "# torchrepro-lint: noqa\n" + UNSEEDED
    write_project(tmp_path, {"a.py": line, "b.py": other, "c.py": whole})
    code, out, _ = run(capsys, "check", "--quiet")
    assert [l.split(":")[0] for l in out.splitlines()] == ["b.py"]


def test_config_select_per_file_ignores_and_exclude(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    write_project(
        tmp_path,
        {"scripts/a.py": UNSEEDED, "scripts/b.py": UNSEEDED, "vendor/c.py": UNSEEDED},
        {"extend-exclude": ["vendor"], "per-file-ignores": {"scripts/b.py": ["TRP101"]}},
    )
    code, out, _ = run(capsys, "check", "--quiet")
    assert [l.split(":")[0] for l in out.splitlines()] == ["scripts/a.py"]


def test_files_named_explicitly_are_linted_unless_force_exclude(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    write_project(tmp_path, {"vendor/c.py": UNSEEDED}, {"extend-exclude": ["vendor"]})
    assert run(capsys, "check", "vendor/c.py")[0] == 1
    assert run(capsys, "check", "--force-exclude", "vendor/c.py")[0] == 0


# -- bad input: a clear message naming the file, the rest still linted, a distinct exit code ---
def test_syntax_error_is_trp000_and_others_are_still_linted(project, capsys):
    (project / "broken.py").write_text("def f(:\n    pass\n")
    code, out, err = run(capsys, "check", "--quiet")
    lines = out.splitlines()
    assert "broken.py:1:7: TRP000 error: file does not parse: invalid syntax" in lines
    assert any(l.startswith("bad.py:3:1: TRP101") for l in lines)
    assert code == 1 and err == ""


def test_newer_python_syntax_is_linted_and_a_real_error_is_still_trp000(project, capsys):
    # A project on Python 3.12 linted by an older interpreter (pre-commit's default python3): the
    # file is fine, LibCST reads it, and it is linted like any other (tests/parsing/test_newer_syntax.py).
    (project / "aliases.py").write_text("type Pair = tuple[int, int]\n")
    (project / "broken.py").write_text("def f(:\n    pass\n")
    code, out, err = run(capsys, "check", "--quiet", "--select", "TRP000")
    assert out.splitlines() == ["broken.py:1:7: TRP000 error: file does not parse: invalid syntax"]
    assert code == 1


def test_binary_and_undecodable_files_are_errors(project, capsys):
    (project / "blob.py").write_bytes(b"\x00\x01\x02binary")
    (project / "latin.py").write_bytes(b"name = '\xe9t\xe9'\n")
    code, out, err = run(capsys, "check", "--quiet")
    assert code == 2
    assert "torchrepro-lint: error: blob.py: not a text file (contains NUL bytes)" in err
    assert "torchrepro-lint: error: latin.py: cannot decode as utf-8" in err
    assert "bad.py:3:1: TRP101" in out  # the rest is still linted
    assert "Traceback" not in err


def test_coding_cookie_is_honoured(project, capsys):
    (project / "latin.py").write_bytes(b"# -*- coding: latin-1 -*-\nname = '\xe9t\xe9'\n")
    code, _, err = run(capsys, "check", "latin.py")
    assert code == 0 and err == ""


def test_missing_path_is_an_error_but_other_paths_are_linted(project, capsys):
    code, out, err = run(capsys, "check", "nowhere.py", "bad.py")
    assert code == 2
    assert err.strip() == "torchrepro-lint: error: nowhere.py: no such file or directory"
    assert out.startswith("bad.py:3:1: TRP101")


@pytest.mark.parametrize(
    "table,expected",
    [
        ("[tool.torchrepro-lint\nselect = 1", "invalid TOML"),
        ('[tool.torchrepro-lint]\nselct = ["TRP1"]', "unknown key 'tool.torchrepro-lint.selct'"),
        ('[tool.torchrepro-lint]\nselect = "TRP1"', "'tool.torchrepro-lint.select' must be a list of str"),
        ('[tool.torchrepro-lint]\ntorch-version = "latest"', "'tool.torchrepro-lint.torch-version' must look like"),
        ("[tool.torchrepro-lint]\nseed = true", "'tool.torchrepro-lint.seed' must be a int"),
    ],
)
def test_broken_pyproject_is_a_clear_error(tmp_path, monkeypatch, capsys, table, expected):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pyproject.toml").write_text(table + "\n")
    (tmp_path / "x.py").write_text(UNSEEDED)
    code, out, err = run(capsys, "check")
    assert code == 2 and out == ""
    assert err.startswith(f"torchrepro-lint: error: {tmp_path / 'pyproject.toml'}: ")
    assert expected in err


def test_explicit_config_file(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    write_project(tmp_path, {"x.py": UNSEEDED})
    other = tmp_path / "alt.toml"
    other.write_text('[tool.torchrepro-lint]\nignore = ["TRP101"]\n')
    assert run(capsys, "check", "--config", str(other))[0] == 0
    assert run(capsys, "check", "--config", "missing.toml")[0] == 2


def test_stdin_with_a_filename(project, capsys, monkeypatch):
    import io

    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(UNSEEDED.encode())))
    code, out, _ = run(capsys, "check", "--stdin-filename", "buffer.py", "-")
    assert code == 1 and out.startswith("buffer.py:3:1: TRP101")


def test_version_rules_and_rule_pages(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0 and capsys.readouterr().out.strip() == f"torchrepro-lint {__version__}"
    code, out, _ = run(capsys, "rules")
    assert code == 0 and "TRP201  benchmark-with-determinism" in out
    code, out, _ = run(capsys, "rule", "trp201")
    assert code == 0 and out.startswith("# TRP201: benchmark-with-determinism")
    assert run(capsys, "rule", "TRP999")[0] == 2


def test_usage_error_exits_two(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["check", "--output-format", "xml"])
    assert exc.value.code == 2


def test_module_entry_point_runs(project):
    proc = subprocess.run([sys.executable, "-m", "torchrepro_lint", "check", "bad.py"], capture_output=True, text=True, cwd=project)
    assert proc.returncode == 1 and "TRP101" in proc.stdout


def test_entry_point_exits_hard_with_all_output_and_the_exit_code(tmp_path, capsys, monkeypatch):
    # `run` leaves with os._exit (no heap teardown): output must still be flushed whole.
    many = {f"script_{i:03d}.py": UNSEEDED for i in range(300)}
    write_project(tmp_path, many)
    monkeypatch.chdir(tmp_path)
    expected_code, expected_out, _ = run(capsys, "check", "--no-cache")
    proc = subprocess.run([sys.executable, "-m", "torchrepro_lint", "check", "--no-cache"], capture_output=True, text=True, cwd=tmp_path)
    assert (proc.returncode, proc.stdout) == (expected_code, expected_out) == (1, proc.stdout)
    assert proc.stdout.count("TRP101") == 300


def test_entry_point_survives_a_reader_that_goes_away(project):
    proc = subprocess.run(
        f"{sys.executable} -m torchrepro_lint check --no-cache bad.py good.py | head -c 1", shell=True, capture_output=True, text=True, cwd=project
    )
    assert proc.stdout == "b" and "Traceback" not in proc.stderr


def test_catalog_command_prints_the_configured_release(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    write_project(tmp_path, {}, {"torch-version": "2.9"})
    code, out, _ = run(capsys, "catalog")
    assert code == 0 and out.startswith("torchrepro-lint op catalogue for torch 2.9")
    code, out, _ = run(capsys, "catalog", "--torch-version", "2.13")
    assert code == 0 and "torch.nn.functional.grid_sample" in out
    assert run(capsys, "catalog", "--torch-version", "latest")[0] == 2


def test_pathologically_deep_code_is_trp000_not_a_crash(project, capsys):
    # LibCST's native parser crashes the process on this; CPython's parser refuses it first.
    (project / "deep.py").write_text("x = " + "+".join(["a"] * 8000) + "\n")
    (project / "long.py").write_text("y = " + "+".join(["b"] * 1500) + "\n")  # parses: must not crash us
    code, out, err = run(capsys, "check", "--quiet")
    assert "deep.py:1:1: TRP000 error: file is too deeply nested to parse" in out
    assert "long.py" not in out and "bad.py:3:1: TRP101" in out
    assert code == 1 and err == ""
