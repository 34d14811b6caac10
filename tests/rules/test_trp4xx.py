"""Nondeterministic computation (TRP401-403): regressions and edge cases beyond the rules' examples.

Several cases restate, in small made-up code, patterns met in real repositories (segmentation
heads, GNN scatter code, detection post-processing, ViT checkpoint resizing); none is copied.
"""

from __future__ import annotations

import pytest
from conftest import reported

from torchrepro_lint.findings import Severity


def findings(result, code):
    return [f for f in result.findings if f.code == code]


def rows(lint, files, code, config=None):
    result = lint(files, {"select": [code], **(config or {})})
    assert not result.errors, result.errors
    return {row for _, row, _ in reported(result, lint.root, code)}


# -- TRP401: programs and levels --------------------------------------------------------------
SCATTER = """import torch

def pool(x, index, n):
    out = torch.zeros(n, x.size(1), device=x.device)
    return out.index_add_(0, index, x)
"""


def test_trp401_silent_when_every_program_enables_deterministic_mode(lint):
    files = {
        "ops.py": SCATTER,
        "train.py": "import torch\nfrom ops import pool\n\nif __name__ == '__main__':\n"
        "    torch.use_deterministic_algorithms(True, warn_only=True)\n    pool(torch.rand(4, 2), torch.tensor([0, 1, 0, 1]), 2)\n",
    }
    assert rows(lint, files, "TRP401") == set()


def test_trp401_reported_when_one_program_never_enables_it(lint):
    files = {
        "ops.py": SCATTER,
        "train.py": "import torch\nfrom ops import pool\n\nif __name__ == '__main__':\n"
        "    torch.use_deterministic_algorithms(True)\n    pool(torch.rand(4, 2), torch.tensor([0, 1]), 2)\n",
        "bench.py": "import torch\nfrom ops import pool\n\nif __name__ == '__main__':\n"
        "    pool(torch.rand(4, 2), torch.tensor([0, 1]), 2)\n",
    }
    result = lint(files, {"select": ["TRP401"]})
    [finding] = findings(result, "TRP401")
    assert (finding.row, finding.severity) == (5, Severity.WARNING)
    assert "`bench.py` never enables deterministic mode" in finding.message
    assert "[catalogue: index_add]" in finding.message
    assert "torch.use_deterministic_algorithms(True)" in finding.message


def test_trp401_deterministic_mode_switched_off_does_not_count(lint):
    source = SCATTER + "\nif __name__ == '__main__':\n    torch.use_deterministic_algorithms(False)\n    pool(torch.rand(2, 2), torch.tensor([0, 0]), 1)\n"
    assert rows(lint, source, "TRP401") == {5}


def test_trp401_deterministic_mode_enabled_by_a_project_helper(lint):
    files = {
        "ops.py": SCATTER,
        "utils.py": "import torch\n\ndef make_deterministic():\n    torch.use_deterministic_algorithms(True)\n",
        "train.py": "from ops import pool\nfrom utils import make_deterministic\n\nif __name__ == '__main__':\n"
        "    make_deterministic()\n    pool(None, None, 2)\n",
    }
    assert rows(lint, files, "TRP401") == set()



POOL3D_MODEL = "import torch.nn as nn\n\nclass Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.pool = nn.AvgPool3d(2)\n"
CPU_TESTS = (
    "import os\nimport torch\nfrom model import Net\n\nos.environ['CUDA_VISIBLE_DEVICES'] = {value!r}\n"
    "torch.use_deterministic_algorithms(True)\nnet = Net()\n"
)


@pytest.mark.parametrize("value, severity", [("", Severity.WARNING), ("-1", Severity.WARNING), ("0", Severity.ERROR)])
def test_deterministic_mode_of_a_program_that_hides_the_gpus_does_not_make_a_cuda_op_raise(lint, value, severity):
    # open_clip's tests hide the GPUs and enable deterministic mode: on the CPU a CUDA-only op
    # cannot raise, so the training program's view (no deterministic mode) decides the level.
    files = {
        "model.py": POOL3D_MODEL,
        "tests/test_net.py": CPU_TESTS.format(value=value),
        "train.py": "from model import Net\n\nif __name__ == '__main__':\n    Net()\n",
    }
    [finding] = findings(lint(files, {"select": ["TRP402"]}), "TRP402")
    assert finding.severity == severity


def test_a_cuda_op_run_only_by_programs_that_hide_the_gpus_is_not_reported(lint):
    files = {"model.py": POOL3D_MODEL, "tests/test_net.py": CPU_TESTS.format(value="")}
    assert rows(lint, files, "TRP402") == set()
    assert rows(lint, {**files, "train.py": "from model import Net\n\nNet()\n"}, "TRP402") == {6}

# -- TRP401: what counts as the op ------------------------------------------------------------
def test_trp401_name_resolution_aliases_and_a_user_function_of_the_same_name(lint):
    source = """import torch.nn as tnn
from torch.nn import functional as nnf
from torch.nn.functional import interpolate as resize

def interpolate(x, scale_factor, mode):
    return x

class Up(tnn.Module):
    def forward(self, x):
        a = nnf.interpolate(x, scale_factor=2, mode="bilinear")
        b = resize(x, scale_factor=2, mode="trilinear")
        c = interpolate(x, scale_factor=2, mode="bilinear")
        return a, b, c
"""
    assert rows(lint, source, "TRP401") == {10, 11}


def test_trp401_method_needs_a_tensor_receiver(lint):
    source = """import numpy as np
import pandas as pd
import torch

def f(table, graph, x: torch.Tensor, idx):
    arr = np.zeros(5)
    frame = pd.DataFrame()
    graph.index_add_(0, idx, x)
    graph.scatter_add(0, idx, x)
    arr.cumsum()
    frame.cumsum()
    return x.index_add(0, idx, x)
"""
    assert rows(lint, source, "TRP401") == {12}


def test_trp401_cpu_tensors_are_deterministic_for_cuda_only_ops(lint):
    source = """import torch

def f(idx, values):
    on_cpu = torch.zeros(10)
    on_cpu.index_add_(0, idx, values)
    on_gpu = torch.zeros(10, device="cuda")
    on_gpu.index_add_(0, idx, values)
    moved = torch.zeros(10).cuda()
    moved.scatter_add_(0, idx, values)
    back = on_gpu.cpu()
    back.scatter_add_(0, idx, values)
"""
    assert rows(lint, source, "TRP401") == {7, 9}


