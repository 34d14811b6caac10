"""pipeline/read_values.py: a value is given again only while what it was computed from is the same."""

from pathlib import Path
from types import SimpleNamespace

from torchrepro_lint.pipeline.read_values import ReadValues


def _module(text):
    return SimpleNamespace(source=SimpleNamespace(text=text))


class Counting:
    def __init__(self):
        self.calls = 0

    def __call__(self, value):
        def compute():
            self.calls += 1
            return value
        return compute


def _project(modules, absent, load_errors=None, generation=0):
    return SimpleNamespace(modules=modules, load_errors=load_errors or {}, absent=absent, generation=generation)


def test_a_read_of_one_module_is_computed_again_only_for_another_module_object():
    kept, edited = _module("a = 1\n"), _module("b = 1\n")
    compute = Counting()
    first = ReadValues()
    assert first.of_module(("ir", "a"), kept, compute("A")) == "A"
    assert first.of_module(("ir", "a"), kept, compute("changed")) == "A"  # the same run: remembered
    first.of_module(("ir", "b"), edited, compute("B"))
    second = ReadValues(first.carried())
    assert second.of_module(("ir", "a"), kept, compute("changed")) == "A"
    assert second.of_module(("ir", "b"), _module("b = 2\n"), compute("B2")) == "B2"
    assert compute.calls == 3


def test_mentions_are_asked_again_only_of_the_modules_that_changed_and_only_if_the_word_moved():
    absent = set()
    a, b = _module("torch.manual_seed(0)\n"), _module("x = 1\n")
    first = ReadValues()
    compute = Counting()
    first.mentions(("mentions", "manual_seed"), "manual_seed", first.basis(_project({"a": a, "b": b}, absent)), compute("1"))
    # b edited without the word: still the value of before
    second = ReadValues(first.carried())
    basis = second.basis(_project({"a": a, "b": _module("x = 2\n")}, absent))
    assert second.mentions(("mentions", "manual_seed"), "manual_seed", basis, compute("other")) == "1"
    # b edited to mention it: computed again
    third = ReadValues(second.carried())
    basis = third.basis(_project({"a": a, "b": _module("torch.manual_seed(1)\n")}, absent))
    assert third.mentions(("mentions", "manual_seed"), "manual_seed", basis, compute("2")) == "2"
    # a module more: computed again
    fourth = ReadValues(third.carried())
    basis = fourth.basis(_project({"a": a, "b": b, "c": _module("")}, absent))
    assert fourth.mentions(("mentions", "manual_seed"), "manual_seed", basis, compute("3")) == "3"
    assert compute.calls == 3


def test_missing_imports_are_looked_for_again_when_the_absent_files_may_have_come():
    a = _module("import helpers\n")
    absent = {Path("helpers.py")}
    read = ("missing imports", (("helpers", "."),))
    compute = Counting()
    first = ReadValues()
    first.missing(read, first.basis(_project({"a": a}, absent)), compute("none"))
    second = ReadValues(first.carried())
    # another text of a, same modules and same absent set: the same files exist
    assert second.missing(read, second.basis(_project({"a": _module("import helpers\nx = 1\n")}, absent)), compute("x")) == "none"
    third = ReadValues(second.carried())
    # the server replaces its absent set when files may have appeared
    assert third.missing(read, third.basis(_project({"a": a}, set())), compute("found")) == "found"
    fourth = ReadValues(third.carried())
    # a file that failed to load now: looked for again
    project = _project({"a": a}, absent, load_errors={Path("b.py"): "bad"})
    assert fourth.missing(read, fourth.basis(project), compute("broken")) == "broken"
    assert compute.calls == 3


def test_without_a_shared_absent_set_missing_imports_are_never_carried():
    # The CLI has no set of absent files: disk may change between its runs.
    a = _module("import helpers\n")
    read = ("missing imports", (("helpers", "."),))
    compute = Counting()
    first = ReadValues()
    first.missing(read, first.basis(_project({"a": a}, None)), compute("none"))
    second = ReadValues(first.carried())
    assert second.missing(read, second.basis(_project({"a": a}, None)), compute("again")) == "again"


def test_the_basis_is_one_object_while_the_project_does_not_change():
    values = ReadValues()
    project = _project({"a": _module("")}, set())
    assert values.basis(project) is values.basis(project)
    before = values.basis(project)
    project.generation += 1
    assert values.basis(project) is not before


def test_a_result_that_matched_is_checked_again_only_where_a_module_changed():
    absent = set()
    a, b = _module("a\n"), _module("b\n")
    reads = [(("ir", "a"), "A"), (("content", "b"), "B"), (("summary", ("b", "uses", "f")), "S"), (("programs", "*"), "P")]
    asked: list = []
    now = {("ir", "a"): "A", ("content", "b"): "B", ("summary", ("b", "uses", "f")): "S", ("programs", "*"): "P"}

    def value_of(read):
        asked.append(read)
        return now[read]

    first = ReadValues()
    assert first.all_match(reads, value_of, _project({"a": a, "b": b}, absent))
    assert len(asked) == 4  # everything, the first time
    asked.clear()
    second = ReadValues(first.carried())
    assert second.all_match(reads, value_of, _project({"a": a, "b": b}, absent))
    assert asked == [("programs", "*")]  # no module changed: only what is not one module's
    asked.clear()
    third = ReadValues(second.carried())
    now[("content", "b")] = "B2"  # b edited
    assert not third.all_match(reads, value_of, _project({"a": a, "b": _module("b2\n")}, absent))
    assert ("ir", "a") not in asked and ("content", "b") in asked


