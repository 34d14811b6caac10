"""LibCST nodes hashed in C once a tree is parsed (parsing/node_hash.py), with the same meaning:
a node is equal only to itself, and dicts and sets keyed by nodes find exactly the same ones."""

import libcst as cst
from libcst._nodes.base import CSTNode

from torchrepro_lint.parsing.source import parse_unvalidated


def _node_classes():
    pending, seen = [CSTNode], []
    while pending:
        cls = pending.pop()
        seen.append(cls)
        pending.extend(cls.__subclasses__())
    return seen


def test_every_node_class_uses_the_identity_hash_of_object_after_a_parse():
    parse_unvalidated("x = 1\n")
    python_hashed = [cls.__name__ for cls in _node_classes() if cls.__hash__ is not object.__hash__]
    assert python_hashed == []
    assert cst.Name.__hash__ is object.__hash__


def test_nodes_keep_identity_semantics_in_dicts_and_sets():
    module = parse_unvalidated("a = f(x)\nb = f(x)\n")
    first, second = (line.body[0].value for line in module.body)
    assert first.deep_equals(second) and first != second  # equal code, two nodes
    table = {first: "first", second: "second"}
    assert table[first] == "first" and table[second] == "second"
    assert {first, second, first} == {first, second} and len({first, second}) == 2
    assert hash(first) == object.__hash__(first)
