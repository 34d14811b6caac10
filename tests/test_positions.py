"""Spans from the statement-level fast path must equal LibCST's whole-module positions."""

import ast

import pytest
from libcst.metadata import MetadataWrapper, PositionProvider

from torchrepro_lint.analysis.module_index import ModuleIndex
from torchrepro_lint.pipeline.positions import StatementSpans, _span
from torchrepro_lint.pipeline.source import SourceFile

TRICKY = {
    "nested blocks": '''
import torch

class Trainer:
    """Docs."""

    @staticmethod
    @torch.no_grad()
    def step(self, batch):
        for x in batch:
            while x:
                with torch.autocast("cuda"):
                    if x > 1:
                        y = torch.randn(3); z = y * 2
                    elif x:
                        y = 0
                    else:
                        y = torch.zeros(
                            3,
                            4,
                        )
        try:
            pass
        except ValueError as error:
            raise
        finally:
            del x
''',
    "continuation lines and strings": '''
total = (1 +
         2 +
    3)
text = """line one
  line two""" + f"{total!r:>10}"
call(a,
  b=[1,
2], c={"k": lambda q: q})
value = x if y \\
    else z
''',
    "decorators and comments": '''
# leading comment

@decorator(
    arg=1,
)
# between
@other
async def f(a, *, b=2, **kw):
    async with ctx() as c:
        async for item in c:
            await item
    return [i for i in range(3) if i]
''',
    "tabs and semicolons": "def f():\n\tx = 1; y = 2\n\tif x:\n\t\treturn y\n",
    "match and walrus": '''
match command:
    case [x, *rest] if (n := len(rest)) > 1:
        print(x, n)
    case _:
        pass
''',
    "form feed and CRLF": "x = 1\r\n\x0c\r\ndef g():\r\n    return torch.rand(2)\r\n",
}


@pytest.mark.parametrize("name", sorted(TRICKY))
def test_every_node_placed_like_libcst(name):
    source = SourceFile(__import__("pathlib").Path(f"{name}.py"), TRICKY[name].lstrip("\n"))
    ModuleIndex(source)
    whole = MetadataWrapper(source.module, unsafe_skip_copy=True).resolve(PositionProvider)
    nodes = list(source.parents)
    assert len(nodes) > 10
    fast = 0
    for node in nodes:
        spans = StatementSpans(source.text, source.module, ast.parse(source.text), source.parents)
        assert spans.span(node) == _span(whole[node], 0), type(node).__name__
        fast += spans._whole is None
    assert fast > len(nodes) // 2  # the fast path placed most of them (and was checked above)


def test_fast_path_is_taken_for_a_call_in_a_method():
    source = SourceFile(__import__("pathlib").Path("m.py"), TRICKY["nested blocks"].lstrip("\n"))
    index = ModuleIndex(source)
    call = next(site.node for site in index.calls if source.module.code_for_node(site.node).startswith("torch.randn"))
    spans = StatementSpans(source.text, source.module, ast.parse(source.text), source.parents)
    assert spans.span(call) == (13, 29, 13, 43)
    assert spans._whole is None  # the whole module's positions were never computed


def test_a_source_compiles_its_cpython_tree_only_to_place_a_finding():
    source = SourceFile(__import__("pathlib").Path("m.py"), TRICKY["nested blocks"].lstrip("\n"))
    index = ModuleIndex(source)
    assert source.syntax_tree is None  # parsing checked the syntax but kept no CPython tree
    call = next(site.node for site in index.calls if source.module.code_for_node(site.node).startswith("torch.randn"))
    assert source.span(call) == (13, 29, 13, 43)
    assert source.syntax_tree is not None and source._spans._whole is None  # placed by the fast path
