"""Memory stays bounded on large projects: a released tree is freed at once, modules loaded
only for their IR keep no tree, and freed heap pages are handed back during long runs."""

from __future__ import annotations

import gc
import weakref
from pathlib import Path

import pytest

from torchrepro_lint.analysis.dataflow.core import flow
from torchrepro_lint import memory
from torchrepro_lint.pipeline import lowered_store, tree_budget
from torchrepro_lint.analysis.op_matching.matcher import ops_in
from torchrepro_lint.catalog import parse_version
from torchrepro_lint.project.index import ProjectIndex
from torchrepro_lint.parsing.source import SourceFile

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
    budget = tree_budget.TreeBudget(10_000)
    budget.after_indexing(module)
    flow(module.index)
    budget.after_checking(module)
    assert module.has_tree  # kept within budget for other files' rules
    assert module.index.derived == {}


def test_kept_trees_past_the_indexed_share_hold_no_index_between_lowering_and_their_rules(tmp_path):
    project = ProjectIndex(tmp_path)
    first, module = (project.add(SourceFile(tmp_path / f"{name}.py", TRAINING)) for name in ("first", "train"))
    tree, nodes = module.source.module, module.nodes
    budget = tree_budget.TreeBudget(int(len(TRAINING) * 1.5 / tree_budget.INDEXED_SHARE))
    budget.after_indexing(first)
    budget.after_indexing(module)
    assert first._index is not None  # within the share: its rules will not build it again
    assert module.has_tree and module._index is None and module.source.parents is None
    # rebuilt on first use from the same tree: the IR's node table still points into it
    assert module.index.module is tree and module.nodes is nodes
    assert all(node in module.index.parents for node in nodes if node is not tree)


def test_a_node_reported_by_ref_is_placed_after_the_index_was_dropped(tmp_path):
    project = ProjectIndex(tmp_path)
    module = project.add(SourceFile(tmp_path / "train.py", TRAINING))
    ref = len(module.nodes) - 1
    expected = module.source.span(module.nodes[ref])
    module.drop_index()
    node = module.nodes[ref]  # (as LintContext.report does for a ref)
    assert module.source.parents is not None  # the parent map that places it quickly
    assert module.source.span(node) == expected


@pytest.mark.parametrize("jobs", ["1", "3"])
def test_dropping_kept_trees_indexes_changes_no_finding(tmp_path, capsys, monkeypatch, jobs):
    from conftest import check_json
    from shard_support import shard_project
    from torchrepro_lint.project.modules import ProjectModule

    root = shard_project(tmp_path, monkeypatch)
    if jobs != "1":  # every process lowers some files, the main one included (it records drops)
        from torchrepro_lint.pipeline.shards import protocol

        names = sorted(path.name for path in root.glob("*.py"))
        monkeypatch.setattr(protocol, "ASSIGNED", lambda source: names.index(source.path.name) % int(jobs))
    monkeypatch.setattr(tree_budget, "INDEXED_SHARE", 0)  # every kept tree drops its index until its rules run
    dropped = []
    drop_index = ProjectModule.drop_index
    monkeypatch.setattr(ProjectModule, "drop_index", lambda module: dropped.append(module.path) or drop_index(module))
    _, found, _ = check_json(capsys, root, "--no-cache", "--jobs", jobs)[:3]
    assert dropped  # trees were kept without their index
    monkeypatch.setattr(ProjectModule, "drop_index", lambda module: module.index.forget_derived())  # as before
    _, expected, _ = check_json(capsys, root, "--no-cache", "--jobs", jobs)[:3]
    assert found == expected and {f["code"] for f in found} >= {"TRP000", "TRP402"}


def test_indexes_built_again_for_summaries_are_dropped_past_their_bound(tmp_path, monkeypatch):
    project = ProjectIndex(tmp_path, lowered=lowered_store.LoweredStore(None))
    modules = [project.add(SourceFile(tmp_path / f"m{i}.py", TRAINING)) for i in range(3)]
    for module in modules:
        tree_budget.TreeBudget(10_000).after_indexing(module)
        module.drop_index()  # kept without its index, as past the budget's indexed share
    monkeypatch.setattr(lowered_store, "INDEXED_CHARACTERS", 2 * len(TRAINING))
    store = project.lowered
    for module in modules:
        module.index  # as a summary would
        store.indexed_for_summaries(module)
    assert [m._index is not None for m in modules] == [False, True, True]  # the oldest dropped
    assert all(m.has_tree for m in modules)
    with store.pinned(modules[1]):
        modules[0].index
        store.indexed_for_summaries(modules[0])
    assert [m._index is not None for m in modules] == [True, True, True]  # (its rules run)


