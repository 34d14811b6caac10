"""Every rule's own examples are tests: hazards reported exactly on their marked lines, traps not at all."""

from __future__ import annotations

import pytest

from conftest import lint_project, marked_lines, reported
from torchrepro_lint.rules import all_rules

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
