"""`--fail-on` / `fail-on`: which severities make the exit status 1; every finding is still reported."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from conftest import write_project
from torchrepro_lint.cli import main

# A seeded program whose DataLoader has workers but no worker seeding: TRP301 at `note` level.
NOTE = "import torch\nfrom torch.utils.data import DataLoader\n\nif __name__ == '__main__':\n    torch.manual_seed(0)\n    loader = DataLoader([1, 2], num_workers=2)\n"
# An unseeded program: TRP101, a warning.
WARNING = "import torch\n\nif __name__ == '__main__':\n    torch.rand(3)\n"
# A misspelt determinism flag that PyTorch ignores: TRP206, an error.
ERROR = "import torch\n\ntorch.backends.cudnn.determinstic = True\n"


def run(capsys, *args):
    code = main(["check", "--no-cache", *args])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def project(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write_project(tmp_path, {"note.py": NOTE, "warning.py": WARNING, "error.py": ERROR})
    return tmp_path


def test_the_fixtures_have_one_finding_of_each_level(project, capsys):
    for name, level in (("note.py", "note"), ("warning.py", "warning"), ("error.py", "error")):
        code, out, _ = run(capsys, "--fail-on", "note", name)
        assert code == 1 and f" {level}: " in out.splitlines()[0], out


@pytest.mark.parametrize(
    ("fail_on", "failing"),
    [(None, {"warning.py", "error.py"}), ("note", {"note.py", "warning.py", "error.py"}), ("warning", {"warning.py", "error.py"}), ("error", {"error.py"})],
)
@pytest.mark.parametrize("output_format", ["text", "json", "sarif", "github"])
def test_the_fail_level_decides_the_exit_status_in_every_format(project, capsys, fail_on, failing, output_format):
    for name in ("note.py", "warning.py", "error.py"):
        options = ["--fail-on", fail_on] if fail_on else []
        code, out, _ = run(capsys, "--output-format", output_format, *options, name)
        assert code == (1 if name in failing else 0), (name, output_format)
        assert "TRP" in out  # reported whether or not it fails


def test_the_text_summary_says_what_does_not_fail(project, capsys):
    code, out, _ = run(capsys, "note.py")
    assert code == 0
    assert out.splitlines()[-1].endswith("1 below --fail-on warning: reported, not failing.")


def test_pyproject_sets_it_and_the_command_line_wins(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    write_project(tmp_path, {"note.py": NOTE, "warning.py": WARNING}, {"fail-on": "note"})
    assert run(capsys, "note.py")[0] == 1
    assert run(capsys, "--fail-on", "error", "warning.py")[0] == 0


def test_exit_zero_still_wins(project, capsys):
    assert run(capsys, "--fail-on", "note", "--exit-zero")[0] == 0


def test_a_bad_fail_level_is_a_configuration_error(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    write_project(tmp_path, {"warning.py": WARNING}, {"fail-on": "warnings"})
    code, _, err = run(capsys)
    assert code == 2 and "'tool.torchrepro-lint.fail-on' must be one of error, warning, note, got 'warnings'" in err
    with pytest.raises(SystemExit) as exit:
        main(["check", "--fail-on", "info"])
    assert exit.value.code == 2


def test_an_unreadable_file_is_still_exit_two_whatever_the_level(project, capsys):
    (project / "broken.py").write_bytes(b"\xff\xfe\x00x")
    assert run(capsys, "--fail-on", "error", "broken.py")[0] == 2


def test_the_cache_is_shared_between_fail_levels(project, capsys):
    assert main(["check", "--fail-on", "error", "warning.py"]) == 0
    capsys.readouterr()
    assert main(["check", "--statistics", "warning.py"]) == 1
    statistics = json.loads(capsys.readouterr().err.split("statistics: ", 1)[1])
    assert statistics["replayed"] is True


def hook_entries() -> list[list[str]]:
    """The pre-commit hooks' command lines, as the manifest declares them (without `torchrepro-lint`)."""
    manifest = Path(__file__).parents[1] / ".pre-commit-hooks.yaml"
    entries = re.findall(r"^\s*entry: torchrepro-lint (.+)$", manifest.read_text(encoding="utf-8"), re.MULTILINE)
    assert len(entries) == 2
    return [entry.split() for entry in entries]


@pytest.mark.parametrize("entry", hook_entries())
def test_the_hooks_block_warnings_and_let_notes_through(tmp_path, monkeypatch, capsys, entry):
    monkeypatch.chdir(tmp_path)
    write_project(tmp_path, {"note.py": NOTE, "warning.py": WARNING})
    assert main([*entry, "--no-cache", "note.py"]) == 0
    assert "TRP301" in capsys.readouterr().out  # shown, not blocking
    assert main([*entry, "--no-cache", "warning.py"]) == 1
    write_project(tmp_path, {}, {"fail-on": "note"})  # the project's level reaches the hook
    assert main([*entry, "--no-cache", "note.py"]) == 1