def test_trees_parsed_for_program_rules_are_dropped_after_them(tmp_path, capsys, monkeypatch):
    from torchrepro_lint.config import Config
    from torchrepro_lint.pipeline.engine import lint_sources

    script = "import random\nimport torch\n\nif __name__ == '__main__':\n    torch.manual_seed(0)\n    random.shuffle([1, 2])\n"
    (tmp_path / "shuffle.py").write_text(script)
    monkeypatch.setattr(tree_budget, "TREE_BUDGET", 0)  # so its rules must parse it again
    monkeypatch.setattr(lowered_store, "SUMMARISED_TREES", 0)  # (the store's own, for summaries)
    projects = []

    def make_index(root, helpers):
        projects.append(ProjectIndex(root, helpers))
        return projects[-1]

    result = lint_sources([(tmp_path / "shuffle.py", None)], Config(root=tmp_path), make_index=make_index)
    assert [f.code for f in result.findings] == ["TRP102"]  # reported by a program rule
    assert not any(module.has_tree for module in projects[0].modules.values())


def test_ir_is_compact_and_pickles_as_it_was():
    import pickle

    from torchrepro_lint.pipeline.cache import structural_digest
    from torchrepro_lint.project import ir

    call = ir.Call(3, "utils.seed", args=(ir.Var("x"), ir.UNKNOWN), kwargs=(("k", ir.Const(1)),))
    function = ir.FunctionIR("main", 1, ("x",), {"x": ir.TRUE}, (call, ir.Return(), ir.Branch(ir.IS_MAIN, (call,), ())))
    module_ir = ir.ModuleIR((call,), None, {"main": function}, {"C": ir.ClassIR("C", ("B",), ("m",))}, {"a": "b"})
    copy = pickle.loads(pickle.dumps(module_ir, protocol=pickle.HIGHEST_PROTOCOL))
    assert copy == module_ir and structural_digest(copy) == structural_digest(module_ir)
    assert not hasattr(call, "__dict__") and not hasattr(copy.functions["main"], "__dict__")  # slots
    assert pickle.loads(pickle.dumps(ir.IS_MAIN)) == ir.IS_MAIN


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
    project = ProjectIndex(tmp_path, lowered=lowered_store.LoweredStore(None))
    budget = tree_budget.TreeBudget(len(texts["b_large.py"]))
    assert engine._lower_all(project, sources, budget, None) == []
    assert [module.path.name for module in project.modules.values()] == list(texts)
    assert {module.path.name: module.has_tree for module in project.modules.values()} == {
        "a_small.py": False, "b_large.py": True, "c_middle.py": False,
    }


@pytest.mark.parametrize("budget", [0, 300, tree_budget.TREE_BUDGET], ids=["none-kept", "some-kept", "all-kept"])
def test_a_one_process_run_reports_the_same_whatever_trees_it_keeps(tmp_path, capsys, monkeypatch, budget):
    from conftest import check_json
    from shard_support import shard_project

    root = shard_project(tmp_path, monkeypatch)
    _, expected, _ = check_json(capsys, root, "--no-cache", "--jobs", "1")[:3]
    monkeypatch.setattr(tree_budget, "TREE_BUDGET", budget)
    code, found, stats = check_json(capsys, root, "--no-cache", "--jobs", "1")[:3]
    assert code == 1 and found == expected and {f["code"] for f in found} >= {"TRP000", "TRP402"}
    assert (stats["parsed"] == 10) == (budget > 10_000)  # ten files parse; some again when dropped


@pytest.mark.parametrize("lives_on", [False, True])
def test_a_checked_tree_keeps_its_index_only_where_the_modules_live_on(tmp_path, lives_on):
    # The language server's next edit runs rules that look into the same modules again: there a
    # checked tree keeps its index (what the rules derived from it is still forgotten); a
    # one-shot run drops it, to bound memory.
    project = ProjectIndex(tmp_path, reusable={} if lives_on else None)
    module = project.add(SourceFile(tmp_path / "train.py", TRAINING))
    budget = tree_budget.TreeBudget(10 * len(TRAINING), keep_indexes=project.lives_on)
    budget.after_indexing(module)
    module.index.derived["flow"] = object()
    budget.after_checking(module)
    assert module.has_tree
    assert (module._index is not None) == lives_on
    assert not lives_on or module.index.derived == {}
