"""The persistent cache and --jobs change how much work a run does, never what it reports."""

import gc
import json
import subprocess
import sys
import weakref
from pathlib import Path

import pytest

from conftest import check_json
from torchrepro_lint.pipeline import tree_budget
from torchrepro_lint.cli import main
from torchrepro_lint.project.index import ProjectIndex
from torchrepro_lint.parsing.source import SourceFile

PROJECT = {
    "train.py": """
import torch
from torch.utils.data import DataLoader
from helpers import make_model, fill

torch.backends.cudnn.benchmark = True

def main():
    model = make_model()
    loader = DataLoader(range(10), num_workers=4, shuffle=True)
    buffer = torch.empty(3)
    print(buffer.sum(), fill(buffer))
    for path in __import__("os").listdir("."):
        print(path)

if __name__ == "__main__":
    main()
""",
    "helpers.py": """
import torch
import torch.nn.functional as F

def make_model():
    return torch.nn.Linear(4, 2)

def fill(x):
    return F.interpolate(x[None, None], scale_factor=2, mode="bilinear")
""",
    "evaluate.py": """
import torch
from helpers import make_model

if __name__ == "__main__":
    torch.manual_seed(0)
    print(make_model()(torch.randn(2, 4)))
""",
}


def _project(tmp_path: Path, files: dict = PROJECT, select: str = "") -> Path:
    root = tmp_path / "proj"
    root.mkdir()
    (root / "pyproject.toml").write_text("[tool.torchrepro-lint]\n" + (f"select = ['{select}']\n" if select else ""))
    for name, code in files.items():
        (root / name).write_text(code.lstrip("\n"))
    return root


def test_findings_identical_with_and_without_cache_and_jobs(tmp_path, capsys):
    root = _project(tmp_path)
    code, plain, _, _ = check_json(capsys, root, "--no-cache", "--jobs", "1")
    assert code == 1 and len(plain) >= 3
    assert check_json(capsys, root, "--no-cache", "--jobs", "2")[1] == plain
    cache = str(tmp_path / "cache")
    cold = check_json(capsys, root, "--cache-dir", cache, "--jobs", "2")
    warm = check_json(capsys, root, "--cache-dir", cache, "--jobs", "1")
    assert cold[1] == plain and warm[1] == plain
    assert cold[2]["replayed"] is False and cold[2]["parsed"] >= 3
    assert warm[2]["replayed"] is True and warm[2]["parsed"] == 0


def test_editing_one_file_parses_only_what_depends_on_it(tmp_path, capsys):
    root = _project(tmp_path)
    cache = str(tmp_path / "cache")
    first = check_json(capsys, root, "--cache-dir", cache, "--jobs", "1")
    assert first[2]["programs_resolved"] == 2
    with (root / "evaluate.py").open("a") as handle:
        handle.write("# a comment\n")
    second = check_json(capsys, root, "--cache-dir", cache, "--jobs", "1")
    assert second[1] == first[1]
    assert second[2]["replayed"] is False
    # evaluate.py's IR did not change: no program is interpreted again, and the per-file
    # results of the files that do not read evaluate.py come from the cache. (The program
    # rules run again, since their lines could have moved, and parse where they report.)
    assert second[2]["programs_resolved"] == 0
    assert first[2]["cache_hits"] == 0 and second[2]["cache_hits"] >= 1
    # A real change: the program of train.py reads helpers.py, evaluate.py's program too.
    (root / "helpers.py").write_text(PROJECT["helpers.py"].replace("Linear(4, 2)", "Linear(4, 3)"))
    third = check_json(capsys, root, "--cache-dir", cache, "--jobs", "1")
    assert third[1] == check_json(capsys, root, "--no-cache")[1]


def test_a_comment_in_a_shared_helper_parses_that_file_only(tmp_path, capsys):
    # helpers.py is run by both programs and its functions are looked up by the op rules of
    # the other files; a comment changes none of what they read (IR, uses, facts).
    root = _project(tmp_path)
    cache = str(tmp_path / "cache")
    first = check_json(capsys, root, "--cache-dir", cache, "--jobs", "1")
    with (root / "helpers.py").open("a") as handle:
        handle.write("# a comment\n")
    second = check_json(capsys, root, "--cache-dir", cache, "--jobs", "1")
    assert second[1] == first[1]
    assert (second[2]["parsed"], second[2]["programs_resolved"], second[2]["replayed"]) == (1, 0, False)


