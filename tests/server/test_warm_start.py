"""The language server leaves `.torchrepro_lint_cache/` as `check` would for the files as saved,
so that the next server started on the same clone (or the next `check`) starts warm: counted in
the entries a new session reads from disk (MemoryCache.disk_reads), not in time."""

from __future__ import annotations

import shutil
from pathlib import Path

from torchrepro_lint.server.session import Workspace

REPO = Path(__file__).resolve().parents[2]


def demo(tmp_path: Path) -> Path:
    project = tmp_path / "demo"
    shutil.copytree(REPO / "examples" / "demo", project)
    return project.resolve()


def first_analysis(project: Path, path: Path, text: str):
    """A new server's first analysis with `text` open at `path`: (its session, its statistics)."""
    session = Workspace(project, persistent=True).open(path, text)
    analysis = session.analyse(open_only=True)
    return session, analysis.statistics


def on_disk(project: Path) -> int:
    """Entries in the project's cache (not its CACHEDIR.TAG and .gitignore)."""
    return sum(1 for entry in (project / ".torchrepro_lint_cache").glob("v*/*/*/*/*") if entry.is_file())


def test_a_first_analysis_of_saved_files_leaves_the_next_start_warm(tmp_path: Path):
    project = demo(tmp_path)
    train = project / "train.py"
    session, statistics = first_analysis(project, train, train.read_text())
    assert statistics.parsed == 4 and session.cache.disk_reads == 0
    session, statistics = first_analysis(project, train, train.read_text())
    assert statistics.parsed == 0 and session.cache.disk_reads > 0


def test_a_first_analysis_with_an_unsaved_buffer_leaves_the_cache_once_it_is_saved(tmp_path: Path):
    """An editor that restores an unsaved buffer at start: nothing is written while it is
    unsaved; saved, the next analysis writes what the saved files use, most of it made before."""
    project = demo(tmp_path)
    utils = project / "utils.py"
    edited = utils.read_text() + "\nEDITED = 1\n"
    session, _ = first_analysis(project, utils, edited)
    assert on_disk(project) == 0
    utils.write_text(edited)  # saved
    session.buffers[utils] = edited
    assert session.analyse(open_only=True).statistics.parsed == 0  # (all of it from memory)
    assert on_disk(project) > 0
    session, statistics = first_analysis(project, utils, edited)
    assert statistics.parsed == 0 and session.cache.disk_reads > 0
