"""TRP401/402: ops reached through the project's own wrappers, and pad lists built by repetition.

A wrapper's `mode` / output size is the value the project's calls of it give (dispatch.passed,
ProjectUses.passed_values), a version-gated def included; a project alias of a torch function
(`interpolate = F.interpolate`, imported elsewhere) is that function."""

from __future__ import annotations

from conftest import reported

MODEL = """import torch.nn as nn
from ops import pool, resize


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 3, 3)

    def forward(self, x):
        y = self.conv(x)
        return {calls}
"""


def found(lint, files, code=None):
    result = lint(files, {"select": ["TRP401", "TRP402"]})
    assert not result.errors, result.errors
    return reported(result, lint.root, code)


OPS = """import torch.nn.functional as F


def resize(x, size, mode="bicubic"):
    return F.interpolate(x, size=size, mode=mode)


def pool(x, size):
    return F.adaptive_avg_pool2d(x, size)
"""


def test_a_wrapper_argument_is_what_its_callers_give(lint):
    calls = 'resize(y, (8, 8), mode="area") + pool(y, (7, 7))'
    assert found(lint, {"ops.py": OPS, "model.py": MODEL.format(calls=calls)}) == {
        ("ops.py", 5, "TRP402"),  # area interpolation
        ("ops.py", 9, "TRP402"),  # adaptive pooling to 7x7
    }
    # the default, where a call leaves the argument out
    assert found(lint, {"ops.py": OPS, "model.py": MODEL.format(calls="resize(y, (8, 8)) + pool(y, 1)")}) == {
        ("ops.py", 5, "TRP402"),
    }


def test_the_message_names_the_value_a_call_gives(lint):
    files = {"ops.py": OPS, "model.py": MODEL.format(calls='resize(y, (8, 8), mode="bilinear") + pool(y, 1)')}
    result = lint(files, {"select": ["TRP401"]})
    assert [(f.row, "with mode='bilinear', as a call of its function gives it" in f.message) for f in result.findings] == [(5, True)]


def test_deterministic_or_unknown_values_from_callers_stay_silent(lint):
    calls = 'resize(y, (8, 8), mode="nearest") + pool(y, (1, 1)) + resize(y, (4, 4), mode=self.mode) + pool(y, self.size)'
    assert found(lint, {"ops.py": OPS, "model.py": MODEL.format(calls=calls)}) == set()
    # a test that calls the wrapper does not say how the models use it
    test = 'from ops import resize\n\ndef test_area(x):\n    resize(x, (2, 2), mode="area")\n'
    calls = 'resize(y, (8, 8), mode="nearest") + pool(y, 1)'
    assert found(lint, {"ops.py": OPS, "model.py": MODEL.format(calls=calls), "tests/test_ops.py": test}) == set()


def test_a_builder_of_adaptive_pools(lint):
    source = """import torch.nn as nn


def make_pool(size):
    return nn.AdaptiveAvgPool2d(size)


class Head(nn.Module):
    def __init__(self):
        super().__init__()
        self.gap = make_pool(1)
        self.grid = make_pool({size})

    def forward(self, x):
        return self.gap(x) + self.grid(x)
"""
    assert found(lint, source.format(size="(7, 7)")) == {("example.py", 5, "TRP402")}
    assert found(lint, source.format(size="(1, 1)")) == set()


def test_a_version_gated_wrapper(lint):
    wrappers = """import torch
import torch.nn.functional as F

TORCH_VERSION = tuple(int(v) for v in torch.__version__.split(".")[:2])

if TORCH_VERSION >= (1, 11):
    def resample(x, grid, mode="bilinear"):
        return F.grid_sample(x, grid, mode=mode, align_corners=False)

    def upsample(x, factor, mode="nearest"):
        return F.interpolate(x, scale_factor=factor, mode=mode)
else:
    def upsample(x, factor, mode="nearest"):
        return F.interpolate(x, scale_factor=factor, mode=mode, align_corners=None)
"""
    model = """import torch.nn as nn
from wrappers import resample, upsample


class Warp(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 3, 3)

    def forward(self, x, grid):
        return upsample(resample(self.conv(x), grid), 2, mode={mode!r})
"""
    files = {"wrappers.py": wrappers, "model.py": model.format(mode="bilinear")}
    assert found(lint, files) == {("wrappers.py", 8, "TRP402"), ("wrappers.py", 11, "TRP401"), ("wrappers.py", 14, "TRP401")}
    files["model.py"] = model.format(mode="nearest")
    assert found(lint, files) == {("wrappers.py", 8, "TRP402")}


def test_a_project_alias_of_a_torch_function(lint):
    layers = """import torch.nn.functional as F

interpolate = F.interpolate
"""
    head = """import torch.nn as nn
from layers import interpolate


class Head(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 3, 3)

    def forward(self, x):
        return interpolate(self.conv(x), scale_factor=2, mode={mode!r}, align_corners=False)
"""
    assert found(lint, {"layers.py": layers, "head.py": head.format(mode="bilinear")}) == {("head.py", 11, "TRP401")}
    assert found(lint, {"layers.py": layers, "head.py": head.format(mode="nearest")}) == set()


def test_pad_lists_built_by_repetition(lint):
    source = """import torch.nn as nn
import torch.nn.functional as F


class Blur(nn.Module):
    def __init__(self, k):
        super().__init__()
        self.k = k
        self.conv = nn.Conv2d(3, 3, k)

    def forward(self, x):
        pad = [self.k // 2] * 4
        a = F.pad(x, pad, mode="reflect")
        b = F.pad(x, tuple(2 * [self.k, 0]), mode="reflect")
        c = F.pad(x, [self.k] * 2, mode="reflect")
        d = F.pad(x, [self.k] * self.k, mode="reflect")
        return self.conv(a + b + c + d)
"""
    # 4 values: 2-D reflection (TRP401); 2 values: 1-D reflection (TRP402); an unknown count: silent
    assert found(lint, source) == {("example.py", 13, "TRP401"), ("example.py", 14, "TRP401"), ("example.py", 15, "TRP402")}


def test_a_wrapper_used_only_by_a_method_run_without_gradients(lint):
    # an inference pipeline's preprocessing: the method that calls the wrapper runs only from
    # its `@torch.no_grad()` `__call__`, so the wrapper's backward-only op never runs backward
    source = """import torch
import torch.nn.functional as F


def _resize(image, size, interpolation="bicubic"):
    return F.interpolate(image, size=size, mode=interpolation)


class Pipeline:
    def _encode(self, image):
        return _resize(image, (224, 224))

    @torch.no_grad()
    def __call__(self, image):
        return self._encode(image)
"""
    assert found(lint, source) == set()
    assert found(lint, source.replace("_encode", "encode")) == set()  # a public method: its uses anywhere
    trained = source + "\n    def fit(self, image):\n        self._encode(image).sum().backward()\n"
    assert found(lint, trained) == {("example.py", 6, "TRP402")}
    # another class's private method of the same name, run with gradients, is not this one
    other = "from example import _resize\n\n\nclass Trainer:\n    def _encode(self, x):\n        return x\n\n" \
        "    def step(self, x):\n        self._encode(x).sum().backward()\n"
    assert found(lint, {"example.py": source, "trainer.py": other}) == set()
