"""TRP602/TRP603 follow set values from where they start: a display, a comprehension, or a call
of `set()` / `frozenset()`. A module with none of them has no set value, so the rules ask the
dataflow nothing there (hash_order.set_sources), however many `.copy()` or `|` it has."""

from __future__ import annotations

from torchrepro_lint.analysis.dataflow.core import Flow

NO_SETS = """import torch.nn as nn


def merged(defaults, overrides, flags, extra):
    config = defaults.copy()
    config.update(overrides, **{"seed": 0})
    return list(config), list(flags | extra)


class Head(nn.Module):
    def __init__(self, layers):
        super().__init__()
        self.names = layers.copy()
        self.sizes = [p.numel() for p in self.parameters()]
"""


def test_no_set_origin_no_dataflow_question(lint, monkeypatch):
    asked: list[str] = []
    reaching_value = Flow.reaching_value

    def counting(self, name, *args, **kwargs):
        asked.append(name.value)
        return reaching_value(self, name, *args, **kwargs)

    monkeypatch.setattr(Flow, "reaching_value", counting)
    result = lint(NO_SETS, {"select": ["TRP602", "TRP603"]})
    assert result.findings == []
    assert asked == []


def test_a_set_origin_is_followed_through_names(lint):
    source = NO_SETS.replace("def merged(defaults, overrides, flags, extra):", "def merged(defaults, overrides, flags, extra):\n    flags = set(flags)")
    result = lint(source, {"select": ["TRP602"]})
    assert [f.code for f in result.findings] == []  # elements unknown: not strings
    tagged = source.replace("flags = set(flags)", "flags = {str(f) for f in flags}")
    assert [(f.code, f.row) for f in lint(tagged, {"select": ["TRP602"]}).findings] == [("TRP602", 8)]  # `list(flags | extra)`