RESIZE = {
    "ops.py": """
import torch.nn.functional as F

def resize(x):
    return F.interpolate(x, scale_factor=2, mode="bicubic")
""",
    "evaluate.py": """
import torch
from ops import resize

@torch.no_grad()
def evaluate(x):
    return resize(x)
""",
}


def test_a_use_in_another_file_that_changes_meaning_is_seen_through_the_cache(tmp_path, capsys):
    # resize's backward is nondeterministic, but it only ever runs under no_grad: no TRP402.
    # Dropping the decorator in evaluate.py must bring the finding in ops.py back, cache or not.
    root = _project(tmp_path, RESIZE, "TRP402")
    cache = str(tmp_path / "cache")
    assert check_json(capsys, root, "--cache-dir", cache)[1] == []
    with (root / "evaluate.py").open("a") as handle:
        handle.write("# a comment\n")
    quiet = check_json(capsys, root, "--cache-dir", cache, "--jobs", "1")
    assert quiet[1] == [] and quiet[2]["parsed"] == 1  # ops.py's result still holds
    (root / "evaluate.py").write_text(RESIZE["evaluate.py"].replace("@torch.no_grad()\n", ""))
    code, found, _, _ = check_json(capsys, root, "--cache-dir", cache, "--jobs", "1")
    assert [(Path(f["filename"]).name, f["location"]["row"], f["code"]) for f in found] == [("ops.py", 4, "TRP402")]
    assert found == check_json(capsys, root, "--no-cache")[1]


def test_cached_findings_follow_the_display_path_and_the_linted_files(tmp_path, capsys, monkeypatch):
    root = _project(tmp_path)
    cache = str(tmp_path / "cache")
    absolute = check_json(capsys, root, "--cache-dir", cache)[1]
    monkeypatch.chdir(root)
    relative = main(["check", "--output-format", "json", "--cache-dir", cache, "."])
    relative = json.loads(capsys.readouterr().out)
    assert [f["filename"] for f in relative] == [Path(f["filename"]).relative_to(root).as_posix() for f in absolute]
    # Only train.py linted now (as pre-commit does): nothing may be reported in the others.
    main(["check", "--output-format", "json", "--cache-dir", cache, "train.py"])
    subset = json.loads(capsys.readouterr().out)
    main(["check", "--output-format", "json", "--no-cache", "train.py"])
    assert subset == json.loads(capsys.readouterr().out)
    assert subset and {f["filename"] for f in subset} == {"train.py"}


QUOTING = {
    "train.py": """
import torch
from devices import pick

if __name__ == "__main__":
    torch.manual_seed(0)
    print(pick())
""",
    "devices.py": """
import torch

def pick():
    return torch.cuda.set_device(0)
""",
}


def test_a_message_quoting_another_file_follows_its_line(tmp_path, capsys):
    # TRP205 in train.py quotes `torch.cuda.set_device(0)` at devices.py:4.
    root = _project(tmp_path, QUOTING, "TRP205")
    cache = str(tmp_path / "cache")
    first = check_json(capsys, root, "--cache-dir", cache, "--jobs", "1")[1]
    assert [f["code"] for f in first] == ["TRP205"] and "devices.py:4" in first[0]["message"]
    with (root / "devices.py").open("a") as handle:
        handle.write("# a comment\n")
    second = check_json(capsys, root, "--cache-dir", cache, "--jobs", "1")
    assert second[1] == first and second[2]["parsed"] == 1
    (root / "devices.py").write_text("# moved down a line\n" + QUOTING["devices.py"].lstrip("\n"))
    third = check_json(capsys, root, "--cache-dir", cache, "--jobs", "1")[1]
    assert "devices.py:5" in third[0]["message"] and third == check_json(capsys, root, "--no-cache")[1]


def test_a_file_that_does_not_parse_does_not_stop_the_replay(tmp_path, capsys):
    root = _project(tmp_path)
    (root / "broken.py").write_text("def f(:\n")
    cache = str(tmp_path / "cache")
    first = check_json(capsys, root, "--cache-dir", cache)
    assert any(f["code"] == "TRP000" for f in first[1])
    second = check_json(capsys, root, "--cache-dir", cache)
    assert second[1] == first[1] and second[2]["replayed"] is True


