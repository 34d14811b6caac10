from __future__ import annotations

import libcst as cst

from torchrepro_lint.analysis.syntax import arg, string_value
from torchrepro_lint.findings import Severity
from torchrepro_lint.rules._ops import (
    EVIDENCE_DECISIONS,
    EVIDENCE_WHERE,
    GRAD_DECISIONS,
    GRAD_NOT_REPORTED,
    advice,
    assumed_note,
    assumed_programs,
    det_mode_status,
    matches,
    where,
    why,
)
from torchrepro_lint.catalog import load_catalog
from torchrepro_lint.rules.base import Example, Rule, last_names


# Seen on CUDA with torch 2.11.0 (tests/catalog/cuda/): 4-D bilinear grid_sample with zeros padding
# and align_corners=True runs cuDNN's sampler, whose backward did not raise in deterministic mode
# but varied between runs. From the release after 2.11 (2.13 at the latest) it raises as well.
CUDNN_GRID_SAMPLER_RAISES_FROM = (2, 12)


def _takes_cudnn_sampler(call: cst.Call) -> bool:
    """`align_corners=True` given, `mode` / `padding_mode` left at bilinear / zeros."""

    def left_at(position: int, name: str, default: str) -> bool:
        value = arg(call, position, name)
        return value is None or string_value(value) == default

    align = arg(call, 4, "align_corners")
    return (isinstance(align, cst.Name) and align.value == "True"
            and left_at(2, "mode", "bilinear") and left_at(3, "padding_mode", "zeros"))