def test_trp401_cpu_only_ops_need_a_cpu_tensor(lint):
    source = """import torch

def f(x: torch.Tensor, idx, values):
    x.index_put_((idx,), values, accumulate=True)
    cpu = torch.zeros(10)
    cpu.index_put_((idx,), values, accumulate=True)
    cpu.put_(idx, values, accumulate=True)
    x.put_(idx, values, accumulate=True)
"""
    result = lint(source, {"select": ["TRP401", "TRP402"]})
    assert reported(result, lint.root) == {
        ("example.py", 6, "TRP401"),
        ("example.py", 7, "TRP401"),
        ("example.py", 8, "TRP402"),  # put_ accumulate on CUDA raises: TRP402, and not TRP401 too
    }


def test_trp401_counting_with_ones_or_integers_is_exact(lint):
    # GNN degree / count code: adding ones (or integers) gives the same result in any order.
    source = """import torch

def degree(index, n):
    out = torch.zeros(n, device=index.device)
    one = torch.ones(index.size(0), device=out.device)
    return out.scatter_add_(0, index, one)

def counts(x: torch.Tensor, index, n):
    count = x.new_zeros(n)
    count.scatter_add_(0, index, x.new_ones(x.size(0)))
    ints = torch.zeros(n, dtype=torch.long, device=x.device)
    ints.index_add_(0, index, index)
    total = x.new_zeros(n, x.size(1))
    return total.scatter_add_(0, index.view(-1, 1).expand_as(x), x)
"""
    assert rows(lint, source, "TRP401") == {14}


def test_trp401_counting_with_a_mask_cast_to_float_is_exact(lint):
    # Regression (open-instruct's padding-free DPO loss): tokens per segment are counted by
    # adding a float copy of a boolean mask; zeros and ones add up exactly in any order. A
    # weighted mask (mask times a float) is a real float sum and stays reported.
    source = """import torch

def kept_per_segment(labels, segment_ids, n):
    kept = (labels != -100).float()
    counts = torch.zeros(n, device=labels.device)
    counts.scatter_add_(0, segment_ids, kept)
    counts.index_add_(0, segment_ids, labels.ne(-100).to(torch.float32))
    weighted = torch.zeros(n, device=labels.device)
    weighted.index_add_(0, segment_ids, kept * labels.float())
    return counts, weighted
"""
    assert rows(lint, source, "TRP401") == {9}


def test_trp401_writing_one_constant_through_duplicate_indices_is_harmless(lint):
    source = """import torch

def mark(x: torch.Tensor, rows, cols, idx, src):
    x.index_put_((rows, cols), torch.tensor(1.0))
    x.scatter_(1, idx, torch.ones_like(x))
    x.index_copy_(0, idx, x.new_zeros(3, 4))
    x.index_put_((rows, cols), src)
    x.scatter_(1, idx, x * 2)
"""
    assert rows(lint, source, "TRP401") == {7, 8}


def test_trp401_scatter_with_a_scalar_value_is_not_flagged(lint):
    source = """import torch

def one_hot(labels: torch.Tensor, n):
    return torch.zeros(labels.size(0), n, device=labels.device).scatter_(1, labels[:, None], 1.0)
"""
    assert rows(lint, source, "TRP401") == set()


def test_trp401_cumsum_only_on_one_dimensional_floats(lint):
    source = """import torch

def f(x: torch.Tensor):
    a = torch.rand(100, device="cuda").cumsum(0)
    b = torch.rand(4, 100, device="cuda").cumsum(1)
    c = torch.arange(10).cumsum(0)
    d = x.cumsum(0)
    e = torch.cumsum(torch.randn(50), dim=0)
    return a, b, c, d, e
"""
    assert rows(lint, source, "TRP401") == {4}


def test_trp401_padding_by_pad_length_and_conv_padding_mode(lint):
    source = """import torch.nn as nn
import torch.nn.functional as F

PAD = (2, 2, 2, 2)

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv1d(3, 3, 3, padding=1, padding_mode="reflect")
        self.c2 = nn.Conv2d(3, 3, 3, padding=1, padding_mode="reflect")
        self.c3 = nn.Conv2d(3, 3, 3, padding=1, padding_mode="replicate")
        self.c4 = nn.Conv2d(3, 3, 3, padding=1)

    def forward(self, x, pad):
        a = F.pad(x, PAD, mode="reflect")
        b = F.pad(x, [1] * 6, mode="reflect")
        c = F.pad(x, (1, 1), mode="reflect")
        d = F.pad(x, pad, mode="reflect")
        e = F.pad(x, (1, 1, 1, 1), mode="replicate")
        return a, b, c, d, e
"""
    result = lint(source, {"select": ["TRP401", "TRP402"]})
    assert reported(result, lint.root) == {
        ("example.py", 9, "TRP402"),  # Conv1d reflect: ReflectionPad1d backward raises
        ("example.py", 10, "TRP401"),
        ("example.py", 11, "TRP401"),
        ("example.py", 15, "TRP401"),
        ("example.py", 16, "TRP402"),  # 6 values: ReflectionPad3d
        ("example.py", 17, "TRP402"),  # 2 values: ReflectionPad1d
        ("example.py", 19, "TRP401"),
    }


def test_trp401_and_trp402_unknown_or_conditional_modes(lint):
    source = """import torch.nn.functional as F

MODE = "bicubic"

def f(x, mode, fast):
    a = F.interpolate(x, scale_factor=2, mode=mode)
    b = F.interpolate(x, scale_factor=2, mode=MODE)
    c = F.interpolate(x, scale_factor=2, mode="bicubic" if fast else "linear")
    d = F.interpolate(x, scale_factor=2, mode="bilinear" if fast else "nearest")
    e = F.interpolate(x, **{"mode": "bilinear"})
    return a, b, c, d, e
"""
    result = lint(source, {"select": ["TRP401", "TRP402"]})
    assert reported(result, lint.root) == {("example.py", 7, "TRP402"), ("example.py", 8, "TRP402")}


# -- TRP401/402: where nothing is differentiated ----------------------------------------------
def test_backward_only_ops_without_gradients(lint):
    source = """import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset, IterableDataset

class Frames(IterableDataset):
    def __iter__(self):
        yield F.interpolate(torch.rand(1, 3, 8, 8), scale_factor=2, mode="bilinear")

class Resize:
    def __call__(self, image):
        return F.interpolate(image[None], size=(32, 32), mode="bicubic")[0]

def pad_batch(items):
    return F.pad(torch.stack(items), (1, 1, 1, 1), mode="reflect")

def evaluate(model, x):
    with torch.inference_mode():
        y = F.grid_sample(x, torch.rand(1, 4, 4, 2))
    with torch.no_grad():
        with torch.enable_grad():
            z = F.grid_sample(x, torch.rand(1, 4, 4, 2))
    with torch.set_grad_enabled(False):
        w = F.interpolate(x, scale_factor=2, mode="bicubic")
    return y, z, w

loader = DataLoader(Frames(), collate_fn=pad_batch)
"""
    result = lint(source, {"select": ["TRP401", "TRP402"]})
    assert reported(result, lint.root) == {("example.py", 21, "TRP402")}


