"""The parse's fast paths give what LibCST's own slower paths give."""

from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from libcst._nodes.base import CSTNode

import torchrepro_lint
from torchrepro_lint.analysis.syntax import evaluated_string, expression_code
from torchrepro_lint.parsing.source import parse_unvalidated

LITERALS = [
    "'plain'", '"double"', "r'\\d+'", "'\\n'", "b'bytes'", "'''one\ntwo'''", '""""""', "''",
    "u'caf\u00e9'", "rb'\\x00'", "R'it\\'s'", "'a' 'b'", "f'{x}' 'a'", "'a' \\\n 'b'",
    "'''joined\\\nline'''", "'x' r'\\y' 'z'", "b'a' b'b'", "'tab\\there'",
]


@pytest.mark.parametrize("literal", LITERALS)
def test_evaluated_string_matches_libcst(literal):
    node = cst.parse_expression(literal)
    assert evaluated_string(node) == node.evaluated_value


@settings(max_examples=500, deadline=None)
@given(st.text(), st.sampled_from(["", "r", "u", "b", "R", "rb", "Br"]), st.sampled_from(["'", '"', "'''", '"""']))
def test_evaluated_string_matches_libcst_on_generated_literals(body, prefix, quote):
    try:
        node = cst.parse_expression(prefix + quote + body + quote)
        expected = node.evaluated_value
    except Exception:  # not a literal, or not one CPython accepts: nothing to compare
        return
    if isinstance(node, cst.SimpleString):
        assert evaluated_string(node) == expected


SOURCE = '''\
import torch  # a comment
@decorator(x=1)
class Model(torch.nn.Module, metaclass=M):
    """doc"""
    def forward(self, x: "Tensor", *a, y=2, **k) -> int:
        return (x @ y)[1:2, ...] if not a else {**k, 'b': [i async for i in z]}
lambda: (yield)
'''


def test_unvalidated_parse_builds_the_same_tree():
    tree = parse_unvalidated(SOURCE)
    assert tree.deep_equals(cst.parse_module(SOURCE))
    assert tree.code == SOURCE


def test_validation_is_back_after_the_parse():
    parse_unvalidated("x = 1\n")
    assert CSTNode.__dict__["__post_init__"].__name__ == "__post_init__"
    with pytest.raises(cst.CSTValidationError):
        cst.Name("not a name")


def test_path_states_hash_once_and_never_carry_a_hash_elsewhere():
    import pickle

    from torchrepro_lint.project.interpreter.states import PathState

    state = PathState(assumptions=frozenset({("args.det", True)}))
    assert hash(state) == hash(PathState(assumptions=frozenset({("args.det", True)})))
    changed = state.evolve(det_mode=True)
    assert "_hash" not in changed.__dict__ and changed != state  # its own hash, computed anew
    # string hashes differ between processes: a pickled state must not take its hash along
    copy = pickle.loads(pickle.dumps(state))
    assert "_hash" not in copy.__dict__ and copy == state and hash(copy) == hash(state)


TRICKY_EXPRESSIONS = [
    "f(a, b=1, *args, **kw)",
    "obj . attr ( x ,  )",
    "torch.manual_seed( seed )  ",
    "(a and (not b)) or c",
    "x not in ys and y is not None",
    "-x ** 2 + ~y // 3 @ m",
    "cfg['train'] [ 'seed' ]",
    "t[1:2, ::3]",
    "f(  # a comment\n    a,\n)",
    "g(a,\n  b)",
    "lambda x: x + 1",
    "[a, b] + (c,)",
    "f'{seed}' if ok else 'none'",
    "a if (b) else c",
    "call(*[x for x in y])",
]


@pytest.mark.parametrize("source", TRICKY_EXPRESSIONS)
def test_expression_code_matches_libcst_on_tricky_shapes(source):
    _every_expression_matches(cst.parse_module(f"value = {source}\n"))


def test_expression_code_matches_libcst_on_this_package():
    """Every expression of our own source: names, calls, comparisons and their whitespace."""
    for path in sorted(Path(torchrepro_lint.__file__).parent.rglob("*.py")):
        _every_expression_matches(cst.parse_module(path.read_text(encoding="utf-8")))


def _every_expression_matches(module: cst.Module) -> None:
    class Compare(cst.CSTVisitor):
        def on_visit(self, node) -> bool:
            if isinstance(node, cst.BaseExpression):
                assert expression_code(module, node) == module.code_for_node(node)
            return True

    module.visit(Compare())


def test_expression_code_leaves_libcst_out_of_plain_expressions():
    class NoGenerator:
        def code_for_node(self, node):
            raise AssertionError("the slow path was taken")

    expression = cst.parse_module("v = not cfg.get('seed', 0) == args.seed[0]\n").body[0].body[0].value
    assert expression_code(NoGenerator(), expression) == "not cfg.get('seed', 0) == args.seed[0]"
