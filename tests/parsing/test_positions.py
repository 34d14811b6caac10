"""Spans from the statement-level fast path must equal LibCST's whole-module positions."""

import ast
import re

import pytest
from libcst.metadata import MetadataWrapper, PositionProvider

from torchrepro_lint.analysis.module_index import ModuleIndex
from torchrepro_lint.parsing.positions import StatementSpans, _span, code_ranges
from torchrepro_lint.parsing.lines import line_texts, physical_lines
from torchrepro_lint.parsing.source import SourceFile

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
    "statements sharing lines": "a = (1,\n     2); b = 3\nif a: c = 1\nfor i in a: pass; d = 2\ndef f():\n    return [a,\n  4]; e = 5\n",
}


@pytest.mark.parametrize("whole_tree", [True, False], ids=["whole tree", "statement by statement"])
@pytest.mark.parametrize("name", sorted(TRICKY))
def test_every_node_placed_like_libcst(name, whole_tree):
    source = SourceFile(__import__("pathlib").Path(f"{name}.py"), TRICKY[name].lstrip("\n"))
    ModuleIndex(source)
    whole = MetadataWrapper(source.module, unsafe_skip_copy=True).resolve(PositionProvider)
    nodes = list(source.parents)
    assert len(nodes) > 10
    fast = 0
    for node in nodes:
        if whole_tree:
            spans = StatementSpans(source.text, source.module, ast.parse(source.text), source.parents)
        else:
            spans = StatementSpans(source.text, source.module, None, source.parents, bounds=source._statement_bounds)
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


def test_a_source_compiles_only_the_statement_whose_block_holds_a_finding():
    text = "import torch\n\nx = torch.ones(\n    3)\n\n" + TRICKY["nested blocks"].lstrip("\n") + "\ny = [i for i in range(3)]\n"
    source = SourceFile(__import__("pathlib").Path("m.py"), text)
    index = ModuleIndex(source)
    assert source.syntax_tree is None  # parsing checked the syntax but kept no CPython tree
    calls = {source.module.code_for_node(site.node).split("(")[0]: site.node for site in index.calls}
    whole = MetadataWrapper(source.module, unsafe_skip_copy=True).resolve(PositionProvider)
    assert source.span(calls["torch.ones"]) == _span(whole[calls["torch.ones"]], 0) == (3, 5, 4, 7)
    assert source.span(calls["range"]) == _span(whole[calls["range"]], 0)
    assert source._spans.top._compiled == {}  # top-level statements: their lines were known
    assert source.span(calls["torch.randn"]) == _span(whole[calls["torch.randn"]], 0) == (18, 29, 18, 43)
    assert set(source._spans.top._compiled) == {3}  # the class around the call, alone
    assert source.syntax_tree is None and source._spans._whole is None  # placed by the fast path


@pytest.mark.parametrize(
    "text",
    ["a = 1\nb = 2\n", "a = 1\r\nb = 2\r\n", "a\rb\nc\r\n", "x = 1\x0c\ny = 2", "", "\n\n", "no newline"],
)
def test_lines_break_where_python_does(text):
    expected = re.split(r"\r\n|\r|\n", text)  # not at form feeds, unlike str.splitlines
    assert line_texts(text) == expected
    with_endings = re.findall(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+", text)
    assert physical_lines(text) == with_endings
    assert "".join(physical_lines(text)) == text


@pytest.mark.parametrize("name", sorted(TRICKY))
def test_code_ranges_are_the_wrapper_s_positions(name):
    module = SourceFile(__import__("pathlib").Path(f"{name}.py"), TRICKY[name]).module
    wrapped = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    ranges = code_ranges(module)
    assert len(ranges) == len(wrapped)
    assert all(ranges[node] == wrapped[node] for node in wrapped)