def test_forward_ops_are_reported_under_no_grad_but_not_in_data_pipelines(lint):
    source = """import torch
import torch.nn.functional as F
from torch.utils.data import Dataset

@torch.no_grad()
def stats(x: torch.Tensor):
    return torch.histc(x.float(), bins=10), F.max_unpool2d(x, x.long(), 2)

class Samples(Dataset):
    def __getitem__(self, i):
        x = torch.rand(10)
        return torch.histc(x, bins=4), F.max_unpool1d(x[None, None], x.long()[None, None], 2)
"""
    result = lint(source, {"select": ["TRP402"]})
    # histc raises only on CUDA (a Dataset works on CPU tensors); max_unpool raises on CPU too.
    assert {row for _, row, _ in reported(result, lint.root, "TRP402")} == {7, 12}
    assert [f.column for f in findings(result, "TRP402") if f.row == 12] == [40]


def test_lightning_evaluation_steps_and_checkpoint_code(lint):
    source = """import torch
import torch.nn.functional as F
import lightning as L

class Model(L.LightningModule):
    def validation_step(self, batch, i):
        return F.interpolate(batch, scale_factor=2, mode="bicubic")

    def training_step(self, batch, i):
        return F.interpolate(batch, scale_factor=2, mode="bicubic")

def resize_pos_embed(posemb, size):
    return F.interpolate(posemb, size=size, mode="bicubic", align_corners=False)

def checkpoint_filter_fn(state_dict, model):
    state_dict["pos_embed"] = resize_pos_embed(state_dict["pos_embed"], (14, 14))
    return state_dict

def load_weights(model, path):
    state = torch.load(path)
    state["bias"] = F.interpolate(state["bias"], size=(7, 7), mode="bicubic")
    model.load_state_dict(state)
"""
    assert rows(lint, source, "TRP402") == {10}


def test_a_top_level_checkpoint_converter_is_not_differentiated(lint):
    # Regression (smollm's vision scripts): a script with no function loads a state dict,
    # resizes a position table with bicubic interpolation and saves it; nothing runs backward.
    # A top-level script that loads weights and then trains is still reported.
    converter = """import torch
import torch.nn.functional as F

weights = torch.load("vit.pt")
table = weights["pos"].reshape(1, 8, 8, 16).permute(0, 3, 1, 2)
if __name__ == "__main__":
    weights["pos"] = F.interpolate(table, size=(12, 12), mode="bicubic")
    torch.save(weights, "vit_12.pt")
"""
    finetune = """import torch
import torch.nn.functional as F

net = torch.nn.Conv2d(3, 3, 1).cuda()
net.load_state_dict(torch.load("start.pt"))
sgd = torch.optim.SGD(net.parameters(), lr=0.1)
for images in torch.load("batches.pt"):
    out = F.interpolate(net(images.cuda()), scale_factor=2, mode="bicubic")
    out.mean().backward()
    sgd.step()
"""
    assert rows(lint, {"convert.py": converter}, "TRP402") == set()
    assert rows(lint, {"finetune.py": finetune}, "TRP402") == {8}


def test_a_load_state_dict_hook_is_checkpoint_code(lint):
    # Regression (a Megatron ViT backbone in DeepSpeedExamples): a pre-hook given to
    # `_register_load_state_dict_pre_hook` resizes the saved position table as it loads; the
    # same resize in `forward` runs in the differentiated pass.
    source = """import torch.nn as nn
import torch.nn.functional as F

def widen(state_dict, prefix, *rest):
    grid = state_dict[prefix + "weight"].reshape(1, 1, 8, 8)
    state_dict[prefix + "weight"] = F.interpolate(grid, scale_factor=2, mode="bicubic").reshape(256, 1)

class Table(nn.Module):
    def __init__(self):
        super().__init__()
        self.rows = nn.Embedding(256, 1)
        self.rows._register_load_state_dict_pre_hook(widen)
        self.register_load_state_dict_post_hook(self.check)

    def check(self, module, keys):
        return F.interpolate(self.rows.weight.reshape(1, 1, 16, 16), size=(8, 8), mode="bicubic")

    def forward(self, grid):
        return F.interpolate(grid, scale_factor=2, mode="bicubic")
"""
    assert rows(lint, source, "TRP402") == {19}


def test_evaluation_branch_of_a_module_is_not_differentiated(lint):
    # A segmentation head returns its losses while training and upsamples its logits only for
    # inference: that output is never backpropagated. Only the plain `self.training` test counts.
    source = """import torch.nn as nn
import torch.nn.functional as F

class Decoder(nn.Module):
    def forward(self, feats, labels=None):
        logits = self.proj(feats)
        if self.training:
            return self.loss(logits, labels)
        else:
            return F.interpolate(logits, scale_factor=8, mode="bilinear")

    def predict(self, feats):
        if not self.training:
            feats = F.interpolate(feats, scale_factor=2, mode="bicubic")
        return feats

    def upsample(self, feats, labels):
        if self.training:
            return self.loss(feats, labels)
        elif labels is None:
            feats = F.interpolate(feats, scale_factor=2, mode="bicubic")
        return F.interpolate(feats, scale_factor=2, mode="bicubic")

class Refiner(nn.Module):
    def forward(self, feats, labels=None):
        if self.training:
            return self.loss(feats, labels)
        for _ in range(2):
            feats = F.interpolate(feats, scale_factor=2, mode="bilinear")
        return feats

class Mixed(nn.Module):
    def forward(self, feats, labels=None):
        feats = F.interpolate(feats, scale_factor=2, mode="bilinear")
        if self.training and labels is not None:
            return self.loss(feats, labels)
        if self.training:
            self.steps += 1
        return F.interpolate(feats, scale_factor=2, mode="bicubic")
"""
    # Mixed: the first resize also feeds the loss; `self.training and ...` leaves the rest
    # reachable in training; a training branch that does not return gates nothing.
    assert rows(lint, source, "TRP401") == {34}
    assert rows(lint, source, "TRP402") == {39}