def test_without_memory_across_runs_every_read_is_asked_every_time():
    reads = [(("ir", "a"), "A")]
    asked = []
    values = ReadValues(remember=False)
    project = _project({"a": _module("")}, set())
    for _ in range(2):
        assert values.all_match(reads, lambda read: asked.append(read) or "A", project)
    assert len(asked) == 2


def test_a_cached_quote_of_a_site_the_edited_module_no_longer_has_is_a_change_not_a_crash(tmp_path):
    # A cached result quoted line 3 of helpers.py (a "site" summary of node ref 9). After an
    # edit leaves the module fewer nodes, checking that read must say "changed": its reads are
    # checked in no particular order, so a read of the program facts that would show the
    # change first is not always looked at first.
    from torchrepro_lint.pipeline.digests import Digests
    from torchrepro_lint.pipeline.lowered_store import LoweredStore
    from torchrepro_lint.parsing.source import SourceFile
    from torchrepro_lint.project.index import ProjectIndex

    project = ProjectIndex(tmp_path, lowered=LoweredStore(None))
    module = project.add(SourceFile(tmp_path / "helpers.py", "import torch\n"))
    digests = Digests(project, [], project.lowered)
    stale = ("summary", (module.path, "site", str(len(module.nodes) + 5)))
    assert digests.of(stale) is None
    assert digests.of(("summary", (module.path, "site", "0"))) is not None


def test_values_found_in_a_run_are_checked_in_the_next_as_a_result_that_matched():
    # A program run again on every edit stores values found now: the next run asks only what is
    # not one module's, and the reads of the module that changed, that one first.
    values = [(("ir", "a"), "A"), (("content", "b"), "B"), (("programs", "*"), "P")]
    second, project = _found_then_b_changed(values)
    asked: list = []
    now = {("ir", "a"): "A", ("content", "b"): "B2", ("programs", "*"): "P"}
    assert not second.all_match(values, lambda read: asked.append(read) or now[read], project)
    assert asked == [("content", "b")]


def _found_then_b_changed(values):
    """(the next run's ReadValues, its project) after a run over modules a and b that found
    `values` (ReadValues.found_now); in the next run a is the same module, b another one."""
    absent = set()
    a, b = _module("a\n"), _module("b\n")
    first = ReadValues()
    first.basis(_project({"a": a, "b": b}, absent))
    first.found_now(values)
    return ReadValues(first.carried()), _project({"a": a, "b": _module("b2\n")}, absent)


def test_a_value_found_in_the_run_is_given_again_only_for_a_read_of_one_module():
    absent = set()
    module = _module("torch.manual_seed(0)\n")
    values = ReadValues()
    basis = values.basis(_project({"a": module}, absent))
    values.of_module(("ir", "a"), module, lambda: "A")
    values.mentions(("mentions", "seed"), "seed", basis, lambda: "M")
    asked: list = []
    found = values.valued([("ir", "a"), ("mentions", "seed")], lambda read: asked.append(read) or "now")
    assert found == [(("ir", "a"), "A"), (("mentions", "seed"), "now")]
    assert asked == [("mentions", "seed")]  # (which modules mention a word can change in a run)


def _lowered(functions: dict, top=()):
    ir_module = SimpleNamespace(top=top, functions=functions)
    return SimpleNamespace(_ir=ir_module, source=SimpleNamespace(text=""))


def test_a_recording_holds_across_an_edit_that_only_shifted_the_functions_it_read(monkeypatch):
    from torchrepro_lint.pipeline import read_values
    from torchrepro_lint.project.reads import IR_CODE, IR_FUNCTION, IR_TOP

    monkeypatch.setattr(read_values.ir.ModuleTable, "of", staticmethod(lambda module: SimpleNamespace(parts=lambda: ())))
    edited, origin, shifted, same = object(), object(), object(), object()
    origins = {id(shifted): origin}  # (function_reuse.unshifted: the IR it was shifted from)
    monkeypatch.setattr(read_values, "unshifted", lambda f: origins.get(id(f), f))
    before = _lowered({"main": object(), "train_one_epoch": origin, "log": same})
    after = _lowered({"main": edited, "train_one_epoch": shifted, "log": same})
    absent = set()
    first = ReadValues()
    first.basis(_project({"train.py": before}, absent))
    second = ReadValues(first.carried())
    project = _project({"train.py": after}, absent)
    assert second.still_hold([(IR_FUNCTION, ("train.py", "train_one_epoch")), (IR_TOP, "train.py")], project)
    assert second.still_hold([(IR_CODE, ("train.py", "log")), (IR_FUNCTION, ("train.py", "absent"))], project)
    assert not second.still_hold([(IR_FUNCTION, ("train.py", "main"))], project)  # the edited one
    assert not second.still_hold([("content", "train.py")], project)  # its text changed


def test_a_program_run_again_with_the_same_reads_asks_only_the_values_of_what_changed():
    values = [(("ir", "a"), "A"), (("content", "b"), "B"), (("mentions", "seed"), "M")]
    second, project = _found_then_b_changed(values)
    asked: list = []
    now = {("ir", "a"): "A2", ("content", "b"): "B2", ("mentions", "seed"): "M2"}
    again = second.found_again(values, lambda read: asked.append(read) or now[read], project)
    # a is the same module: its value is the last run's (not asked); b changed; mentions asked
    assert sorted(again) == sorted([(("ir", "a"), "A"), (("content", "b"), "B2"), (("mentions", "seed"), "M2")])
    assert sorted(asked) == [("content", "b"), ("mentions", "seed")]
    # the next run checks them as found in this one
    third = ReadValues(second.carried())
    asked.clear()
    assert third.all_match(again, lambda read: asked.append(read) or now[read], project)
    assert asked == [("mentions", "seed")]
    # values the last run did not see: none
    assert ReadValues(third.carried()).found_again(values, now.get, project) is None