class OpWithoutDeterministicImpl(Rule):
    code = "TRP402"
    name = "op-without-deterministic-impl"
    summary = (
        "An op with no deterministic CUDA implementation (`grid_sample` backward, `histc`, ...): it "
        "raises in deterministic mode, and varies otherwise."
    )
    why = (
        "Some ops (`grid_sample` and adaptive pooling backward, bicubic or area `interpolate`, "
        "3-D reflection padding, `histc`, `bincount(weights=...)`, `median(dim=...)`, NLL / "
        "cross-entropy on inputs with 3 or more dims, ...) have only an atomics-based CUDA kernel. "
        "Their results vary run to run, and once `torch.use_deterministic_algorithms(True)` is on "
        "they raise `RuntimeError` (in the backward pass for backward-only ops), often hours into "
        "training."
    )
    severity = Severity.WARNING
    fix = (
        "Use the deterministic alternative the message names (e.g. `mode='bilinear'` instead of "
        "`'bicubic'`, `nn.AvgPool2d` instead of a non-global `AdaptiveAvgPool2d`, flattened logits "
        "for the loss), or accept the op with `torch.use_deterministic_algorithms(True, "
        "warn_only=True)`, which warns instead of raising (the result still varies)."
    )
    where_reported = (
        "At every matching call, whether a program reaches it or not (helper branches aside, "
        "below); a module-form op (`nn.AdaptiveAvgPool2d((7, 7))`, `nn.CrossEntropyLoss()`) at its "
        "construction.",
        "Level: error when a program that runs the module enables deterministic mode without "
        "`warn_only` (the call will raise), otherwise warning. The message says which, where the "
        "mode is enabled, and the alternative.",
        "The ops, their devices and conditions are the package's op catalogue for the configured "
        "`torch-version` (`torchrepro-lint catalog` prints it); the message names the entry.",
        "NLL / cross-entropy needs an input shown to have 3 or more dims: a convolution output, an "
        "`interpolate` result, a sized factory, `view` / `permute` with 3 or more sizes, "
        "`transpose(1, 2)`; also through the calls of an `nn.CrossEntropyLoss()` instance built in "
        "the same class or function. Its target counts as class indices unless shown to be "
        "floating (probabilities).",
        "`histc` needs an input shown to be floating. `interpolate(mode='area')` raises for every "
        "valid input rank, so its rank need not be known.",
        "Forward ops (`histc`, `bincount(weights=...)`, `median(dim)`, the NLL loss, ...) raise "
        "whether or not gradients flow, so `no_grad` does not silence them.",
    ) + EVIDENCE_WHERE
    not_reported = (
        "Global average pooling: `AdaptiveAvgPool2d(1)` or `(1, 1)` is a mean, deterministic.",
        "`interpolate` / `nn.Upsample` with `mode='nearest'` (the default); bilinear or trilinear "
        "`interpolate` and `ReflectionPad2d`, which no longer raise through their Python entry "
        "points (TRP401 reports them).",
        "`bincount()` without weights, `median()` without `dim`.",
        "Cross-entropy on (N, C) logits, on flattened logits (`logits.view(-1, logits.size(-1))`), "
        "or with `reduction='none'`.",
        "A CUDA-only op in code that only programs hiding the GPUs reach (`CUDA_VISIBLE_DEVICES` "
        "set to `\"\"` or `\"-1\"`: a test suite run on the CPU). No CUDA kernel runs in such a "
        "program: neither its deterministic mode nor its reaching the op counts.",
    ) + GRAD_NOT_REPORTED
    decisions = (
        "Before torch 2.12, a 4-D `grid_sample` with `align_corners=True` (bilinear, zeros "
        "padding) takes cuDNN's sampler, which does not raise in deterministic mode but still "
        "varies run to run (seen on CUDA with 2.11.0). It stays an error under deterministic mode, "
        "and the message says the mode will not catch it.",
        "The CTC loss is assumed to take the native path, which raises: the cuDNN path needs "
        "int32 targets and more.",
    ) + EVIDENCE_DECISIONS + GRAD_DECISIONS
    options = (
        "`torch-version`: the release whose catalogue applies (default: the installed torch, read "
        "from package metadata, else 2.13). `kthvalue` raises only before 2.10, "
        "`MaxPool3d(return_indices=True)` only before 2.12 (checked on CUDA with 2.11.0); the "
        "`grid_sample` cuDNN case above holds before 2.12.",
        "`deterministic-functions`: helpers from installed packages that enable deterministic mode; "
        "a program that calls one counts as enabling it (the level becomes error).",
    )
    reference = (
        ("Reproducibility: Avoiding nondeterministic algorithms",
         "https://pytorch.org/docs/stable/notes/randomness.html#avoiding-nondeterministic-algorithms"),
        ("torch.use_deterministic_algorithms (lists the ops that raise)",
         "https://pytorch.org/docs/stable/generated/torch.use_deterministic_algorithms.html"),
    )
    # A candidate is a call resolving to one of the rule's catalogue APIs (any torch version),
    # or a tensor method of that name: either way the file spells the API's last name.
    triggers = last_names(
        api.name for entry in load_catalog().entries_for(rule="TRP402") if entry.report for api in entry.apis if api.report
    )
    hazards = (
        Example(
            '''import torch.nn as nn

class Classifier(nn.Module):
    def __init__(self, channels, classes):
        super().__init__()
        self.pool = nn.AdaptiveAvgPool2d((7, 7))  # <-- TRP402
        self.attention = nn.AdaptiveMaxPool2d(1)  # <-- TRP402
        self.fc = nn.Linear(channels * 49, classes)
''',
            "Adaptive pooling to a size other than 1, and adaptive max pooling of any size",
            fixed='''import torch.nn as nn

class Classifier(nn.Module):
    def __init__(self, channels, classes):
        super().__init__()
        self.pool = nn.AvgPool2d(2)  # 14x14 feature maps -> 7x7
        self.attention = nn.MaxPool2d(14)  # global max over 14x14 feature maps
        self.fc = nn.Linear(channels * 49, classes)
''',
        ),
        Example(
            '''import torch
import torch.nn.functional as F

def warp(image, flow_grid):
    return F.grid_sample(image, flow_grid, align_corners=False)  # <-- TRP402

def upscale(x):
    return F.interpolate(x, scale_factor=4, mode="bicubic")  # <-- TRP402

if __name__ == "__main__":
    torch.use_deterministic_algorithms(True)
    x = torch.randn(1, 3, 8, 8, requires_grad=True)
    upscale(warp(x, torch.rand(1, 8, 8, 2))).sum().backward()
''',
            "Raises in the backward pass once deterministic mode is on (reported as an error)",
        ),
        Example(
            '''import torch
import torch.nn as nn
import torch.nn.functional as F

class SegHead(nn.Module):
    def __init__(self, classes):
        super().__init__()
        self.classifier = nn.Conv2d(256, classes, 1)
        self.criterion = nn.CrossEntropyLoss(ignore_index=255)  # <-- TRP402

    def forward(self, features, mask):
        logits = self.classifier(features)
        return self.criterion(logits, mask)

def class_stats(pred: torch.Tensor, weights: torch.Tensor):
    hist = torch.histc(pred.float(), bins=10, min=0, max=9)  # <-- TRP402
    counts = torch.bincount(pred.flatten(), weights=weights.flatten())  # <-- TRP402
    middle = pred.float().median(dim=0)  # <-- TRP402
    return hist, counts, middle
''',
            "Cross-entropy on (N, C, H, W) logits, float `histc`, weighted `bincount`, `median(dim)`",
        ),
        Example(
            '''import torch

def top3(scores: torch.Tensor):
    return scores.kthvalue(3, dim=1)  # <-- TRP402
''',
            "torch 2.9: `kthvalue` still raised on CUDA (no longer from 2.10)",
            {"torch-version": "2.9"},
        ),
    )
    traps = (
        Example(
            '''import torch
import torch.nn as nn
import torch.nn.functional as F

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.gap = nn.AdaptiveAvgPool2d(1)
        self.gap2 = nn.AdaptiveAvgPool2d((1, 1))
        self.up = nn.Upsample(scale_factor=2, mode="nearest")
        self.criterion = nn.CrossEntropyLoss()

    def forward(self, x, labels):
        x = F.interpolate(self.up(x), scale_factor=2)
        logits = self.gap(x).flatten(1)
        return self.criterion(logits, labels)
''',
            "Global average pooling (a mean), nearest upsampling, cross-entropy on (N, C) logits",
        ),
        Example(
            '''import numpy as np
import torch
import torch.nn.functional as F

def summarize(pred: torch.Tensor, logits, targets):
    counts = torch.bincount(pred.flatten())
    center = pred.float().median()
    per_token = F.cross_entropy(logits, targets, reduction="none")
    flat = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))
    table = np.zeros(10)
    table.put([0, 2], [1.0, 2.0])
    return counts, center, per_token, flat, np.median(table, axis=0)
''',
            "`bincount()` without weights, `median()` without dim, `reduction='none'`, flattened logits, NumPy",
        ),
        Example(
            '''import torch
import torch.nn.functional as F
from torch.utils.data import Dataset

class Crops(Dataset):
    def __getitem__(self, i):
        image = torch.rand(1, 3, 64, 64)
        grid = torch.rand(1, 32, 32, 2) * 2 - 1
        return F.grid_sample(image, grid, align_corners=False)[0]

def evaluate(model, images, mode):
    with torch.no_grad():
        big = F.interpolate(images, scale_factor=2, mode="bicubic")
    return model(F.interpolate(big, scale_factor=0.5, mode=mode))
''',
            "Backward-only ops in a Dataset and under `torch.no_grad()`; an unknown mode",
        ),
        Example(
            '''import torch

def top3(scores: torch.Tensor):
    return scores.kthvalue(3, dim=1)
''',
            "torch 2.13: `kthvalue` no longer raises",
            {"torch-version": "2.13"},
        ),
    )

    def check_module(self, module, context):
        found = matches(module, context, self.code)
        if not found:
            return
        statuses = {cuda: det_mode_status(module, context, cuda) for cuda in (False, True)}
        version = context.config.torch_version
        for match in found:
            entry = match.entry
            status = statuses[entry.device == "cuda"]
            if match.assumed:  # judged by the programs that run it on CUDA
                status = det_mode_status(module, context, True, assumed_programs(module, context, match))
            if status.cpu_only:
                continue  # only programs that hide the GPUs run it: no CUDA kernel does
            backward = entry.phases == ("backward",)
            impl = "no deterministic" + ("" if entry.device in ("any", "cpu") else " CUDA") + " implementation"
            impl += " of its backward" if backward else ""
            if entry.until or entry.since or match.api.until or match.api.since:
                impl += " in torch %d.%d" % version
            todo = advice(match, version)
            silent_cudnn = (entry.id == "grid_sampler_backward" and version < CUDNN_GRID_SAMPLER_RAISES_FROM
                            and isinstance(match.site.node, cst.Call) and _takes_cudnn_sampler(match.site.node))
            head = f"`{match.shown}`" + (f" ({match.evidence})" if match.evidence else "") + assumed_note(match) + f" has {impl}"
            raises = "raises RuntimeError" + (" in the backward pass" if backward else "")
            tail = f" [catalogue: {match.ids}]"
            if status.strict is not None and silent_cudnn:
                severity = Severity.ERROR  # deterministic mode is claimed and silently not given
                message = (
                    f"{head}: with a 4-D input it takes cuDNN's sampler, which in torch {version[0]}.{version[1]} does "
                    f"not raise under the deterministic mode enabled at {where(context, status.strict)} but still "
                    f"varies run to run (a 5-D input raises); there is no deterministic alternative: keep the "
                    f"sampled input out of the graph, or accept the variation{tail}"
                )
            elif status.strict is not None:
                severity = Severity.ERROR
                message = (
                    f"{head}, so it {raises} under the deterministic mode enabled at {where(context, status.strict)}; "
                    f"{todo}, or pass `warn_only=True` to the call that enables it{tail}"
                )
            elif status.warn_only is not None:
                severity = Severity.WARNING
                message = (
                    f"{head}: deterministic mode is on with `warn_only=True` ({where(context, status.warn_only)}), "
                    f"so it only warns and its result still varies run to run; {todo}{tail}"
                )
            else:
                severity = Severity.WARNING
                message = (
                    f"{head} ({why(entry)}): results vary run to run, and deterministic mode would make it "
                    f"{raises.replace('raises', 'raise')}; {todo}{tail}"
                )
            yield context.report(self, module, match.site.node, message, severity)