def test_method_the_project_calls_only_without_gradients(lint):
    # A mask upscaler called only from no-grad entry points never runs a backward; the same
    # method reached from a differentiated forward does; a framework's subclass may have its
    # method called by the framework (unseen), so an explicit no-grad call proves nothing there;
    # a base class from another project module is the project's own.
    files = {
        "model.py": """import torch
import torch.nn as nn
import torch.nn.functional as F
from transformers import Trainer
from base import Base

class Masker(nn.Module):
    @torch.no_grad()
    def forward(self, x):
        return self.enlarge(self.body(x))

    def enlarge(self, masks):
        return F.interpolate(masks, scale_factor=4, mode="bilinear")

class Tuned(nn.Module):
    def forward(self, x):
        return self.widen(self.body(x))

    def widen(self, masks):
        return F.interpolate(masks, scale_factor=4, mode="bilinear")

class Fitter(Trainer):
    def compute_loss(self, model, inputs):
        return F.interpolate(model(inputs), scale_factor=2, mode="bilinear").mean()

class Tracker(Base):
    @torch.inference_mode()
    def track(self, frames):
        return self.rescale(frames)

    def rescale(self, frames):
        return F.interpolate(frames, scale_factor=2, mode="bilinear")
""",
        "base.py": """import torch.nn as nn

class Base(nn.Module):
    pass
""",
        "predict.py": """import torch
from model import Masker, Tuned, Fitter

@torch.no_grad()
def preview(masker, tuned, fitter, x):
    return masker.enlarge(x), tuned.widen(x), fitter.compute_loss(tuned, x)
""",
    }
    result = lint(files)
    assert {(name, row) for name, row, _ in reported(result, lint.root, "TRP401")} == {("model.py", 20), ("model.py", 24)}


def test_weight_resizing_helper_used_in_forward_is_reported(lint):
    # The same resizing helper, but a module calls it in forward: gradients reach the embedding.
    source = """import torch
import torch.nn as nn
import torch.nn.functional as F

def resample_pos_embed(posemb, size):
    return F.interpolate(posemb, size=size, mode="bicubic")

def unused_resize_rel_pos_table(table, size):
    return F.interpolate(table, size=size, mode="bicubic")

class ViT(nn.Module):
    def __init__(self):
        super().__init__()
        self.pos_embed = nn.Parameter(torch.zeros(1, 8, 7, 7))

    def forward(self, x):
        return x + resample_pos_embed(self.pos_embed, x.shape[-2:])
"""
    assert rows(lint, source, "TRP402") == {6}


def test_result_only_thresholded_is_not_differentiated(lint):
    # Detection / segmentation post-processing: upsampled masks are compared with 0.5.
    source = """import torch.nn.functional as F

def masks_to_binary(mask_logits, size):
    masks = F.interpolate(mask_logits[None], size, mode="bilinear", align_corners=False)[0]
    return masks.gt_(0.5)

def paste(mask_logits, size):
    mask = F.interpolate(mask_logits, size=size, mode="bilinear")
    mask = mask[0].sigmoid() > 0.5
    return mask.cpu()

def upsample_logits(logits, size):
    out = F.interpolate(logits, size=size, mode="bilinear")
    return out.sigmoid()

def padded_energy(wave):
    framed = F.pad(wave, [4, 4, 0, 0], mode="reflect")
    return framed.pow(2).mean().numpy()

def padded_power(wave):
    framed = F.pad(wave, [4, 4, 0, 0], mode="reflect")
    return framed.pow(2).mean()
"""
    # `.numpy()` refuses a tensor that requires grad, so a chain of math ending there proves none did.
    assert rows(lint, source, "TRP401") == {13, 21}


def test_function_used_only_from_inference_code_elsewhere(lint):
    files = {
        "utils/__init__.py": "",
        "utils/torch_utils.py": """import torch

def smart_inference_mode():
    def decorate(fn):
        return torch.inference_mode()(fn)
    return decorate
""",
        "utils/masks.py": """import torch.nn.functional as F

def crop(masks, boxes):
    return masks * boxes

def process_mask(protos, boxes, shape):
    masks = F.interpolate(protos[None], shape, mode="bilinear")[0]
    return crop(masks, boxes).gt_(0.5)

def upsample(protos, shape):
    return F.interpolate(protos[None], shape, mode="bilinear")[0]
""",
        "predict.py": """from utils.masks import process_mask, upsample
from utils.torch_utils import smart_inference_mode

@smart_inference_mode()
def run(protos, boxes):
    process = process_mask
    return process(protos, boxes, (64, 64)), upsample(protos, (64, 64))

def train_step(protos):
    return upsample(protos, (32, 32)).sum()

if __name__ == "__main__":
    run(None, None)
""",
    }
    result = lint(files, {"select": ["TRP401"]})
    assert reported(result, lint.root, "TRP401") == {("utils/masks.py", 11, "TRP401")}


# -- TRP402 ----------------------------------------------------------------------------------
BICUBIC = """import torch
import torch.nn.functional as F

def upscale(x):
    return F.interpolate(x, scale_factor=2, mode="bicubic")
"""


@pytest.mark.parametrize(
    "enable, severity, words",
    [
        ("torch.use_deterministic_algorithms(True)", Severity.ERROR, "raises RuntimeError in the backward pass under the deterministic mode enabled at "),
        ("torch.use_deterministic_algorithms(True, warn_only=True)", Severity.WARNING, "with `warn_only=True`"),
        ("torch.set_deterministic_debug_mode('error')", Severity.ERROR, "deterministic mode enabled at"),
        ("torch.manual_seed(0)", Severity.WARNING, "deterministic mode would make it raise"),
    ],
)
def test_trp402_level_follows_the_program(lint, enable, severity, words):
    source = BICUBIC + f"\nif __name__ == '__main__':\n    {enable}\n    upscale(torch.rand(1, 1, 4, 4))\n"
    [finding] = findings(lint(source, {"select": ["TRP402"]}), "TRP402")
    assert (finding.row, finding.severity) == (5, severity)
    assert words in finding.message
    assert "upsample_bicubic2d_backward" in finding.message
    assert "mode='bilinear'" in finding.message


def test_trp402_error_names_where_deterministic_mode_is_enabled(lint):
    files = {
        "ops.py": BICUBIC,
        "train.py": "import torch\nfrom ops import upscale\n\ndef main():\n    torch.use_deterministic_algorithms(True)\n"
        "    upscale(torch.rand(1, 1, 4, 4))\n\nif __name__ == '__main__':\n    main()\n",
    }
    [finding] = findings(lint(files, {"select": ["TRP402"]}), "TRP402")
    assert finding.severity == Severity.ERROR
    assert "train.py:5" in finding.message


def test_trp402_adaptive_pooling_output_sizes(lint):
    source = """import torch.nn as nn
import torch.nn.functional as F

SIZE = 7

class Net(nn.Module):
    def __init__(self, size):
        super().__init__()
        self.a = nn.AdaptiveAvgPool2d(1)
        self.b = nn.AdaptiveAvgPool2d((1, 1))
        self.c = nn.AdaptiveAvgPool2d(output_size=1)
        self.d = nn.AdaptiveAvgPool2d((None, 7))
        self.e = nn.AdaptiveAvgPool2d((1, None))
        self.f = nn.AdaptiveAvgPool2d(size)
        self.g = nn.AdaptiveAvgPool2d(SIZE)
        self.h = nn.AdaptiveAvgPool3d((1, 1, 1))
        self.i = nn.AdaptiveMaxPool3d(4)

    def forward(self, x):
        return F.adaptive_avg_pool2d(x, 1), F.adaptive_avg_pool1d(x, 5), F.adaptive_max_pool1d(x, 1)
"""
    assert rows(lint, source, "TRP402") == {12, 15, 20}