def test_replay_notices_a_fixed_module_it_could_not_load(tmp_path, capsys):
    # Only train.py is linted; helpers.py is loaded to follow its import, and fails to parse.
    root = _project(tmp_path)
    (root / "helpers.py").write_text("def make_model(:\n")
    cache = str(tmp_path / "cache")

    def check_train(*options):
        main(["check", "--output-format", "json", "--statistics", *options, str(root / "train.py")])
        out, err = capsys.readouterr()
        return json.loads(out), json.loads(err.split("torchrepro-lint statistics: ", 1)[1].splitlines()[0])

    check_train("--cache-dir", cache)
    assert check_train("--cache-dir", cache)[1]["replayed"] is True
    (root / "helpers.py").write_text(PROJECT["helpers.py"].lstrip("\n"))
    found, stats = check_train("--cache-dir", cache)
    # The program of train.py now runs helpers.py: it is interpreted again, not taken from the cache.
    assert stats["replayed"] is False and stats["programs_resolved"] == 1
    assert found == check_train("--no-cache")[0]


SEEDED_BY_A_MODULE_TO_COME = {
    "train.py": """
import torch
from seeding import fix_seeds

fix_seeds()
model = torch.nn.Linear(2, 2)
""",
}


@pytest.mark.parametrize("linted", ["the project", "train.py alone"])
def test_a_module_that_an_import_missed_is_seen_when_it_appears(tmp_path, capsys, linted):
    # The import of `seeding` found nothing, so the seed was unknown (TRP101). The file that then
    # appears must be read: cached program facts and findings recorded that the import missed.
    root = _project(tmp_path, SEEDED_BY_A_MODULE_TO_COME)
    target = root if linted == "the project" else root / "train.py"
    cache = str(tmp_path / "cache")
    before = check_json(capsys, target, "--cache-dir", cache)[1]
    assert [f["code"] for f in before] == ["TRP101"]
    (root / "seeding.py").write_text("import torch\n\n\ndef fix_seeds():\n    torch.manual_seed(0)\n")
    assert check_json(capsys, target, "--cache-dir", cache)[1] == []
    assert check_json(capsys, target, "--no-cache")[1] == []


def test_corrupt_entries_are_ignored_with_a_warning(tmp_path, capsys):
    root = _project(tmp_path)
    cache = tmp_path / "cache"
    plain = check_json(capsys, root, "--cache-dir", str(cache))[1]
    for entry in cache.rglob("*"):
        if entry.is_file() and entry.name not in ("CACHEDIR.TAG", ".gitignore"):
            entry.write_bytes(b"\x80garbage")
    code, again, stats, err = check_json(capsys, root, "--cache-dir", str(cache))
    assert again == plain and stats["replayed"] is False
    assert "warning: ignoring unreadable cache entry" in err


def test_a_directory_that_is_not_a_cache_is_left_alone(tmp_path, capsys):
    root = _project(tmp_path)
    foreign = tmp_path / "data"
    foreign.mkdir()
    (foreign / "keep.txt").write_text("mine")
    code, found, stats, err = check_json(capsys, root, "--cache-dir", str(foreign))
    assert found == check_json(capsys, root, "--no-cache")[1]
    assert "is not a torchrepro-lint cache" in err
    assert sorted(p.name for p in foreign.iterdir()) == ["keep.txt"]


def test_cached_run_does_not_import_libcst(tmp_path):
    root = _project(tmp_path)
    command = [sys.executable, "-c", (
        "import sys; from torchrepro_lint.cli import main; code = main(sys.argv[1:]); "
        "print('libcst' in sys.modules, file=sys.stderr); sys.exit(code)"
    ), "check", "--cache-dir", str(tmp_path / "cache"), str(root)]
    first = subprocess.run(command, capture_output=True, text=True)
    second = subprocess.run(command, capture_output=True, text=True)
    assert first.stdout == second.stdout and first.returncode == second.returncode == 1
    assert first.stderr.strip().endswith("True") and second.stderr.strip().endswith("False")


@pytest.mark.parametrize("value", ["0", "x"])
def test_bad_jobs_value_is_a_usage_error(value, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["check", "--jobs", value, "."])
    assert exit_.value.code == 2
    assert "--jobs" in capsys.readouterr().err


