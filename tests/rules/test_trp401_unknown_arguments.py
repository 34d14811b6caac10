"""An argument that `**kwargs` may pass (`padding_mode`) leaves an op entry unknown: the matcher
then stops there, before the context predicates (requires_grad, device), which cost the most and
cannot make the entry match (matcher._Matcher._evaluate)."""

from __future__ import annotations

from torchrepro_lint.analysis.op_matching.requires_grad import RequiresGrad

BLOCK = """import torch.nn as nn


class Block(nn.Module):
    def __init__(self, channels, **kwargs):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, 3, padding=1, **kwargs)
        self.reflected = nn.Conv2d(channels, channels, 3, padding=1, padding_mode="reflect")
        self.plain = nn.Conv2d(channels, channels, 3, padding=1)

    def forward(self, x):
        return self.plain(self.reflected(self.conv(x)))
"""


def test_only_the_call_whose_arguments_match_is_asked_about_gradients(lint, monkeypatch):
    asked: list[int] = []
    holds = RequiresGrad.holds

    def counting(self, call):
        asked.append([a.keyword.value for a in call.site.node.args if a.keyword is not None])
        return holds(self, call)

    monkeypatch.setattr(RequiresGrad, "holds", counting)
    result = lint(BLOCK, {"select": ["TRP401"]})
    assert _rows(result) == [8]  # the reflect-padded conv; `**kwargs` may pass anything
    assert asked == [["padding", "padding_mode"]]  # asked for that call only


def test_an_unknown_padding_mode_is_not_reported(lint):
    result = lint(BLOCK.replace('padding_mode="reflect"', "padding_mode=mode"), {"select": ["TRP401"]})
    assert _rows(result) == []


def _rows(result) -> list[int]:
    return [finding.row for finding in result.findings if finding.code == "TRP401"]