def test_trp402_area_interpolation_raises_for_every_rank(lint):
    source = """import torch.nn as nn
import torch.nn.functional as F

class Down(nn.Module):
    def __init__(self):
        super().__init__()
        self.down = nn.Upsample(scale_factor=0.5, mode="area")

    def forward(self, x):
        return F.interpolate(x, scale_factor=0.5, mode="area"), F.upsample(x, scale_factor=0.5, mode="area")
"""
    result = lint(source, {"select": ["TRP402"]})
    assert {f.row for f in findings(result, "TRP402")} == {7, 10}
    assert all("instead of `mode='area'`" in f.message for f in findings(result, "TRP402"))


def test_trp402_cross_entropy_needs_inputs_shown_to_have_three_or_more_dims(lint):
    source = """import torch
import torch.nn as nn
import torch.nn.functional as F

class Seg(nn.Module):
    def __init__(self):
        super().__init__()
        self.head = nn.Conv2d(8, 3, 1)
        self.loss = nn.CrossEntropyLoss(reduction="none")
        self.loss2 = nn.CrossEntropyLoss(label_smoothing=0.1)

    def forward(self, feats, mask, logits, targets, soft):
        out = self.head(feats)
        a = self.loss(out, mask)
        b = self.loss2(out, mask)
        c = F.cross_entropy(logits, targets)
        d = F.cross_entropy(logits.permute(0, 3, 1, 2), targets)
        e = F.cross_entropy(out, torch.softmax(soft, dim=1))
        f = F.nll_loss(F.log_softmax(logits.transpose(1, 2), dim=1), targets)
        g = F.cross_entropy(logits.reshape(-1, 3), targets.reshape(-1))
        h = F.cross_entropy(out, mask, reduction="sum")
        return a, b, c, d, e, f, g, h

def train(model, loader):
    criterion = nn.CrossEntropyLoss()
    for images, labels in loader:
        criterion(model(images), labels)
"""
    result = lint(source, {"select": ["TRP402"]})
    assert {f.row for f in findings(result, "TRP402")} == {10, 17, 19, 21}
    [module_form] = [f for f in findings(result, "TRP402") if f.row == 10]
    assert "called at line 15 on an input with 3 or more dims" in module_form.message


def test_trp402_shared_method_names(lint):
    source = """import numpy as np
import torch

def f(x: torch.Tensor, w: torch.Tensor, series, arr: np.ndarray):
    a = x.median()
    b = x.median(dim=1)
    c = x.median(1, keepdim=True)
    d = torch.median(x, 0)
    e = np.median(arr, axis=0)
    f = series.median(dim=1)
    g = torch.bincount(x)
    h = torch.bincount(x, weights=None)
    i = x.bincount(w)
    j = x.long().histc(bins=4)
    k = x.float().histc(bins=4)
    m = x.histc(bins=4)
    n = arr.put([0], [1.0])
    return a, b, c, d, e, f, g, h, i, j, k, m, n
"""
    assert rows(lint, source, "TRP402") == {6, 7, 8, 13, 15}


def test_trp402_antialias_and_torchscript_paths(lint):
    source = """import torch
import torch.nn.functional as F

def resize(x):
    return F.interpolate(x, size=(8, 8), mode="bilinear", antialias=True)

@torch.jit.script
def scripted(x):
    return F.interpolate(x, scale_factor=2.0, mode="bilinear")
"""
    result = lint(source, {"select": ["TRP401", "TRP402"]})
    assert reported(result, lint.root) == {("example.py", 5, "TRP402"), ("example.py", 9, "TRP402")}
    assert "upsample_linear_native_direct" in findings(result, "TRP402")[-1].message


def test_trp402_version_gates(lint):
    source = """import torch
import torch.nn as nn

def f(x: torch.Tensor):
    pool = nn.MaxPool3d(2)
    pool_idx = nn.MaxPool3d(2, return_indices=True)
    return x.kthvalue(2, dim=0), pool, pool_idx
"""
    assert rows(lint, source, "TRP402", {"torch-version": "2.9"}) == {5, 6, 7}
    assert rows(lint, source, "TRP402", {"torch-version": "2.10"}) == {5, 6}
    # 2.11.0 has no MaxPool3d decomposition yet (seen on CUDA: tests/catalog/cuda/)
    assert rows(lint, source, "TRP402", {"torch-version": "2.11"}) == {5, 6}
    assert rows(lint, source, "TRP401", {"torch-version": "2.11"}) == set()
    assert rows(lint, source, "TRP402", {"torch-version": "2.12"}) == {5}
    assert rows(lint, source, "TRP402", {"torch-version": "2.13"}) == {5}
    assert rows(lint, source, "TRP401", {"torch-version": "2.13"}) == {6}
    assert rows(lint, source, "TRP401", {"torch-version": "2.9"}) == set()
    message = findings(lint(source, {"select": ["TRP402"], "torch-version": "2.9"}), "TRP402")[-1].message
    assert "in torch 2.9" in message and "kthvalue_cuda" in message
    # The advice for MaxPool3d(2) names return_indices=True only where that path exists.
    def pool_message(version):
        found = findings(lint(source, {"select": ["TRP402"], "torch-version": version}), "TRP402")
        return next(f.message for f in found if f.row == 5)
    assert "pass `return_indices=True`" in pool_message("2.13")
    assert "pass `return_indices=True`" not in pool_message("2.11")
    assert "only from torch 2.12" in pool_message("2.11")


RESIZING_MODEL = """import torch
import torch.nn as nn
import torch.nn.functional as F


class PositionEmbedding(nn.Module):
    def __init__(self, size):
        super().__init__()
        self.embedding = nn.Parameter(torch.zeros(1, 8, size, size))
        self._register_load_state_dict_pre_hook(self._load_hook)

    @torch.no_grad()
    def _load_hook(self, state_dict, prefix, *args):
        stored = state_dict[prefix + "embedding"]
        state_dict[prefix + "embedding"] = self._resize_position_embedding(stored, self.embedding.shape[-1])

    @staticmethod
    def _resize_position_embedding(embedding, size):
        return F.interpolate(embedding, size=(size, size), mode="bilinear")

    def forward(self, x):
        return x + self.embedding
"""


