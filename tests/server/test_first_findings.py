"""The findings the language server publishes for a file before its project's first analysis is
done (server/first_findings.py): only those that analysis cannot take back. Every rule's own
examples are the judge: in each, what is found early in a file is among what `check` finds there."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import write_project
from torchrepro_lint.config import load_config
from torchrepro_lint.pipeline.engine import lint_paths
from torchrepro_lint.rules import all_rules
from torchrepro_lint.rules.base import Rule
from torchrepro_lint.rules.pages import fixed_files
from torchrepro_lint.server.first_findings import first_findings

REPO = Path(__file__).resolve().parents[2]


def early(root: Path, name: str, text: str | None = None, *, on_disk: bool = True) -> list[tuple[str, int]]:
    path = root / name
    found = first_findings(load_config([root]), path, path.read_text() if text is None else text, on_disk)
    return [(f.code, f.row) for f in found]


def full(root: Path, name: str) -> list[tuple[str, int]]:
    result = lint_paths([root], load_config([root]))
    return [(f.code, f.row) for f in result.findings if Path(f.path) == root / name]


FOLDER = """\
from torch.utils.data import Dataset


class Folder(Dataset):
    def __init__(self, files):
        self.files = files

    def __len__(self):
        return len(self.files)

    def __getitem__(self, index):
        return self.files[index]
"""
LISTED_INTO_A_DATASET = "import os\n\n{header}\n\ndef build(root):\n    return Folder(os.listdir(root))\n"


def test_a_rule_that_reads_only_its_file_is_published_early(tmp_path: Path):
    """TRP601 on a listing that goes into a Dataset class of the same file."""
    write_project(tmp_path, {"train.py": LISTED_INTO_A_DATASET.format(header=FOLDER)})
    assert early(tmp_path, "train.py") == full(tmp_path, "train.py") == [("TRP601", 18)]


BASE_FROM_NOWHERE = """import os

from mylib import Base
from torch.utils.data import Dataset


class Folder(Base, Dataset):
    def __init__(self, files):
        self.files = files


def build(root):
    return Folder(os.listdir(root))
"""


def test_an_import_that_finds_no_file_stays_local_while_every_buffer_is_on_disk(tmp_path: Path):
    """Whether `Folder` is a dataset asks the project for `mylib`, which has no file: the full
    analysis finds none either, unless an open buffer stands for a file not on disk yet."""
    write_project(tmp_path, {"train.py": BASE_FROM_NOWHERE})
    assert early(tmp_path, "train.py") == full(tmp_path, "train.py") == [("TRP601", 13)]
    assert early(tmp_path, "train.py", on_disk=False) == []


def test_an_import_of_a_project_module_holds_the_finding_back(tmp_path: Path):
    """The same listing into a Dataset class imported from another file: whether that class is a
    dataset is the other module's to say, so the finding waits for the full analysis."""
    write_project(tmp_path, {"folders.py": FOLDER, "train.py": LISTED_INTO_A_DATASET.format(header="from folders import Folder")})
    assert full(tmp_path, "train.py") == [("TRP601", 6)]
    assert early(tmp_path, "train.py") == []


DATASET_WITH_RNG = """\
import numpy as np
from torch.utils.data import Dataset


class Noisy(Dataset):
    def __init__(self):
        self.rng = np.random.default_rng(0)

    def __len__(self):
        return 4

    def __getitem__(self, index):
        return self.rng.normal()
"""
RESEEDS_IT = """\
from torch.utils.data import get_worker_info


def worker_init_fn(worker_id):
    info = get_worker_info()
    info.dataset.rng = __import__("numpy").random.default_rng(worker_id)
"""


def test_a_rule_that_looks_at_every_module_is_held_back(tmp_path: Path):
    """TRP303 asks whether any module of the project reseeds the dataset's generator in a
    worker_init_fn: going over the project's modules (which the cache does not record as a
    read) stops it, so no early finding can vanish when another module turns out to reseed."""
    write_project(tmp_path, {"data.py": DATASET_WITH_RNG, "workers.py": RESEEDS_IT})
    assert full(tmp_path, "data.py") == []
    assert early(tmp_path, "data.py") == []
    (tmp_path / "workers.py").unlink()
    assert full(tmp_path, "data.py") == [("TRP303", 7)]
    assert early(tmp_path, "data.py") == []


def test_program_level_evidence_is_held_back_on_the_example_project(tmp_path: Path):
    """examples/demo: of train.py's findings (the programs' seeds and determinism) none is
    early; of data.py's, the unsorted listing is, and the dataset's generator is not."""
    project = tmp_path / "demo"
    project.mkdir()
    write_project(project, {p.name: p.read_text() for p in (REPO / "examples" / "demo").glob("*.py")})
    assert early(project, "train.py") == [] != full(project, "train.py")
    assert [code for code, _ in early(project, "data.py")] == ["TRP601"]
    assert sorted(code for code, _ in full(project, "data.py")) == ["TRP303", "TRP601"]


