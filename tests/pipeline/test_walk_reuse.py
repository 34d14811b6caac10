"""analysis/walk_reuse.py: an edited buffer's index, built by taking the previous walk's record
of every statement the edit did not touch, is the index a whole walk of the new text gives."""

from __future__ import annotations

import random

import libcst as cst
import pytest

from edit_chains import SCRIPT, SNIPPETS, edit_chain
from torchrepro_lint.analysis.module_index import ModuleIndex
from torchrepro_lint.analysis.walk_reuse import index_shape
from torchrepro_lint.parsing.reparse import ParsedText
from torchrepro_lint.parsing.source import SourceFile
from torchrepro_lint.server.edited_source import EditedSource


def _edited(previous: EditedSource | None, text: str) -> EditedSource:
    parsed = previous.parsed if previous is not None else None
    return EditedSource("script.py", text, previous=parsed)


def _check(source: EditedSource) -> ModuleIndex:
    index = ModuleIndex(source, "pkg")
    fresh = ModuleIndex.__new__(ModuleIndex)  # the same tree, walked whole
    fresh.source, fresh.module, fresh.package = SourceFile("script.py", source.text), source.module, "pkg"
    fresh._build(None)
    assert index_shape(index) == index_shape(fresh)
    return index


def test_an_edit_in_one_function_takes_every_other_statement_from_the_record():
    first = _edited(None, SCRIPT)
    ModuleIndex(first, "pkg")
    text = SCRIPT.replace("            loss.backward()\n", "            loss.backward()\n            clip(model)\n")
    second = _edited(first, text)
    index = _check(second)
    walk = second.parsed.walk
    # every statement of the new tree has its record, the edited ones included
    statements = [node for node in index.parents if isinstance(node, cst.BaseStatement)]
    assert sorted(map(id, statements)) == sorted(id(r.node) for r in walk.records)
    assert walk.before is first.parsed.walk and second.reparsed_from is None  # (kept until looked at)
    # each statement kept from the previous tree whose block is new was taken whole
    old = {id(node) for node in ModuleIndex(first, "pkg").parents if isinstance(node, cst.BaseStatement)}
    kept = [node for node in statements if id(node) in old and id(index.enclosing(node, cst.BaseStatement)) not in old]
    assert walk.taken == len(kept) > 8


def _built_by_hand(make_tree):
    """The index of a tree made by `make_tree` from SCRIPT's, taking from SCRIPT's walk."""
    first = _edited(None, SCRIPT)
    ModuleIndex(first, "pkg")
    tree = make_tree(first.module)

    class ByHand(EditedSource):
        def walk_before(self):
            return first.parsed.walk

    source = ByHand("script.py", tree.code)
    source.__dict__["module"] = tree
    return _check(source)


def test_a_statement_under_a_renamed_class_is_walked_again():
    # Reparsing never moves a kept statement to another scope; a tree built by hand can.
    index = _built_by_hand(
        lambda module: module.with_changes(
            body=[s.with_changes(name=cst.Name("Other")) if isinstance(s, cst.ClassDef) else s for s in module.body]
        )
    )
    assert "Other.__init__" in index.functions and "Net.__init__" not in index.functions


def test_the_previous_index_is_left_as_it_was():
    first = _edited(None, SCRIPT)
    old = ModuleIndex(first, "pkg")
    before = index_shape(old)
    second = _edited(first, SCRIPT.replace("import random\n", "import random as rnd\n"))
    _check(second)
    assert index_shape(old) == before


@pytest.mark.parametrize("seed", range(8))
def test_random_edits_give_the_index_of_a_whole_walk(seed):
    rng = random.Random(seed)
    source = _edited(None, SCRIPT)
    ModuleIndex(source, "pkg")
    taken = 0
    snippets = [*SNIPPETS, "    global_name = helper()\n", "import os as random\n", "    def random(): pass\n"]
    for text in edit_chain(rng, SCRIPT, snippets, 40):
        source = _edited(source, text)
        _check(source)
        taken += source.parsed.walk.taken
    assert taken > 0


def test_a_tree_holding_one_statement_twice_is_walked_whole():
    # A hand-built tree may share a node between two places (a reparse never does): taking the
    # statement a second time would count its nodes twice, so the whole tree is walked.
    index = _built_by_hand(lambda module: module.with_changes(body=[*module.body, module.body[1]]))
    assert index.walk.taken == 0  # (walked again whole)
    assert list(index.parents).count(index.module.body[1]) == 1


# Edits that change what the calls of untouched statements resolve to: their qualnames must be
# worked out again (a taken call keeps its qualname only where every scope around it binds as
# before), and equal those of a whole walk.
REBINDINGS = [
    ("a builtin bound at the module's end", "# end\n", "# end\nprint = random.seed\n"),
    ("a name bound inside the edited function", "            loss.backward()\n", "            loss.backward()\n            nn = random\n"),
    ("a global statement in another function", "    optimiser = torch.optim.SGD(", "    global print\n    print = random.seed\n    optimiser = torch.optim.SGD("),
]


@pytest.mark.parametrize("old, new", [(o, n) for _, o, n in REBINDINGS], ids=[i for i, _, _ in REBINDINGS])
def test_calls_of_untouched_statements_resolve_anew_where_a_binding_around_them_changed(old, new):
    assert old in SCRIPT
    first = _edited(None, SCRIPT)
    before = {id(site.node): site.qualname for site in ModuleIndex(first, "pkg").calls}
    second = _edited(first, SCRIPT.replace(old, new, 1))
    index = _check(second)
    assert second.parsed.walk.taken > 0
    changed = [site.qualname for site in index.calls if id(site.node) in before and before[id(site.node)] != site.qualname]
    assert changed  # (a call kept from the first tree now names something else)


def test_calls_of_untouched_statements_keep_their_qualnames_where_no_binding_changed(monkeypatch):
    from torchrepro_lint.analysis.names import NameResolver

    first = _edited(None, SCRIPT)
    calls = len(ModuleIndex(first, "pkg").calls)
    second = _edited(first, SCRIPT.replace("            loss.backward()\n", "            loss.backward()\n            print(loss)\n"))
    resolved = []
    original = NameResolver.resolve
    monkeypatch.setattr(NameResolver, "resolve", lambda self, node, scope: resolved.append(node) or original(self, node, scope))
    index = ModuleIndex(second, "pkg")
    monkeypatch.undo()
    assert len(index.calls) == calls + 1
    # the new call and those around it in `train` (its scope is new) resolve; the others are kept
    assert 0 < len([n for n in resolved if isinstance(n, (cst.Name, cst.Attribute))]) < calls // 2
    _check(_edited(first, second.text))