def test_trp401_resizing_methods_of_a_no_grad_load_hook(lint):
    """Regression (torchtune's CLIP position embeddings): the resize runs in a no_grad
    load_state_dict hook, and only a test calls it otherwise."""
    test = "from model import PositionEmbedding\n\ndef test_resize():\n    PositionEmbedding._resize_position_embedding(None, 4)\n"
    result = lint({"model.py": RESIZING_MODEL, "tests/test_model.py": test}, {"select": ["TRP401"]})
    assert reported(result, lint.root) == set()
    # called from forward, with gradients: its backward runs
    in_forward = RESIZING_MODEL.replace(
        "return x + self.embedding", "return x + self._resize_position_embedding(self.embedding, x.shape[-1])"
    )
    result = lint({"model.py": in_forward}, {"select": ["TRP401"]})
    assert reported(result, lint.root) == {("model.py", 19, "TRP401")}


def test_trp402_grid_sample_cudnn_path_before_2_12(lint):
    """torch 2.11's cuDNN sampler neither raises nor repeats (tests/catalog/cuda/): the message says so."""
    source = """import torch
import torch.nn.functional as F

def warp(x, grid):
    a = F.grid_sample(x, grid, align_corners=True)
    b = F.grid_sample(x, grid, "bilinear", "zeros", True)
    c = F.grid_sample(x, grid, mode="nearest", align_corners=True)
    d = F.grid_sample(x, grid, padding_mode="border", align_corners=True)
    e = F.grid_sample(x, grid)
    return a, b, c, d, e

if __name__ == "__main__":
    torch.use_deterministic_algorithms(True)
    warp(torch.rand(1, 3, 8, 8, requires_grad=True), torch.rand(1, 8, 8, 2)).sum().backward()
"""
    def messages(version):
        found = findings(lint(source, {"select": ["TRP402"], "torch-version": version}), "TRP402")
        assert all(f.severity is Severity.ERROR for f in found)
        return {f.row: f.message for f in found}

    old = messages("2.11")
    assert set(old) == {5, 6, 7, 8, 9}
    silent = {row for row, message in old.items() if "cuDNN's sampler" in message}
    assert silent == {5, 6}
    assert "does not raise" in old[5] and "raises RuntimeError" not in old[5]
    assert "raises RuntimeError in the backward pass" in old[7]
    new = messages("2.13")
    assert set(new) == {5, 6, 7, 8, 9} and not any("cuDNN" in message for message in new.values())



# -- a branch a helper takes for one value of its parameter (dispatch.py) -------------------
POOLS = """import torch.nn as nn

def pool_nd(dims, *args, **kwargs):
    if dims == 1:
        return nn.AvgPool1d(*args, **kwargs)
    elif dims == 2:
        return nn.AvgPool2d(*args, **kwargs)
    elif dims == 3:
        return nn.AvgPool3d(*args, **kwargs)
    raise ValueError(dims)


def pool_for(x, shape="flat", size=2):
    if shape in ("cube", "volume"):
        return nn.AvgPool3d(size)(x)
    return nn.AvgPool2d(size)(x)
"""


def test_an_op_in_a_dimension_branch_is_reported_only_where_a_caller_takes_the_branch(lint):
    # An image model passes 2 (or a variable set from its config): the 3-D pool is never built.
    images = """import torch.nn as nn
from layers import pool_nd, pool_for

class Down(nn.Module):
    def __init__(self, dims=2):
        super().__init__()
        self.op = pool_nd(dims, kernel_size=2)
        self.flat = pool_nd(2, kernel_size=2)
        self.extra = pool_nd(*(3,), kernel_size=2)

    def forward(self, x):
        return self.op(x) + self.flat(x) + pool_for(x) + pool_for(x, "square")
"""
    assert rows(lint, {"layers.py": POOLS, "model.py": images}, "TRP402") == set()


@pytest.mark.parametrize(
    "call",
    ["pool_nd(3, kernel_size=2)", "pool_nd(dims=3, kernel_size=2)", "layers.pool_nd(3, 2)"],
)
def test_a_literal_that_selects_the_branch_reports_it(lint, call):
    video = f"""import torch.nn as nn
import layers
from layers import pool_nd

class Down(nn.Module):
    def __init__(self):
        super().__init__()
        self.op = {call}
"""
    assert rows(lint, {"layers.py": POOLS, "model.py": video}, "TRP402") == {9}


def test_a_value_in_a_tested_tuple_or_the_default_selects_the_branch(lint):
    volume = POOLS.replace('shape="flat"', 'shape="cube"')
    assert rows(lint, {"layers.py": volume, "model.py": "from layers import pool_for\n\ny = pool_for(None)\n"}, "TRP402") == {15}
    assert rows(lint, {"layers.py": POOLS, "model.py": "from layers import pool_for\n\ny = pool_for(None, 'volume')\n"}, "TRP402") == {15}

# -- TRP403 ----------------------------------------------------------------------------------
def test_trp403_module_detection_and_gating(lint):
    source = """import torch
import torch.nn as nn
import torch.nn.functional as F
import lightning as L

class Base(nn.Module):
    pass

class Child(Base):
    def forward(self, x):
        return F.dropout(x, 0.2)

class Duck:
    def forward(self, x):
        return F.dropout(x, 0.2)

class Plain:
    def apply(self, x):
        return F.dropout(x, 0.2)

class Early(nn.Module):
    def forward(self, x):
        if not self.training:
            return x
        return F.dropout(x, 0.2)

class Explicit(nn.Module):
    def forward(self, x, **kwargs):
        a = F.dropout(x, 0.2, True)
        b = F.dropout(x, p=0.0)
        c = F.dropout(x, 0.2, **kwargs)
        d = F.feature_alpha_dropout(x, 0.2)
        return a + b + c + d

class Lit(L.LightningModule):
    def training_step(self, batch, i):
        return F.dropout(batch, 0.5)
"""
    assert rows(lint, source, "TRP403") == {11, 15}


def test_trp403_attention_dropout(lint):
    source = """import torch.nn as nn
import torch.nn.functional as F

class Attn(nn.Module):
    def __init__(self, p):
        super().__init__()
        self.p = p
        self.attn_drop = nn.Dropout(p)

    def forward(self, q, k, v, dropout_p=0.0, **kw):
        a = F.scaled_dot_product_attention(q, k, v, None, self.p)
        b = F.scaled_dot_product_attention(q, k, v, dropout_p=self.attn_drop.p if self.training else 0.0)
        p = 0.0 if not self.training else self.p
        c = F.scaled_dot_product_attention(q, k, v, dropout_p=p)
        d = F.scaled_dot_product_attention(q, k, v, dropout_p=dropout_p)
        e = F.scaled_dot_product_attention(q, k, v, **kw)
        f = F.scaled_dot_product_attention(q, k, v)
        return a, b, c, d, e, f
"""
    result = lint(source, {"select": ["TRP403"]})
    [finding] = findings(result, "TRP403")
    assert finding.row == 11
    assert "dropout_p=self.p if self.training else 0.0" in finding.message


