"""A program run again in the language server is valued against what this run read (Reads), not
the last run's list: a module it reads only now must be in the values its cached facts are
checked against, or a later edit of that module would leave the facts stale."""

from __future__ import annotations

from pathlib import Path

import pytest
from session_checks import analysed_like_fresh

from torchrepro_lint.project.reads import Reads
from torchrepro_lint.server.session import Workspace

TRAIN = """import torch


def main():
    noise = torch.randn(3)
    return noise


if __name__ == "__main__":
    main()
"""

HELPERS = """import torch


def setup():
    pass
"""


@pytest.fixture(autouse=True)
def in_the_workspace(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)


def _codes(found) -> list[tuple[str, str]]:
    return sorted((path.name, finding.code) for path, findings in found.items() for finding in findings)


def test_a_module_read_only_after_an_edit_is_checked_for_the_next(tmp_path: Path):
    (tmp_path / "pyproject.toml").write_text("[tool.torchrepro-lint]\n")
    train, helpers = (tmp_path / "train.py").resolve(), (tmp_path / "helpers.py").resolve()
    train.write_text(TRAIN)
    helpers.write_text(HELPERS)
    workspace = Workspace(tmp_path, persistent=False)
    session = workspace.open(train, TRAIN + "# unsaved\n")  # (the server keeps reads of unsaved runs only)
    workspace.open(helpers, HELPERS)
    assert ("train.py", "TRP101") in _codes(analysed_like_fresh(tmp_path, session))
    # train.py now runs helpers.setup(): the program reads helpers.py from this analysis on
    session.buffers[train] = TRAIN.replace("import torch\n", "import torch\nimport helpers\n").replace(
        "    noise =", "    helpers.setup()\n    noise ="
    )
    assert ("train.py", "TRP101") in _codes(analysed_like_fresh(tmp_path, session))
    session.buffers[helpers] = HELPERS.replace("    pass\n", "    torch.manual_seed(0)\n")  # now it seeds
    assert ("train.py", "TRP101") not in _codes(analysed_like_fresh(tmp_path, session))


def test_reads_are_the_same_when_their_parts_are():
    kept = frozenset({("ir", Path("/p/a.py"))})
    first = Reads({("content", Path("/p/t.py"))}, (kept,))
    assert first.same_as(Reads({("content", Path("/p/t.py"))}, (frozenset(kept),)))
    assert not first.same_as(Reads({("content", Path("/p/t.py"))}, (kept, frozenset({("ir", Path("/p/b.py"))}))))
    assert not first.same_as(Reads(set(), (kept,)))
    assert first.union() == {("content", Path("/p/t.py")), ("ir", Path("/p/a.py"))}
