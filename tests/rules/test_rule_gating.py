"""Rule gating: the engine runs a per-file rule's check_module only on files whose text names
one of the rule's `triggers` (Rule.may_fire_in). The gate must be sound: it may skip a file
only where the rule cannot report anything, so findings with and without it are identical.
"""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

import pytest

from conftest import lint_project, marked_lines, write_project
from torchrepro_lint.config import load_config
from torchrepro_lint.pipeline import staging
from torchrepro_lint.pipeline.engine import lint_paths
from torchrepro_lint.rules import Rule, all_rules
from torchrepro_lint.rules.base import occurs

TESTS = Path(__file__).resolve().parents[1]
REPO = TESTS.parent

PER_FILE = [rule for rule in all_rules() if type(rule).check_module is not Rule.check_module]
UNGATED: set[str] = set()  # per-file rules without sound trigger words (none today)


def _examples(kinds=("hazard", "trap")):
    return [
        pytest.param(rule, example, id=f"{rule.code}-{kind}-{i}")
        for rule in all_rules()
        for kind in kinds
        for i, example in enumerate(rule.hazards if kind == "hazard" else rule.traps)
    ]


def _ungated(monkeypatch):
    monkeypatch.setattr(Rule, "may_fire_in", lambda self, text: True)
    monkeypatch.setattr(staging, "any_may_fire", lambda rules, text: True)  # (the engine's question)


def _both_ways(monkeypatch, run):
    """(findings, errors) of `run()` with the gate, and with it forced open."""
    gated = run()
    with monkeypatch.context() as m:
        _ungated(m)
        ungated = run()
    return (gated.findings, gated.errors), (ungated.findings, ungated.errors)


# -- the triggers themselves --------------------------------------------------------------------
def test_every_per_file_rule_has_triggers():
    assert {rule.code for rule in PER_FILE if not rule.triggers} == UNGATED
    assert {rule.code for rule in PER_FILE} >= {"TRP103", "TRP104", "TRP206", "TRP301", "TRP304", "TRP401", "TRP501", "TRP603"}


@pytest.mark.parametrize("rule,example", [p for p in _examples(("hazard",)) if p.values[0] in PER_FILE])
def test_hazard_examples_name_a_trigger(rule, example):
    """Every file where a rule's own hazard example expects a finding passes its gate."""
    marked = {name for name, _, code in marked_lines(example.files) if code == rule.code}
    assert marked
    for name in marked:
        assert rule.may_fire_in(example.files[name]), (rule.code, name, rule.triggers)


def test_triggers_match_whole_words_only():
    assert occurs("put", "x.put(i, v)") and occurs("put", "from torch import put\n")
    assert not occurs("put", "output = model(input)") and not occurs("put", "x.put_(i, v)")
    assert not occurs("glob", "global counter") and occurs("glob", "files = glob.glob('*')")
    assert occurs("num_workers", 'kwargs = {"num_workers": 4}')
    assert occurs("{", "s = {x}") and occurs("{", "d={1: 2}")
    assert occurs("seed", "random.seed()") and not occurs("seed", "seeded = 1")
    assert occurs("café", "x = café + 1") and not occurs("caf", "x = café + 1")  # (\w is Unicode's)
    assert occurs("x1", "y=x1") and not occurs("x1", "y = x12") and not occurs("x1", "y = _x1")


def test_identifier_words_are_found_as_the_whole_word_search_finds_them():
    """A word of word characters is looked up among the text's identifiers, not searched: the
    answer must be the regular expression's, at any edge of the text and next to any character."""
    from torchrepro_lint.rules.base import _occurs_in, _whole_word

    texts = ["put", " put", "put ", "input", "put_", "x.put(1)", "put\n", "é put", "puté", "9put", "put9", "'put'", "#put", ""]
    for text in texts:
        for word in ("put", "pu", "ut"):
            expected = word in text and _whole_word(word).search(text) is not None
            assert _occurs_in(text, word) is expected, (word, text)


# -- soundness: the same findings with the gate forced open -----------------------------------
@pytest.mark.parametrize("rule,example", _examples())
def test_examples_give_the_same_findings_without_the_gate(tmp_path, monkeypatch, rule, example):
    config = {"select": ["ALL"], **example.config}
    gated, ungated = _both_ways(monkeypatch, lambda: lint_project(tmp_path, example.files, config))
    assert gated == ungated