def test_trp403_message_and_fix_metadata(lint):
    from torchrepro_lint.rules import rule_by_code

    source = "import torch.nn as nn\nimport torch.nn.functional as F\n\nclass B(nn.Module):\n    def forward(self, x):\n        return F.dropout(x)\n"
    [finding] = findings(lint(source, {"select": ["TRP403"]}), "TRP403")
    assert "`F.dropout(x)` in `B.forward`" in finding.message
    assert "training=self.training" in finding.message
    rule = rule_by_code("TRP403")
    assert rule.fix_safety == "safe" and "training=self.training" in rule.fix


def test_op_on_the_data_input_of_a_top_level_model_is_not_differentiated(lint):
    # A super-resolution model upsamples its low-resolution conditioning image: data, no gradient.
    # The same op in a block that a model builds works on activations.
    files = {
        "blocks.py": """import torch.nn as nn
import torch.nn.functional as F

class Fuse(nn.Module):
    def forward(self, x, skip):
        return F.interpolate(x, size=skip.shape[-2:], mode="bilinear") + skip
""",
        "model.py": """import torch
import torch.nn as nn
import torch.nn.functional as F
from blocks import Fuse

class SuperRes(nn.Module):
    def __init__(self):
        super().__init__()
        self.fuse = Fuse()
        self.up = nn.Upsample(scale_factor=2, mode="bilinear")

    def forward(self, x, low_res=None):
        cond = F.interpolate(low_res, x.shape[-2:], mode="bilinear")
        return self.fuse(torch.cat([x, cond], 1), x) + self.up(x)
""",
        "train.py": """from model import SuperRes

def build():
    return SuperRes()
""",
    }
    result = lint(files, {"select": ["TRP401"]})
    assert reported(result, lint.root, "TRP401") == {("blocks.py", 6, "TRP401")}


def test_entries_of_a_top_level_model_batch_and_a_resized_argument_are_data(lint):
    # A policy given a batch dict resizes its camera image; another resizes its argument in
    # place (`frames = F.interpolate(frames, ...)`). Both read data. Once the name holds an
    # activation (after `frames = self.encode(frames)`), or in a loop that rebinds it, it is not.
    source = """import torch.nn as nn
import torch.nn.functional as F

class Policy(nn.Module):
    def forward(self, batch):
        image = F.interpolate(batch["camera"], size=(96, 96), mode="bilinear")
        return self.head(image)

class Video(nn.Module):
    def forward(self, frames, steps):
        frames = F.interpolate(frames, size=(64, 64), mode="bilinear")
        frames = self.encode(frames)
        return F.interpolate(frames, size=(32, 32), mode="bilinear")

class Pyramid(nn.Module):
    def forward(self, x):
        for level in range(3):
            x = F.interpolate(x, scale_factor=0.5, mode="bilinear")
            x = self.blocks[level](x)
        return x

def build():
    return Policy(), Video(), Pyramid()
"""
    assert rows(lint, source, "TRP401") == {13, 18}


def test_branch_taken_only_in_deterministic_mode_uses_the_deterministic_kernel(lint):
    # A mixture-of-experts combine picks its kernel by the mode: with it on, index_add_ runs its
    # deterministic implementation; with it off the other branch runs, and that one varies.
    source = """import torch

def combine(index, tokens, routed):
    out = torch.zeros(64, 16, device=tokens.device)
    if torch.are_deterministic_algorithms_enabled():
        out.index_add_(0, index, tokens)
    else:
        out.scatter_add_(0, routed, tokens)
    if not torch.are_deterministic_algorithms_enabled():
        out.index_add_(0, index, tokens)
    else:
        out.scatter_add_(0, routed, tokens)
    return out
"""
    assert rows(lint, source, "TRP401") == {8, 10}


def test_frozen_tables_resized_in_forward_are_not_differentiated(lint):
    # A fixed sin-cos position table (frozen parameter or buffer) is resized to the input: no
    # gradient reaches it. A trainable table, or one unfrozen later, does get one.
    source = """import torch
import torch.nn as nn
import torch.nn.functional as F

class Encoder(nn.Module):
    def __init__(self, fine_tune=False):
        super().__init__()
        self.fixed = nn.Parameter(torch.zeros(1, 8, 4, 4), requires_grad=False)
        self.register_buffer("grid", torch.zeros(1, 8, 4, 4))
        self.learned = nn.Parameter(torch.zeros(1, 8, 4, 4))
        self.thawed = nn.Parameter(torch.zeros(1, 8, 4, 4), requires_grad=False)
        if fine_tune:
            self.thawed.requires_grad = True

    def forward(self, x):
        size = x.shape[-2:]
        a = F.interpolate(self.fixed, size=size, mode="bicubic")
        b = F.interpolate(self.grid, size=size, mode="bicubic")
        c = F.interpolate(self.learned, size=size, mode="bicubic")
        d = F.interpolate(self.thawed, size=size, mode="bicubic")
        return x + a + b + c + d
"""
    assert rows(lint, source, "TRP402") == {19, 20}


def test_mode_assigned_in_branches_counts_every_value(lint):
    source = """import torch.nn.functional as F

def up(x, smooth, fast):
    mode = "nearest"
    if smooth:
        mode = "bicubic"
    a = F.interpolate(x, scale_factor=2, mode=mode)
    kind = "bicubic"
    if fast:
        kind = "linear"
    b = F.interpolate(x, scale_factor=2, mode=kind)
    return a, b
"""
    assert rows(lint, source, "TRP402") == {11}


def test_trp403_autograd_function_and_nested_helper(lint):
    source = """import torch
import torch.nn as nn
import torch.nn.functional as F

class Drop(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return F.dropout(x, 0.1)

class Net(nn.Module):
    def forward(self, x):
        def inner(y):
            return F.dropout(y, 0.1)
        return inner(x)
"""
    assert rows(lint, source, "TRP403") == {13}



def test_trp403_p_from_a_parameter_defaulting_to_zero_is_the_callers_choice(lint):
    # A diffusion sampler's opt-in noise dropout: `training=self.training` would switch it off in
    # the eval-mode sampling it exists for. A parameter with a nonzero default, or none, is still
    # reported: nothing there says dropping after eval() is wanted.
    source = """import torch
import torch.nn as nn
import torch.nn.functional as F

class Diffusion(nn.Module):
    def sample_step(self, x, temperature=1.0, noise_drop=0.0):
        noise = torch.randn_like(x) * temperature
        if noise_drop > 0.0:
            noise = F.dropout(noise, p=noise_drop)
        return x + noise

    def forward(self, x, drop=0.1, other=None):
        return F.dropout(x, drop) + F.dropout(x, other)
"""
    assert rows(lint, source, "TRP403") == {13}

