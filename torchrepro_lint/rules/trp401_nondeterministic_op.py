from __future__ import annotations

from torchrepro_lint.analysis.branch_gates import runs_only_in_deterministic_mode
from torchrepro_lint.rules._ops import (
    EVIDENCE_DECISIONS,
    assumed_note,
    assumed_programs,
    EVIDENCE_WHERE,
    GRAD_DECISIONS,
    GRAD_NOT_REPORTED,
    det_mode_status,
    matches,
    programs_phrase,
    raising_calls,
    why,
)
from torchrepro_lint.catalog import load_catalog
from torchrepro_lint.rules.base import Example, Rule, last_names


class NondeterministicOp(Rule):
    code = "TRP401"
    name = "nondeterministic-op"
    summary = (
        "An op that is nondeterministic on CUDA unless deterministic mode is on (`scatter_add_`, "
        "`index_add_`, ...), where the mode is not shown to be on."
    )
    why = (
        "`index_add_`, `scatter_add_`, `scatter_reduce` sums, bilinear `interpolate` backward, "
        "reflection and replication padding backward and the other ops of the catalogue add "
        "floating-point numbers with atomic operations (or write duplicate indices) in whatever order "
        "the GPU threads arrive, so the same seed gives different numbers on every run. Each of "
        "them has a deterministic implementation that PyTorch uses only when "
        "`torch.use_deterministic_algorithms(True)` is on."
    )
    fix = (
        "Call `torch.use_deterministic_algorithms(True)` at the start of every program that runs "
        "the op (and set `CUBLAS_WORKSPACE_CONFIG=:4096:8` on torch < 2.10): the op then uses its "
        "deterministic implementation."
    )
    where_reported = (
        "At the call; a module-form op (`nn.Upsample(mode='bilinear')`, `nn.ReflectionPad2d`) at "
        "its construction. Code that no program reaches is reported: nothing shows that its "
        "callers enable deterministic mode.",
        "The ops, their devices and conditions are the package's op catalogue for the configured "
        "`torch-version` (`torchrepro-lint catalog` prints it); the message names the entry.",
        "An op nondeterministic only on the CPU (`index_put_` / `put_` with `accumulate=True`) is "
        "reported only on a tensor shown to be on the CPU.",
    ) + EVIDENCE_WHERE
    not_reported = (
        "Code that every program running it puts in deterministic mode "
        "(`torch.use_deterministic_algorithms(True)`, with or without `warn_only=True`).",
        "The branch that runs only with the mode on, by the code's own test: "
        "`if torch.are_deterministic_algorithms_enabled():`, the `else` of its negation, or the "
        "code after `if not ...: return`.",
        "CUDA-only ops in code that only programs hiding the GPUs reach (`CUDA_VISIBLE_DEVICES` "
        "set to `\"\"` or `\"-1\"`: a test suite run on the CPU); such a program is not counted "
        "among those that run the op.",
        "The deterministic modes of the same APIs: `interpolate` / `nn.Upsample` with "
        "`mode='nearest'` (the default), `F.pad(..., mode='constant')`, `nn.ZeroPad2d`.",
        "`scatter_add_` / `index_add_` of values whose order cannot matter: ones (counting, node "
        "degrees), a boolean mask cast to float (`(labels != -100).float()`), integers.",
        "A write of one constant through possibly repeated indices: `scatter_(1, idx, 1.0)`, "
        "`index_put_(..., torch.tensor(1.0))`.",
        "`scatter_` with a tensor `src`, `index_copy_` or `index_put_` without `accumulate` (whose "
        "only hazard is duplicate indices) through an index that cannot repeat: `torch.arange`, "
        "`torch.randperm`, `torch.unique(x)`, or a mask's positions (`torch.nonzero(m)`, "
        "`m.nonzero()`, `torch.argwhere(m)`) made 1-D by `.flatten()`, `.view(-1)`, `.squeeze()` "
        "or `[:, 0]` (the mask is taken to be 1-D, as these forms imply). The index is followed "
        "through local variables, slices (`torch.randperm(n)[:k]`) and `.to()` / `.long()` / "
        "`.cuda()`; a parameter, or an index the module does not show, is still reported.",
        "The same ops through an `argsort` / `sort` order (`torch.sort(x)[1]`, `x.sort().indices`, "
        "`_, order = x.sort()`), where the op's index is 1-D (`index_copy_` always; a `scatter_` "
        "whose input, index or src is shown 1-D) or a `scatter_` runs along the sort's own dim.",
        "`cumsum` of integers (`mask.long().cumsum(dim=1)`), or of a tensor not shown to be 1-D: a "
        "multi-dim cumsum uses per-row scans, deterministic anyway.",
    ) + GRAD_NOT_REPORTED + (
        "A call that TRP402 reports: one finding per call.",
        "Convolutions, `nn.Embedding` and attention backward, `gather` / `index_select` / "
        "`repeat_interleave` backward, implicit indexing: never reported here (rules.md); TRP205 "
        "reports them once per program.",
    )
    decisions = (
        "`warn_only=True` counts as deterministic mode: the deterministic implementations are used "
        "then too.",
    ) + EVIDENCE_DECISIONS + GRAD_DECISIONS
    options = (
        "`torch-version`: the release whose catalogue applies (default: the installed torch, read "
        "from package metadata, else 2.13). `MaxPool3d(return_indices=True)`, for one, has a "
        "deterministic backward from 2.12 (TRP401) and none before (TRP402).",
        "`deterministic-functions`: helpers from installed packages that enable deterministic mode; "
        "a program that calls one counts as enabling it.",
    )
    reference = (
        ("Reproducibility: Avoiding nondeterministic algorithms",
         "https://pytorch.org/docs/stable/notes/randomness.html#avoiding-nondeterministic-algorithms"),
        ("torch.use_deterministic_algorithms (lists the ops)",
         "https://pytorch.org/docs/stable/generated/torch.use_deterministic_algorithms.html"),
        ("torch.are_deterministic_algorithms_enabled",
         "https://pytorch.org/docs/stable/generated/torch.are_deterministic_algorithms_enabled.html"),
    )
    # A candidate is a call resolving to one of the rule's catalogue APIs (any torch version),
    # or a tensor method of that name: either way the file spells the API's last name.
    triggers = last_names(
        api.name for entry in load_catalog().entries_for(rule="TRP401") if entry.report for api in entry.apis if api.report
    )
    hazards = (
        Example(
            '''import torch

def class_weights(labels, weights):
    totals = torch.zeros(10, device="cuda")
    totals.index_add_(0, labels, weights)  # <-- TRP401
    return totals

if __name__ == "__main__":
    torch.manual_seed(0)
    labels = torch.randint(0, 10, (100,), device="cuda")
    print(class_weights(labels, torch.rand(100, device="cuda")))
''',
            "Seeded, but deterministic mode is never enabled",
            fixed='''import torch

def class_weights(labels, weights):
    totals = torch.zeros(10, device="cuda")
    totals.index_add_(0, labels, weights)
    return totals

if __name__ == "__main__":
    torch.use_deterministic_algorithms(True)
    torch.manual_seed(0)
    labels = torch.randint(0, 10, (100,), device="cuda")
    print(class_weights(labels, torch.rand(100, device="cuda")))
''',
        ),
        Example(
            '''import torch

def aggregate(messages, index, num_nodes):
    out = torch.zeros(num_nodes, messages.size(1), device=messages.device)
    out.scatter_add_(0, index.unsqueeze(1).expand_as(messages), messages)  # <-- TRP401
    return out
''',
            "Message passing with `scatter_add_`",
        ),
        Example(
            '''import torch.nn as nn
import torch.nn.functional as F

class Decoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.up = nn.Upsample(scale_factor=2, mode="bilinear", align_corners=False)  # <-- TRP401
        self.pad = nn.ReflectionPad2d(1)  # <-- TRP401

    def forward(self, x):
        return F.pad(self.pad(self.up(x)), (1, 1, 1, 1), mode="reflect")  # <-- TRP401
''',
            "Bilinear upsampling and reflection padding: their backward is nondeterministic (module form at construction)",
        ),
        Example(
            '''import torch.nn as nn

class Encoder3d(nn.Module):
    def __init__(self):
        super().__init__()
        self.pool = nn.MaxPool3d(2, return_indices=True)  # <-- TRP401
        self.unpool_size = None
''',
            "torch 2.13: MaxPool3d(return_indices=True) has a deterministic path (TRP402 before 2.12)",
            {"torch-version": "2.13"},
        ),
        Example(
            {
                "graph.py": '''def aggregate(messages, index, out):
    out.index_add_(0, index, messages)  # <-- TRP401
    return out
''',
                "train.py": '''import torch
from graph import aggregate

if __name__ == "__main__":
    messages = torch.randn(6, 4, device="cuda")
    index = torch.tensor([0, 1, 1, 2, 2, 2], device="cuda")
    print(aggregate(messages, index, torch.zeros(3, 4, device="cuda")))
''',
            },
            "A receiver of unknown type: only tensors have `index_add_`, and the program runs on CUDA",
        ),
    )
    traps = (
        Example(
            '''import torch
import torch.nn.functional as F

def upsample(x):
    return F.interpolate(x, scale_factor=2, mode="bilinear")

if __name__ == "__main__":
    torch.use_deterministic_algorithms(True)
    print(upsample(torch.randn(1, 3, 8, 8)))
''',
            "The program enables deterministic mode: the deterministic implementation is used",
        ),
        Example(
            '''import torch.nn as nn
import torch.nn.functional as F

class Head(nn.Module):
    def __init__(self):
        super().__init__()
        self.up = nn.Upsample(scale_factor=2)
        self.pad = nn.ZeroPad2d(1)

    def forward(self, x):
        x = F.interpolate(x, scale_factor=2, mode="nearest")
        return F.pad(self.pad(self.up(x)), (1, 1), mode="constant")
''',
            "Nearest upsampling (the default mode) and constant padding are deterministic",
        ),
        Example(
            '''import numpy as np
import torch
import torch.nn.functional as F
from torch.utils.data import Dataset

class Resized(Dataset):
    def __getitem__(self, i):
        image = torch.rand(3, 64, 64)
        return F.interpolate(image[None], size=(32, 32), mode="bilinear")[0]

@torch.no_grad()
def upscale(x):
    return F.interpolate(x, scale_factor=2, mode="bilinear")

def histogram(values, bins):
    counts = np.zeros(bins)
    np.add.at(counts, values, 1)
    cpu_counts = torch.zeros(bins)
    cpu_counts.index_add_(0, torch.as_tensor(values), torch.ones(len(values)))
    return counts, cpu_counts
''',
            "Backward-only ops in a Dataset or under no_grad; NumPy; index_add_ on a CPU tensor",
        ),
        Example(
            '''import torch

def positions(mask):
    return mask.long().cumsum(dim=1) - 1

def cdf(probs):
    return torch.softmax(probs, dim=-1).cumsum(dim=-1)
''',
            "cumsum of integers, and row-wise cumsum of a multi-dim tensor (deterministic scans)",
        ),
        Example(
            '''import torch

def inverse_permutation(keys):
    order = torch.argsort(keys)
    positions = torch.arange(order.numel(), device=order.device)
    return torch.empty_like(order).scatter_(0, order, positions)

def scatter_back(full: torch.Tensor, mask, rows):
    return full.index_copy_(0, torch.nonzero(mask).flatten(), rows)
''',
            "Writes through indices that cannot repeat: an argsort order, the positions of a mask",
        ),
        Example(
            '''import torch.nn as nn

class Encoder3d(nn.Module):
    def __init__(self):
        super().__init__()
        self.pool = nn.MaxPool3d(2, return_indices=True)
''',
            "torch 2.9: no deterministic path for MaxPool3d yet (TRP402 reports it instead)",
            {"torch-version": "2.9"},
        ),
        Example(
            {
                "graph.py": '''def aggregate(messages, index, out):
    out.index_add_(0, index, messages)
    return out
''',
                "histogram.py": '''import torch
from graph import aggregate

if __name__ == "__main__":
    values = torch.rand(100)
    bins = (values * 10).long()
    print(aggregate(values, bins, torch.zeros(10)))
''',
            },
            "A receiver of unknown type that only a CPU program runs",
        ),
    )

    def check_module(self, module, context):
        found = matches(module, context, self.code)
        if not found:
            return
        statuses = {cuda: det_mode_status(module, context, cuda) for cuda in (False, True)}
        raising = raising_calls(module, context)
        for match in found:
            status = statuses[match.entry.device == "cuda"]
            if match.assumed:  # judged by the programs that run it on CUDA
                status = det_mode_status(module, context, True, assumed_programs(module, context, match))
            if status.always_on or status.cpu_only or id(match.site.node) in raising:
                continue
            if runs_only_in_deterministic_mode(module.index, match.site.node):
                continue  # `if torch.are_deterministic_algorithms_enabled(): ...`: the deterministic kernel runs
            yield context.report(
                self,
                module,
                match.site.node,
                f"`{match.shown}`{assumed_note(match)} is nondeterministic ({why(match.entry)}) and {programs_phrase(status)}; "
                f"call `torch.use_deterministic_algorithms(True)` so it uses its deterministic "
                f"implementation [catalogue: {match.ids}]",
            )
