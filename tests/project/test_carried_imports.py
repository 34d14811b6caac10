"""The language server's import answers carried to the next analysis (ProjectIndex.imports_kept):
an import statement of a module that did not change is not resolved again, while no file may
have come or gone; a module that appears is found."""

from __future__ import annotations

from pathlib import Path

import pytest
from session_checks import analysed_like_fresh

from torchrepro_lint.project.index import ProjectIndex
from torchrepro_lint.server.session import Workspace

UTILS = """try:
    import myseed
except ImportError:
    myseed = None
try:
    from vendored import extra_seed
except ImportError:
    extra_seed = None

import helpers
"""

HELPERS = "import torch\n\nWIDTH = 4\n"

TRAIN = """import torch

import utils

if __name__ == "__main__":
    x = torch.randn(3)
    print(x)
"""

SEEDING = "import torch\n\ntorch.manual_seed(0)\n"


@pytest.fixture
def carried(monkeypatch):
    """Per analysis: [import statements answered from the run before, resolved again]."""
    counts = [[0, 0]]
    real = ProjectIndex._carried_import

    def counting(self, key, importer):
        found = real(self, key, importer)
        counts[-1][0 if found is not None else 1] += 1
        return found

    monkeypatch.setattr(ProjectIndex, "_carried_import", counting)
    return counts


def _session(tmp_path: Path):
    # vendored/ is excluded from linting: a module that appears there is not linted, only
    # loaded when an import finds it
    (tmp_path / "pyproject.toml").write_text('[tool.torchrepro-lint]\nextend-exclude = ["vendored"]\n')
    (tmp_path / "vendored").mkdir()
    (tmp_path / "vendored" / "__init__.py").write_text("")
    for name, text in {"utils.py": UTILS, "helpers.py": HELPERS, "train.py": TRAIN}.items():
        (tmp_path / name).write_text(text)
    workspace = Workspace(tmp_path, persistent=False)
    train = (tmp_path / "train.py").resolve()
    return workspace.open(train, TRAIN), train


def _codes(found) -> set:
    return {(path.name, f.code) for path, findings in found.items() for f in findings}


def test_imports_of_unchanged_modules_are_not_resolved_again_after_an_edit(tmp_path, carried):
    session, train = _session(tmp_path)
    helpers = (tmp_path / "helpers.py").resolve()
    session.analyse()
    # a draw at helpers' import: every import that reads helpers is walked again
    for n in range(2):
        carried.append([0, 0])
        session.buffers[helpers] = HELPERS + f"NOISE_{n} = torch.randn(1)\n"  # (a new name: other IR)
        analysed_like_fresh(tmp_path, session)
    # at the first edit, train.py's two import statements are answered from the run before;
    # utils.py's (walked for the first time) and helpers' own `import torch` (a new object) are
    # resolved again (and so is everything in the fresh sessions, which carry nothing)
    assert carried[1][0] == 2 and carried[1][1] >= 3


def _walked_twice(tmp_path: Path):
    """A session after two edits of helpers.py, each walking utils.py's imports again: the
    second takes `import myseed` (missing) from the run before."""
    session, train = _session(tmp_path)
    helpers = (tmp_path / "helpers.py").resolve()
    assert ("train.py", "TRP101") in _codes(session.analyse().findings)  # myseed is missing
    for n in range(2):
        session.buffers[helpers] = HELPERS + f"NOISE_{n} = torch.randn(1)\n"  # (a new name: other IR)
        analysed_like_fresh(tmp_path, session)
    return session, helpers


def test_a_module_that_appears_on_disk_is_found_once_the_client_says_files_changed(tmp_path):
    session, helpers = _walked_twice(tmp_path)
    (tmp_path / "myseed.py").write_text(SEEDING)
    session.files_changed()  # (workspace/didChangeWatchedFiles)
    session.buffers[helpers] = HELPERS + "NOISE_2 = torch.randn(1)\n"  # utils walked again
    assert ("train.py", "TRP101") not in _codes(analysed_like_fresh(tmp_path, session))


def test_what_replays_the_carried_answer_still_depends_on_the_missing_file(tmp_path):
    # The walks recorded with the carried answer must have read that myseed was missing, as a
    # resolution does: else they would be replayed after it appears.
    session, helpers = _walked_twice(tmp_path)
    (tmp_path / "myseed.py").write_text(SEEDING)
    session.files_changed()
    assert ("train.py", "TRP101") not in _codes(analysed_like_fresh(tmp_path, session))


def test_a_module_opened_as_an_unsaved_buffer_is_found(tmp_path):
    session, helpers = _walked_twice(tmp_path)
    session.buffers[(tmp_path / "myseed.py").resolve()] = SEEDING  # not on disk: only the editor has it
    session.buffers[helpers] = HELPERS + "NOISE_2 = torch.randn(1)\n"
    assert ("train.py", "TRP101") not in _codes(analysed_like_fresh(tmp_path, session))


@pytest.mark.parametrize("walked_again", [True, False])
def test_a_module_that_appears_outside_the_linted_files_is_found_once_files_changed(tmp_path, walked_again):
    # The linted files stay the same; the new module is loaded where an import finds it, which
    # the carried "missing" answer must not hide, whether utils.py is walked again (an edit of
    # helpers.py) or what was walked with the carried answer is replayed.
    session, helpers = _walked_twice(tmp_path)
    (tmp_path / "vendored" / "extra_seed.py").write_text(SEEDING)
    session.files_changed()
    if walked_again:
        session.buffers[helpers] = HELPERS + "NOISE_2 = torch.randn(1)\n"
    assert ("train.py", "TRP101") not in _codes(analysed_like_fresh(tmp_path, session))