# -- argument shapes (issue 16): what the code fixes, and unknowns that cannot change the verdict
def test_pad_list_of_names_has_a_known_length(lint):
    source = """import torch.nn.functional as F

def shift(images, amount, pads, extra):
    l, r, t, b = amount, amount, amount, amount
    padded = F.pad(images, [l, r, t, b], mode="reflect")
    border = (l, r)
    line = F.pad(images, border + (t, b), mode="replicate")
    unknown = F.pad(images, pads, mode="reflect")
    starred = F.pad(images, [*extra, l, r], mode="reflect")
    constant = F.pad(images, [l, r, t, b])
    return padded, line, unknown, starred, constant

def train(g, d, z, opt):
    d(shift(g(z), 2, None, ())).mean().backward()
    opt.step()
"""
    # reflect with 4 values: reflection_pad2d; `border + (t, b)` also has 4 (replication_pad2d);
    # a pad of unknown length, a starred display and constant padding stay silent
    assert rows(lint, source, "TRP401") == {5, 7}


def test_unknown_flag_or_kwargs_silence_only_where_they_change_the_verdict(lint):
    source = """import torch
import torch.nn as nn
import torch.nn.functional as F

class Resized(nn.Module):
    def __init__(self, n, smooth):
        super().__init__()
        self.table = nn.Parameter(torch.zeros(1, 8, n, n))
        self.smooth = smooth

    def forward(self, x, size, mode, **options):
        a = F.interpolate(self.table, size=size, mode="bicubic", antialias=self.smooth, **options)
        b = F.interpolate(self.table, size=size, mode="bicubic", **options)
        c = F.interpolate(self.table, size=size, **options)
        d = F.interpolate(self.table, size=size, mode=mode, antialias=self.smooth)
        e = F.interpolate(self.table, size=size, mode="nearest", antialias=self.smooth)
        return x + a + b + c + d + e
"""
    # antialias True or False: both bicubic backwards are TRP402, so the flag cannot matter and
    # `**options` cannot pass `mode` a second time; a mode that **options or a parameter supplies
    # is unknown; nearest is deterministic whatever antialias is
    assert rows(lint, source, "TRP402") == {12, 13}


def test_unknown_flag_that_decides_between_rules_stays_silent(lint):
    source = """import torch.nn as nn
import torch.nn.functional as F

class Up(nn.Module):
    def __init__(self, smooth):
        super().__init__()
        self.smooth = smooth
        self.proj = nn.Conv2d(4, 4, 1)

    def forward(self, x):
        return F.interpolate(self.proj(x), scale_factor=2, mode="bilinear", antialias=self.smooth)
"""
    # bilinear: TRP401 without antialias, TRP402 with it; neither is reported on an unknown flag
    assert rows(lint, source, "TRP401") == set()
    assert rows(lint, source, "TRP402") == set()


def test_plain_helper_objects_built_only_without_gradients_are_not_differentiated(lint):
    source = """import torch
import torch.nn.functional as F

class Tiler:
    def __init__(self, tile):
        self.tile = tile

    def forward(self, x):
        return self.pad(x)

    def pad(self, x):
        extra = (1, 1, 1, 1)
        return F.pad(x, extra, "reflect")

class Pipeline:
    @torch.no_grad()
    def __call__(self, latents):
        self.tiler = Tiler(64)
        return self.tiler.forward(latents)

def train_step(model, batch, opt):
    helper = Tiler(32)
    model(helper.forward(batch)).mean().backward()
    opt.step()
"""
    # Tiler has a `forward` but no base class: not an nn.Module. Built in a no_grad `__call__`
    # only, its pad is never differentiated; once a training step builds one too, it is.
    only_pipeline = source.split("def train_step")[0]
    assert rows(lint, only_pipeline, "TRP401") == set()
    assert rows(lint, source, "TRP401") == {13}


def test_a_method_in_the_branch_where_the_value_is_not_a_tensor_is_not_an_op(lint):
    # whisper's pad_or_trim: `take` is NumPy's in the else branch, though the tensor branch
    # rebinds the same name to a tensor above it.
    source = """import numpy as np
import torch
import torch.nn.functional as F

def pad_or_trim(array, length=30):
    if torch.is_tensor(array):
        array = F.pad(array, [0, length])
    else:
        array = array.take(indices=range(length), axis=-1)
    return array
"""
    assert rows(lint, source, "TRP402") == set()


def test_trp401_writes_through_indices_that_cannot_repeat(lint):
    # Regressions (fairseq, Megatron-LM): an inverse permutation scattered from an argsort, and
    # rows copied back to the positions of a mask. Duplicate indices are the only hazard of
    # scatter_ with a tensor src, index_copy_ and index_put_ without accumulate: positions of a
    # 1-D mask, arange, randperm, unique values and sort orders cannot repeat.
    source = """import torch

def inverse(keys, n):
    perm = torch.argsort(keys)
    return torch.empty_like(perm).scatter_(0, perm, torch.arange(n, device=keys.device))

def restore(full: torch.Tensor, mask, rows):
    full.index_copy_(0, torch.nonzero(mask).flatten(), rows)
    kept = mask.nonzero()[:, 0]
    full.index_copy_(0, kept, rows)
    full.index_put_((torch.argwhere(mask).squeeze(1),), rows)
    return full

def shuffled(x: torch.Tensor, src: torch.Tensor, k):
    chosen = torch.randperm(x.size(0), device=x.device)[:k]
    x.index_copy_(0, chosen, src)
    _, order = x.sort(dim=0)
    x.scatter_(0, order, src)
    x.index_copy_(0, torch.sort(src)[1], src)
    x.index_copy_(0, src.sort().indices.cuda(), src)
    return x.index_copy(0, torch.unique(src), src)

def unknown(x: torch.Tensor, index, src: torch.Tensor, mask):
    x.index_copy_(0, index, src)
    x.index_copy_(0, torch.unique(src, return_inverse=True)[1], src)
    x.scatter_(1, torch.argsort(src, dim=0), src)
    x.index_put_((torch.argsort(src),), src)
    x.index_copy_(0, torch.nonzero(mask)[:, 1], src)
    x.index_copy_(0, torch.argsort(src).flatten(), src)
    x.scatter_add_(0, torch.arange(3), src)
"""
    assert rows(lint, source, "TRP401") == {24, 25, 26, 27, 28, 29, 30}


def test_deterministic_mode_gate_also_after_an_early_return(lint):
    # The same gate as the branch form (branch_gates.py): after `if not <mode on>: return ...`
    # only the deterministic kernels run.
    source = """import torch

def combine(index, tokens, routed):
    out = torch.zeros(64, 16, device=tokens.device)
    if not torch.are_deterministic_algorithms_enabled():
        return out.scatter_add_(0, routed, tokens)
    out.index_add_(0, index, tokens)
    return out
"""
    assert rows(lint, source, "TRP401") == {6}