# -- memory: released trees with automatic garbage collection off (as `torchrepro-lint` runs) --
def _tree_of(tmp_path):
    path = tmp_path / "model.py"
    path.write_text("import torch\n\n\nclass Net(torch.nn.Module):\n    def forward(self, x):\n        return x + 1\n")
    module = ProjectIndex(tmp_path, {}).add(SourceFile(path, path.read_text()))
    return module, weakref.ref(module.index)  # (LibCST nodes take no weak references; the index holds them)


def test_a_released_tree_is_freed_without_a_garbage_collection(tmp_path, monkeypatch):
    # The CLI runs with automatic collection off: indexing must leave no reference cycle that
    # reaches the index (its builder's bound-method table was one), or every released tree
    # would stay in memory until a collection.
    monkeypatch.setattr(tree_budget, "COLLECT_AFTER", 10**12)
    gc.collect()
    gc.disable()
    try:
        module, index = _tree_of(tmp_path)
        tree_budget._ReleasedTrees().release(module)
        assert index() is None
    finally:
        gc.enable()


@pytest.mark.parametrize("collect_after, freed", [(1, True), (10**12, False)])
def test_released_trees_caught_in_a_cycle_are_collected_every_so_often(tmp_path, monkeypatch, collect_after, freed):
    # A cycle elsewhere (a rule's closure, say) may still hold a tree: with automatic collection
    # off, the run collects after COLLECT_AFTER characters of released source.
    monkeypatch.setattr(tree_budget, "COLLECT_AFTER", collect_after)
    gc.collect()
    gc.disable()
    try:
        module, index = _tree_of(tmp_path)
        cycle: list = [module.index]
        cycle.append(cycle)
        del cycle
        tree_budget._ReleasedTrees().release(module)
        assert (index() is None) is freed
    finally:
        gc.unfreeze()  # (the collection froze what survived)
        gc.enable()


def test_missing_files_are_witnessed_by_the_deepest_existing_directory_above_them(tmp_path):
    from torchrepro_lint.pipeline.cache import missing_files_witnesses

    (tmp_path / "a" / "b").mkdir(parents=True)
    missing = [tmp_path / "a" / "b" / "x.py", tmp_path / "a" / "b" / "c" / "d" / "y.py", tmp_path / "a" / "z.py"]
    witnesses = missing_files_witnesses(missing)
    assert sorted(witnesses) == [f"directory:{tmp_path / 'a'}", f"directory:{tmp_path / 'a' / 'b'}"]
    before = witnesses[f"directory:{tmp_path / 'a' / 'b'}"]
    (tmp_path / "a" / "b" / "c").mkdir()  # on the way to y.py: the witness of both changes
    assert missing_files_witnesses(missing)[f"directory:{tmp_path / 'a' / 'b'}"] != before


def test_an_edited_source_of_the_linter_gets_a_fresh_cache_namespace(tmp_path):
    # A contributor edits a rule in a checkout (an editable install): the cache, keyed by the
    # version alone, would replay the old rule's findings. An installed package is not looked at.
    from torchrepro_lint.pipeline.cache import sources_fingerprint

    package = tmp_path / "checkout" / "torchrepro_lint"
    (package / "rules").mkdir(parents=True)
    rule = package / "rules" / "trp999.py"
    rule.write_text("CODE = 'TRP999'\n")
    before = sources_fingerprint(package)
    rule.write_text("CODE = 'TRP999'  # edited\n")
    sources_fingerprint.cache_clear()  # (the next run is a new process: a running one keeps the code it loaded)
    assert sources_fingerprint(package) not in ("", before)
    installed = tmp_path / "lib" / "site-packages" / "torchrepro_lint"
    installed.mkdir(parents=True)
    (installed / "cli.py").write_text("x = 1\n")
    assert sources_fingerprint(installed) == ""


def test_texts_digest_apart_from_their_neighbours():
    from torchrepro_lint.pipeline.cache import digest

    assert digest("a\0b") != digest("a", "b")  # a NUL in a text is not a separator
    assert digest("ab", "c") != digest("a", "bc")
    assert digest("x") != digest(b"x") and digest("x") != digest(("x",))
    assert digest("é") == digest("é") and len(digest("")) == 64
