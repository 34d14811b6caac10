"""Every rule's own examples are tests: hazards reported exactly on their marked lines, traps not at
all, and a hazard's `fixed` code not reported, and exactly what the rule's autofix writes."""

from __future__ import annotations

import pytest

from conftest import MARK, lint_project, marked_lines, reported, write_project
from torchrepro_lint.config import load_config
from torchrepro_lint.fixes.runner import fix_sources
from torchrepro_lint.rules import all_rules
from torchrepro_lint.rules.pages import fixed_files

CASES = [
    pytest.param(rule, kind, example, id=f"{rule.code}-{kind}-{i}")
    for rule in all_rules()
    for kind, examples in (("hazard", rule.hazards), ("trap", rule.traps))
    for i, example in enumerate(examples)
]


@pytest.mark.parametrize("rule,kind,example", CASES)
def test_example(tmp_path, rule, kind, example):
    config = {"select": [rule.code], **example.config}
    result = lint_project(tmp_path, example.files, config)
    assert not result.errors, result.errors
    found = reported(result, tmp_path, rule.code)
    expected = {m for m in marked_lines(example.files) if m[2] == rule.code}
    if kind == "hazard":
        assert expected, "a hazard example must mark the line it expects"
        assert found == expected
    else:
        assert found == set(), [f.message for f in result.findings]


FIXED_CASES = [
    pytest.param(rule, example, id=f"{rule.code}-hazard-{i}")
    for rule in all_rules()
    for i, example in enumerate(rule.hazards)
    if example.fixed is not None
]


@pytest.mark.parametrize("rule,example", FIXED_CASES)
def test_fixed_example_is_not_reported(tmp_path, rule, example):
    written = example.fixed if isinstance(example.fixed, dict) else {"": example.fixed}
    assert not marked_lines(written), "the fixed code keeps a `# <-- ` marker"
    result = lint_project(tmp_path, fixed_files(example), {"select": [rule.code], **example.config})
    assert not result.errors, result.errors
    assert reported(result, tmp_path, rule.code) == set(), [f.message for f in result.findings]


def unmarked(text: str) -> str:
    """The example's code without its `# <-- TRPxxx` markers (comments the fix would keep)."""
    return "\n".join(MARK.sub("", line).rstrip() for line in text.split("\n"))


@pytest.mark.parametrize("rule,example", [case for case in FIXED_CASES if case.values[0].fix_safety])
def test_autofix_writes_the_fixed_example(tmp_path, rule, example):
    """Where the rule's fix (of its declared safety) applies to the hazard, `check --fix` (with
    `--unsafe-fixes` for an unsafe fix) turns the hazard into exactly its `fixed` code."""
    files = {name: unmarked(text) for name, text in example.files.items()}
    write_project(tmp_path, files, {"select": [rule.code], **example.config})
    sources = {tmp_path / name: text for name, text in files.items()}
    outcome = fix_sources(sources, load_config([tmp_path]), unsafe=rule.fix_safety == "unsafe")
    if not outcome.applied:
        pytest.skip(f"{rule.code}'s fix does not apply to this example: its `fixed` is written by hand")
    assert {f.fix.applicability for f in outcome.applied} == {rule.fix_safety}, "the fix is of the rule's `fix_safety`"
    after = {**files, **{p.relative_to(tmp_path).as_posix(): t for p, t in outcome.fixed.items()}}
    assert after == {name: unmarked(text) for name, text in fixed_files(example).items()}


def test_every_rule_has_three_hazards_and_three_traps():
    for rule in all_rules():
        if rule.code == "TRP000":
            continue
        assert len(rule.hazards) >= 3 and len(rule.traps) >= 3, rule.code


def test_rule_metadata_is_complete():
    codes = [rule.code for rule in all_rules()]
    assert codes == sorted(set(codes))
    for rule in all_rules():
        assert rule.name and rule.summary and rule.why and rule.fix, rule.code
        assert rule.fix_safety in (None, "safe", "unsafe"), rule.code


def test_rng_recreated_with_a_seed_on_the_deterministic_path_is_not_reported(lint):
    source = """import random

class ShardStream:
    def __init__(self, deterministic, seed):
        self.rng = random.Random()
        self.deterministic = deterministic
        self.seed = seed

    def __iter__(self):
        if self.deterministic:
            self.rng = random.Random(self.seed)
        yield self.rng.random()
"""
    from conftest import reported

    assert reported(lint({"stream.py": source}, {"select": ["TRP103"]}), lint.root) == set()