def _string_sources(path: Path) -> tuple[list[dict[str, str]], list[str]]:
    """Sources written inline in a test module: {"name.py": "..."} projects, and every other
    multi-line string constant (most are single-file sources; the others are harmless)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    projects, in_projects, strings = [], set(), []
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict) and node.keys and all(
            isinstance(k, ast.Constant) and isinstance(k.value, str) and k.value.endswith((".py", ".ipynb"))
            and isinstance(v, ast.Constant) and isinstance(v.value, str)
            for k, v in zip(node.keys, node.values)
        ):  # fmt: skip
            projects.append({k.value: v.value for k, v in zip(node.keys, node.values)})
            in_projects.update(id(v) for v in node.values)
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and "\n" in node.value.strip():
            if id(node) not in in_projects:
                strings.append(node.value)
    return projects, strings


def _corpus(root: Path) -> None:
    """Every Python file and notebook of the tests and the demo, the sources the tests write
    inline, notebooks of those, and project subclasses used under another name."""
    from notebooks.notebook_support import notebook

    for source in (TESTS, REPO / "examples"):
        for path in source.rglob("*"):
            hidden = any(part.startswith((".", "__")) for part in path.relative_to(source).parts[:-1])
            if path.suffix in (".py", ".ipynb") and not hidden:
                target = root / source.name / path.relative_to(source)
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(path, target)
    for n, path in enumerate(sorted(TESTS.rglob("test_*.py"))):
        projects, strings = _string_sources(path)
        for i, files in enumerate(projects):
            _write(root / "inline" / f"{n}-{path.stem}-{i}", files)
        for i, text in enumerate(strings):
            _write(root / "inline" / f"{n}-{path.stem}-s{i}", {"example.py": text})
        if path.parent.name == "notebooks":  # cells, some with magics: as notebooks too
            _write(root / "notebooks", {f"{path.stem}-{i}.ipynb": notebook(t) for i, t in enumerate(strings)})
            _write(root / "notebooks", {f"{path.stem}.ipynb": notebook(*strings)})
    _write(root / "subclasses", SUBCLASSES)


def _write(directory: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = directory / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


# Project subclasses of DataLoader and DistributedSampler, built (TRP301, TRP304) in a file that
# never names the library class, under their own names and through a renaming re-export.
SUBCLASSES = {
    "samplers.py": """from torch.utils.data import DataLoader, DistributedSampler


class ShardSampler(DistributedSampler):
    pass


class FastLoader(DataLoader):
    pass
""",
    "pkg/__init__.py": "from pkg.inner import ShardSampler as Renamed\n",
    "pkg/inner.py": "from samplers import ShardSampler\n",
    "train.py": """import samplers
from samplers import FastLoader, ShardSampler
from pkg import Renamed


def main(ds):
    loader = FastLoader(ds, num_workers=4)
    first = ShardSampler(ds)
    second = samplers.ShardSampler(ds)
    third = Renamed(ds)
    for epoch in range(10):
        for batch in loader:
            pass


if __name__ == "__main__":
    main(list(range(10)))
""",
}


def test_test_sources_give_the_same_findings_without_the_gate(tmp_path, monkeypatch):
    root = write_project(tmp_path, {}, {"select": ["ALL"]})
    _corpus(root)
    gated, ungated = _both_ways(monkeypatch, lambda: lint_paths([root], load_config([root])))
    assert gated == ungated
    per_file = {"TRP301", "TRP302", "TRP303", "TRP304", "TRP401", "TRP402", "TRP403", "TRP501", "TRP601", "TRP602", "TRP603"}
    assert {f.code for f in gated[0]} >= per_file  # the corpus exercises them
    subclasses = {(Path(f.path).name, f.row, f.code) for f in gated[0] if "/subclasses/" in f.path}
    assert subclasses >= {("train.py", 7, "TRP301"), *(("train.py", row, "TRP304") for row in (8, 9, 10))}


# -- the gate is really applied -------------------------------------------------------------------
def _spy(monkeypatch, rule) -> list[str]:
    """Names of the files handed to the rule's check_module, in order."""
    seen: list[str] = []
    original = type(rule).check_module

    def check_module(self, module, context):
        seen.append(module.source.path.name)
        return original(self, module, context)

    monkeypatch.setattr(type(rule), "check_module", check_module)
    return seen


PLAIN = "total = 0\nfor i in range(10):\n    total += i\nprint(total)\n"


@pytest.mark.parametrize("rule", PER_FILE, ids=lambda r: r.code)
def test_a_file_without_triggers_is_not_checked(tmp_path, monkeypatch, rule):
    hazard = rule.hazards[0].files
    assert "plain.py" not in hazard and not rule.may_fire_in(PLAIN)
    seen = _spy(monkeypatch, rule)
    result = lint_project(tmp_path, {**hazard, "plain.py": PLAIN}, {"select": [rule.code]})
    assert "plain.py" not in seen
    assert {name for name, _, code in marked_lines(hazard) if code == rule.code} <= set(seen)
    assert any(f.code == rule.code for f in result.findings)
    with monkeypatch.context() as m:
        _ungated(m)
        seen.clear()
        lint_project(tmp_path, {**hazard, "plain.py": PLAIN}, {"select": [rule.code]})
        assert "plain.py" in seen  # the spy sees every file when the gate is open
