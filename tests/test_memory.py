"""Memory stays bounded on large projects: a released tree is freed at once, modules loaded
only for their IR keep no tree, and freed heap pages are handed back during long runs."""

from __future__ import annotations

import gc
import weakref
from pathlib import Path

import pytest

from torchrepro_lint.analysis.dataflow.core import flow
from torchrepro_lint.pipeline import memory, staging
from torchrepro_lint.analysis.op_matching.matcher import ops_in
from torchrepro_lint.catalog import parse_version
from torchrepro_lint.project.index import ProjectIndex
from torchrepro_lint.pipeline.source import SourceFile

TRAINING = """\
import torch
import torch.nn.functional as F

x = torch.zeros(1, 1, 4, 4, device="cuda", requires_grad=True)
y = F.interpolate(x, scale_factor=2, mode="bilinear")
"""


@pytest.fixture
def no_collection():
    """As in the CLI: automatic collection off, so only reference counting frees anything."""
    was_enabled = gc.isenabled()
    gc.disable()
    yield
    if was_enabled:
        gc.enable()


def test_a_released_tree_is_freed_though_rules_looked_at_it(tmp_path, no_collection):
    project = ProjectIndex(tmp_path)
    module = project.add(SourceFile(tmp_path / "train.py", TRAINING))
    index = module.index
    flow(index)  # a Flow points back at its index: the cycle that used to keep every tree
    ops_in(index, _version())
    index_ref = weakref.ref(index)
    del index
    module.release_tree()
    assert index_ref() is None  # and with it the tree: its source file let go of it too
    assert "module" not in module.source.__dict__


def test_what_rules_built_is_rebuilt_after_it_is_forgotten(tmp_path):
    project = ProjectIndex(tmp_path)
    module = project.add(SourceFile(tmp_path / "train.py", TRAINING))
    before = [(m.rule, m.ids) for m in ops_in(module.index, _version())]
    module.index.forget_derived()
    assert [(m.rule, m.ids) for m in ops_in(module.index, _version())] == before
    assert before == [("TRP401", "upsample_bilinear2d_backward")]


def test_a_module_loaded_only_for_its_ir_keeps_no_tree(tmp_path):
    (tmp_path / "helpers.py").write_text("import torch\n\ndef seed_all(s):\n    torch.manual_seed(s)\n")
    project = ProjectIndex(tmp_path)
    project.add(SourceFile(tmp_path / "train.py", "from helpers import seed_all\n\nseed_all(0)\n"))
    loaded = project.load_path((tmp_path / "helpers.py").resolve())
    assert loaded is not None and not loaded.linted
    assert not loaded.has_tree
    assert loaded.ir is not None
    assert loaded.index.functions.keys() == {"seed_all"}  # parsed again on demand


def test_freed_pages_are_given_back_once_per_threshold(monkeypatch):
    trims = []
    monkeypatch.setattr(memory, "_trim", lambda: trims.append(1))
    monkeypatch.setattr(memory, "_since_trim", 0)
    monkeypatch.setattr(memory, "TRIM_AFTER", 100)
    memory.churned(60)
    assert trims == []
    memory.churned(60)
    assert trims == [1]
    memory.churned(99)
    assert trims == [1]


def test_a_large_parse_gives_its_scratch_memory_back_at_once(monkeypatch):
    trims = []
    monkeypatch.setattr(memory, "_trim", lambda: trims.append(1))
    monkeypatch.setattr(memory, "LARGE_PARSE", 50)
    SourceFile(Path("small.py"), "x = 1\n").module
    assert trims == []
    SourceFile(Path("large.py"), "x = 1\n" * 10).module
    assert trims == [1]


def test_giving_back_works_on_this_platform():
    memory._trim = None
    memory.give_back()  # glibc's malloc_trim here; a no-op where the C library has none
    assert callable(memory._trim)


def test_a_kept_tree_forgets_what_its_rules_built_once_they_ran(tmp_path):
    project = ProjectIndex(tmp_path)
    module = project.add(SourceFile(tmp_path / "train.py", TRAINING))
    budget = staging.TreeBudget(10_000)
    budget.after_indexing(module)
    flow(module.index)
    budget.after_checking(module)
    assert module.has_tree  # kept within budget for other files' rules
    assert module.index.derived == {}


def _version():
    return parse_version("2.13")


def test_a_finished_run_leaves_no_cycle_for_the_collector(tmp_path, no_collection):
    """The language server runs the engine on every edit: each run's project must be freed by
    reference counting when the run ends, not left to full collections over the whole heap."""
    from torchrepro_lint.config import Config
    from torchrepro_lint.pipeline.engine import lint_sources
    from torchrepro_lint.server.memory_cache import MemoryCache

    (tmp_path / "helpers.py").write_text("import torch\n\ndef seed():\n    torch.manual_seed(0)\n")
    script = "import torch\nfrom helpers import seed\n\nseed()\nx = torch.randn(3)\n"
    (tmp_path / "train.py").write_text(script)
    indexes = []

    def make_index(root, helpers):
        indexes.append(ProjectIndex(root, helpers))
        return indexes[-1]

    config = Config(root=tmp_path)
    cache = MemoryCache()
    for text in (script, script + "y = 1\n"):  # a second run: cached programs are checked
        sources = [(tmp_path / "helpers.py", None), (tmp_path / "train.py", text)]
        lint_sources(sources, config, cache=cache, make_index=make_index)
    modules = [weakref.ref(m) for index in indexes for m in index.modules.values()]
    assert len(modules) == 4
    indexes.clear()
    del cache  # (it remembers the last runs' program facts, which point at their modules)
    assert [ref() for ref in modules] == [None] * 4


def test_a_one_process_run_keeps_the_largest_trees_and_adds_modules_in_file_order(tmp_path):
    # Lowered largest first, so that the trees kept within budget are those whose parse
    # needs the most memory; the project still lists modules in the order of the files.
    from torchrepro_lint.pipeline import engine

    texts = {"a_small.py": "x = 1\n", "b_large.py": TRAINING * 3, "c_middle.py": TRAINING}
    sources = [SourceFile(tmp_path / name, text) for name, text in texts.items()]
    project = ProjectIndex(tmp_path, lowered=staging.LoweredStore(None))
    budget = staging.TreeBudget(len(texts["b_large.py"]))
    assert engine._lower_all(project, sources, budget, None) == []
    assert [module.path.name for module in project.modules.values()] == list(texts)
    assert {module.path.name: module.has_tree for module in project.modules.values()} == {
        "a_small.py": False, "b_large.py": True, "c_middle.py": False,
    }


@pytest.mark.parametrize("budget", [0, 300, staging.TREE_BUDGET], ids=["none-kept", "some-kept", "all-kept"])
def test_a_one_process_run_reports_the_same_whatever_trees_it_keeps(tmp_path, capsys, monkeypatch, budget):
    from conftest import check_json
    from shard_support import shard_project

    root = shard_project(tmp_path, monkeypatch)
    _, expected, _ = check_json(capsys, root, "--no-cache", "--jobs", "1")[:3]
    monkeypatch.setattr(staging, "TREE_BUDGET", budget)
    code, found, stats = check_json(capsys, root, "--no-cache", "--jobs", "1")[:3]
    assert code == 1 and found == expected and {f["code"] for f in found} >= {"TRP000", "TRP402"}
    assert (stats["parsed"] == 10) == (budget > 10_000)  # ten files parse; some again when dropped