def test_a_file_that_does_not_compile_is_trp000_alone_and_follows_the_selection(tmp_path: Path):
    write_project(tmp_path, {"train.py": "import os\nos.listdir('.')[0]\ndef broken(:\n"})
    assert early(tmp_path, "train.py") == full(tmp_path, "train.py") == [("TRP000", 3)]
    write_project(tmp_path, {"train.py": "def broken(:\n"}, {"ignore": ["TRP000"]})
    assert early(tmp_path, "train.py") == full(tmp_path, "train.py") == []


def test_noqa_and_per_file_ignores_hold_as_in_check(tmp_path: Path):
    text = LISTED_INTO_A_DATASET.format(header=FOLDER).replace("os.listdir(root))", "os.listdir(root))  # noqa: TRP601")
    write_project(tmp_path, {"train.py": text})
    assert early(tmp_path, "train.py") == []
    write_project(tmp_path, {"train.py": LISTED_INTO_A_DATASET.format(header=FOLDER)}, {"per-file-ignores": {"train.py": ["TRP6"]}})
    assert early(tmp_path, "train.py") == []


def test_notebooks_and_files_not_linted_are_left_to_the_full_analysis(tmp_path: Path):
    config, listing = load_config([tmp_path]), "import os\nos.listdir('.')[0]\n"
    assert first_findings(config, tmp_path / "a.ipynb", "{}") is None
    assert first_findings(config, tmp_path / "a_script", listing) is None  # (a buffer `check` does not lint)
    assert first_findings(config, tmp_path / "a.py", listing) != []


# -- every rule's examples -------------------------------------------------------------------
EXAMPLES = {
    rule.code: [
        (kind, example.config, files)
        for kind, examples in (("hazard", rule.hazards), ("trap", rule.traps))
        for example in examples
        for files in ([example.files, fixed_files(example)] if example.fixed is not None else [example.files])
    ]
    for rule in all_rules()
}
EARLY: dict[str, int] = {}  # code -> findings found early in the examples (see the last test)


@pytest.mark.parametrize("code", sorted(EXAMPLES))
def test_what_is_found_early_in_a_rules_examples_check_finds_too(tmp_path: Path, monkeypatch, code: str):
    """With every rule on, in every file of every example of every rule: nothing found early
    is missing from what `check` finds (code, place, message and severity alike)."""
    monkeypatch.chdir(tmp_path)
    for number, (_, settings, files) in enumerate(EXAMPLES[code]):
        root = tmp_path / str(number)
        root.mkdir()
        write_project(root, files, settings)
        config = load_config([root])
        result = lint_paths([root], config)
        checked = {(f.path, f.code, f.row, f.column, f.message, f.severity) for f in result.findings}
        for name in files:
            path = root / name
            if path.suffix != ".py":
                continue
            found = first_findings(config, path, path.read_text(encoding="utf-8")) or []
            for finding in found:
                EARLY[finding.code] = EARLY.get(finding.code, 0) + 1
            assert {(f.path, f.code, f.row, f.column, f.message, f.severity) for f in found} <= checked, (number, name)


def test_the_examples_have_findings_found_early():
    """(After the tests above:) the check above is not empty: rules that read only their file
    report early in their own examples."""
    if len(EARLY) == 0:
        pytest.skip("run with the examples' tests")
    assert {"TRP000", "TRP104", "TRP601", "TRP603"} <= set(EARLY), EARLY


class _ReadsThePrograms(Rule):
    """A rule that reports once on the file's first line, reads the programs, and reports again:
    the first finding comes before anything outside the file is read."""

    code, name, summary, why = "TRP998", "reads-the-programs", "test", "test"
    swallow = False

    def check_module(self, module, context):
        yield context.report(self, module, None, "before")
        if self.swallow:
            try:
                context.programs
            except BaseException:  # (a rule that catches everything goes on: what follows still waits)
                pass
        else:
            context.programs
        yield context.report(self, module, module.source.module.body[1], "after")  # (line 2)


@pytest.mark.parametrize("swallow", [False, True])
def test_what_a_rule_yields_before_it_reads_outside_the_file_is_kept(tmp_path: Path, monkeypatch, swallow: bool):
    from torchrepro_lint.pipeline import engine

    rule = _ReadsThePrograms()
    rule.swallow = swallow
    monkeypatch.setattr(engine, "enabled_rules", lambda config: [rule])
    found = first_findings(load_config([tmp_path]), tmp_path / "a.py", "x = 1\ny = 2\n")
    assert [f.message for f in found] == ["before"]
