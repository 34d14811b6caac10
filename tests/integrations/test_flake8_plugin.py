"""The flake8 plugin: same findings as the CLI, buffers from stdin, never a crash, a shared cache."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import libcst as cst
import pytest

from integration_support import cli_findings, copy_project, flake8, flake8_findings, run
from torchrepro_lint import __version__
from torchrepro_lint.integrations import flake8_plugin, project_cache
from torchrepro_lint.integrations.flake8_plugin import TorchReproChecker
from torchrepro_lint.integrations.project_cache import ProjectCache, find_project


@pytest.fixture
def project(tmp_path, monkeypatch):
    root = copy_project(tmp_path / "proj")
    monkeypatch.chdir(root)
    return root


@pytest.fixture
def fresh_cache(monkeypatch):
    """A process's own cache only (no on-disk cache): its parse counters are the process's."""
    cache = ProjectCache(persistent=False)
    monkeypatch.setattr(flake8_plugin, "CACHE", cache)
    return cache


def plugin_results(filename: str, text: str) -> list[tuple[int, int, str]]:
    checker = TorchReproChecker(tree=None, lines=text.splitlines(keepends=True), filename=filename)
    return [(row, col, message) for row, col, message, kind in checker.run()]


def test_flake8_reports_what_the_cli_reports(project):
    completed = flake8(project, "--select", "TRP", ".")
    assert completed.returncode == 1, completed.stderr
    assert "Traceback" not in completed.stderr
    found = flake8_findings(completed.stdout)
    assert found == cli_findings(project, ".")
    codes = {(path, code) for path, _, _, code, _ in found}
    # Program rules across files: train.py's program reaches helpers.py and data.py.
    assert {("helpers.py", "TRP204"), ("helpers.py", "TRP202"), ("train.py", "TRP201"), ("data.py", "TRP601")} <= codes
    # `# noqa: TRP101` on evaluate.py's guard holds in both.
    assert not any(path == "evaluate.py" for path, *_ in found)


def test_columns_count_code_points_like_the_cli(project):
    line = (project / "train.py").read_text(encoding="utf-8").splitlines()[11]
    assert "ü" in line  # non-ASCII before the finding: bytes and code points differ
    found = flake8_findings(flake8(project, "--select", "TRP201", "train.py").stdout)
    assert {(row, col) for _, row, col, _, _ in found} == {(12, line.index("torch.backends") + 1)}


def test_flake8_on_one_file_still_sees_the_whole_project(project):
    # helpers.py alone has no program: its findings come from train.py's, as in `check .`.
    found = flake8_findings(flake8(project, "--select", "TRP", "helpers.py").stdout)
    expected = {f for f in cli_findings(project, ".") if f[0] == "helpers.py"}
    assert found == expected and {f[3] for f in found} == {"TRP202", "TRP204"}


def test_project_config_is_respected(tmp_path):
    root = copy_project(tmp_path / "proj", config='ignore = ["TRP204"]\n')
    codes = {f[3] for f in flake8_findings(flake8(root, "--select", "TRP", ".").stdout)}
    assert "TRP204" not in codes and "TRP202" in codes


def test_flake8_select_and_noqa_apply_on_top(project):
    found = flake8_findings(flake8(project, "--select", "TRP2", ".").stdout)
    assert found and {f[3][:4] for f in found} == {"TRP2"}
    path = project / "helpers.py"
    path.write_text(path.read_text().replace('"0"\n', '"0"  # noqa: TRP204\n'), encoding="utf-8")
    assert "TRP204" not in {f[3] for f in flake8_findings(flake8(project, "--select", "TRP", ".").stdout)}


def test_stdin_buffer_replaces_the_file_on_disk(project):
    disk = (project / "train.py").read_text(encoding="utf-8")
    # Unchanged buffer: what the CLI reports for that file.
    same = flake8_findings(flake8(project, "--select", "TRP", "--stdin-display-name", "train.py", "-", stdin=disk).stdout)
    assert same == {f for f in cli_findings(project, ".") if f[0] == "train.py"}
    # An unsaved edit (two lines inserted, cudnn.benchmark gone) is what gets linted, in its project.
    edited = disk.replace('    label = "épreuve ü"; torch.backends.cudnn.benchmark = True\n', "    label = 'x'\n")
    edited = "# edited\n# in the editor\n" + edited
    found = flake8_findings(flake8(project, "--select", "TRP", "--stdin-display-name", "train.py", "-", stdin=edited).stdout)
    assert {(f[1], f[3]) for f in found} == {(22, "TRP101")}  # was line 20; TRP201 gone
    assert (project / "train.py").read_text(encoding="utf-8") == disk


def test_stdin_buffer_edit_changes_findings_in_other_files(project):
    # The buffer of helpers.py no longer claims determinism: train.py's TRP201 rests on that claim.
    helpers = (project / "helpers.py").read_text(encoding="utf-8").replace(
        "    torch.backends.cudnn.deterministic = True\n", ""
    )
    found = flake8_findings(
        flake8(project, "--select", "TRP", "--stdin-display-name", "helpers.py", "-", stdin=helpers).stdout
    )
    assert {f[3] for f in found} == {"TRP204"}


def test_stdin_without_a_path_is_linted_alone(project):
    text = (project / "scripts" / "make_noise.py").read_text(encoding="utf-8")
    found = flake8_findings(flake8(project, "--select", "TRP", "-", stdin=text).stdout)
    assert {(f[0], f[1], f[3]) for f in found} == {("stdin", 1, "TRP101")}


def test_syntax_error_does_not_crash_flake8(project):
    (project / "broken.py").write_text("import torch\n\ndef train(:\n    pass\n", encoding="utf-8")
    completed = flake8(project, "--select", "TRP,E999", ".")
    assert completed.returncode == 1
    assert "Traceback" not in completed.stderr and "PluginExecutionFailed" not in completed.stderr
    found = flake8_findings(completed.stdout)
    assert {f[3] for f in found if f[0] == "broken.py"} == {"E999"}
    assert ("train.py", 20, 1) in {(f[0], f[1], f[2]) for f in found}  # the others are still linted


def test_flake8_version_lists_the_plugin(tmp_path):
    completed = run([sys.executable, "-m", "flake8", "--version"], tmp_path)
    assert completed.returncode == 0
    assert f"torchrepro-lint: {__version__}" in " ".join(completed.stdout.split())


# -- in-process: the plugin object as flake8 drives it ---------------------------------------------
def test_plugin_yields_zero_based_columns_and_code_prefixed_messages(project, fresh_cache):
    results = plugin_results("scripts/make_noise.py", (project / "scripts" / "make_noise.py").read_text())
    assert len(results) == 1
    row, col, message = results[0]
    assert (row, col) == (1, 0) and message.startswith("TRP101 program never seeds torch")


def test_libcst_failure_is_a_trp000_finding(project, fresh_cache, monkeypatch):
    def refuse(text, *args, **kwargs):
        raise cst.ParserSyntaxError("unsupported syntax", lines=text.splitlines(True) or [""], raw_line=1, raw_column=0)

    monkeypatch.setattr("libcst.parse_module", refuse)
    results = plugin_results("helpers.py", (project / "helpers.py").read_text())
    assert [(r[0], r[2][:6]) for r in results] == [(1, "TRP000")]
    assert "LibCST cannot parse this file" in results[0][2]


def test_internal_error_yields_nothing_and_does_not_raise(project, fresh_cache, monkeypatch, caplog):
    def explode(*args, **kwargs):
        raise ZeroDivisionError("boom")

    monkeypatch.setattr(project_cache, "lint_sources", explode)
    assert plugin_results("train.py", (project / "train.py").read_text()) == []
    assert "internal error" in caplog.text and "ZeroDivisionError" in caplog.text


def test_broken_config_is_reported_once_and_yields_nothing(tmp_path, fresh_cache, monkeypatch, capsys):
    root = copy_project(tmp_path / "proj", config="no-such-key = 1\n")
    monkeypatch.chdir(root)
    monkeypatch.setattr(flake8_plugin, "_reported_config_errors", set())
    assert plugin_results("train.py", (root / "train.py").read_text()) == []
    assert plugin_results("helpers.py", (root / "helpers.py").read_text()) == []
    err = capsys.readouterr().err
    assert err.count("unknown key 'tool.torchrepro-lint.no-such-key'") == 1


# -- the cache -------------------------------------------------------------------------------------
def _all_files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*.py"))


def test_a_run_over_the_project_parses_each_module_once(project, fresh_cache):
    files = _all_files(project)
    for path in files:
        plugin_results(os.path.relpath(path, project), path.read_text(encoding="utf-8"))
    assert fresh_cache.parses == len(files)
    assert fresh_cache.analyses == 1


def test_an_edit_reparses_only_the_edited_module(project, fresh_cache):
    files = _all_files(project)
    train = (project / "train.py").read_text(encoding="utf-8")
    plugin_results("train.py", train)
    parses = fresh_cache.parses
    assert parses == len(files)
    # An unsaved buffer: one module parsed again, the rest reused.
    assert [r[0] for r in plugin_results("train.py", "\n" + train)] == [13, 21]
    assert fresh_cache.parses == parses + 1
    # Saved with different content (size changes): data.py is read and parsed again, nothing else.
    (project / "data.py").write_text("import os\n\n\ndef load_items(root):\n    return sorted(os.listdir(root))\n", encoding="utf-8")
    assert plugin_results("data.py", (project / "data.py").read_text()) == []
    assert fresh_cache.parses == parses + 2
    # A new module appears in the project: found, and parsed once.
    (project / "extra.py").write_text("import torch\n\nx = torch.rand(2)\n", encoding="utf-8")
    assert [r[2][:6] for r in plugin_results("extra.py", (project / "extra.py").read_text())] == ["TRP101"]
    assert fresh_cache.parses == parses + 3


# -- the on-disk cache, shared with the CLI: what a new flake8 process per save relies on ---------
def _new_process(monkeypatch) -> ProjectCache:
    cache = ProjectCache()  # nothing in memory, as in a new flake8 process
    monkeypatch.setattr(flake8_plugin, "CACHE", cache)
    return cache


def test_a_new_process_replays_an_unchanged_project_from_disk(project, monkeypatch):
    from torchrepro_lint.parsing.source import PARSES

    train = (project / "train.py").read_text(encoding="utf-8")
    _new_process(monkeypatch)
    first = plugin_results("train.py", train)
    assert (project / ".torchrepro_lint_cache").is_dir() and first
    _new_process(monkeypatch)
    before = PARSES[0]
    assert plugin_results("train.py", train) == first
    assert PARSES[0] == before  # nothing parsed: the whole analysis came from the cache


def test_a_new_process_parses_only_an_unsaved_buffer(project, monkeypatch):
    from torchrepro_lint.parsing.source import PARSES

    train = (project / "train.py").read_text(encoding="utf-8")
    _new_process(monkeypatch)
    plugin_results("train.py", train)
    _new_process(monkeypatch)
    before = PARSES[0]
    edited = plugin_results("train.py", "\n" + train)
    # The buffer, and helpers.py: train.py's program runs again and reports there (TRP202, TRP204).
    assert PARSES[0] - before == 2 < len(_all_files(project))
    monkeypatch.setattr(flake8_plugin, "CACHE", ProjectCache(persistent=False))
    assert edited == plugin_results("train.py", "\n" + train)  # what a process without the cache finds


def test_an_unusable_cache_directory_falls_back_to_the_process_cache(project, monkeypatch):
    (project / ".torchrepro_lint_cache").write_text("not a directory")
    train = (project / "train.py").read_text(encoding="utf-8")
    _new_process(monkeypatch)
    found = plugin_results("train.py", train)
    monkeypatch.setattr(flake8_plugin, "CACHE", ProjectCache(persistent=False))
    assert found == plugin_results("train.py", train) and found
    assert (project / ".torchrepro_lint_cache").read_text() == "not a directory"


def test_project_root_is_the_nearest_pyproject_or_vcs_root(tmp_path):
    (tmp_path / "repo" / ".git").mkdir(parents=True)
    (tmp_path / "repo" / "pkg" / "sub").mkdir(parents=True)
    (tmp_path / "repo" / "pkg" / "pyproject.toml").write_text("[project]\nname = 'p'\n")
    file = tmp_path / "repo" / "pkg" / "sub" / "m.py"
    assert find_project(file) == (tmp_path / "repo" / "pkg", tmp_path / "repo" / "pkg" / "pyproject.toml")
    other = tmp_path / "repo" / "tools" / "t.py"
    assert find_project(other) == (tmp_path / "repo", None)
