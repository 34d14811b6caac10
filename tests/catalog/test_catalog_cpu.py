"""Run the catalogue on the CPU torch under torch.use_deterministic_algorithms(True).

* Every [ops] entry has at least one minimal call (a "case", ported from the research's
  shared/tools/verify_on_cuda.py). On CPU a case must raise RuntimeError naming the kernel
  exactly when its entry raises and applies on CPU (device "cpu" or "any"); every other case,
  [not_flagged] ones included, must not raise. Deterministic alternatives that apply on CPU
  must also give bitwise-identical results when repeated.
* ``verified.cpu`` in ops.toml must agree with what the cases do here.
* Fake CUDA tensors (FakeTensorMode, no GPU needed) check the meta-function alerts that
  torch.compile / torch.export hit ([compile.meta_alerts]) and their device/dtype conditions.
* A dispatch trace checks that APIs reach the ATen kernel family the catalogue says, where the
  routing does not depend on the device.
"""

from __future__ import annotations

import contextlib
import logging
from dataclasses import dataclass
from typing import Callable

import pytest

from torchrepro_lint.catalog import load_catalog, parse_version

torch = pytest.importorskip("torch")
nn = torch.nn
F = torch.nn.functional
pytestmark = [
    pytest.mark.filterwarnings("ignore:Failed to initialize NumPy"),
    # deprecations the cases trigger on purpose (legacy scatter reduce, quantized tensors, beta API)
    pytest.mark.filterwarnings("ignore:The reduce argument of torch.scatter"),
    pytest.mark.filterwarnings("ignore:index_reduce\\(\\) is in beta"),
    pytest.mark.filterwarnings("ignore:torch.quantize_per_tensor"),
]

CAT = load_catalog()
OPS = {e.id: e for e in CAT.entries}
TRAPS = {n.id: n for n in CAT.not_flagged}


@contextlib.contextmanager
def deterministic_mode():
    """torch.use_deterministic_algorithms(True) inside; the previous global setting after."""
    before = (torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled())
    torch.use_deterministic_algorithms(True)
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(before[0], warn_only=before[1])


@pytest.fixture
def deterministic():
    with deterministic_mode():
        yield


def test_deterministic_mode_restores_the_global_flag():
    state = lambda: (torch.are_deterministic_algorithms_enabled(),  # noqa: E731
                     torch.is_deterministic_algorithms_warn_only_enabled())
    before = state()
    try:
        for prior in [(False, False), (True, True)]:
            torch.use_deterministic_algorithms(prior[0], warn_only=prior[1])
            with deterministic_mode():
                assert state() == (True, False)
            assert state() == prior
            with pytest.raises(ZeroDivisionError), deterministic_mode():
                1 / 0
            assert state() == prior
    finally:
        torch.use_deterministic_algorithms(before[0], warn_only=before[1])


# ----------------------------------------------------------------------------- cases


@dataclass(frozen=True)
class Case:
    id: str  # case id (as in verify_on_cuda.py where it exists there)
    entry: str  # "ops.<id>" or "not_flagged.<id>"
    fn: Callable[[], list]
    aten: tuple[str, ...] = ()  # ATen ops the CPU dispatch trace must contain
    aten_absent: tuple[str, ...] = ()  # ... and must not contain


def _r(*shape, rg=False, dtype=torch.float32):
    t = torch.randn(*shape, dtype=dtype)
    return t.requires_grad_(True) if rg else t


def _bw(y, *xs):
    y.sum().backward()
    return [y.detach()] + [x.grad for x in xs]


def _idx(*vals):
    return torch.tensor(vals, dtype=torch.long)


def _scatter_setup(n=4096, m=16):
    return _r(n), torch.randint(0, m, (n,)), m


def _unpool(nd):
    pool = {1: nn.MaxPool1d, 2: nn.MaxPool2d, 3: nn.MaxPool3d}[nd](2, return_indices=True)
    unpool = {1: nn.MaxUnpool1d, 2: nn.MaxUnpool2d, 3: nn.MaxUnpool3d}[nd](2)
    y, i = pool(_r(*((1, 2) + (4,) * nd)))
    return [unpool(y, i)]


def _compiled_backward_mode_flip():
    fn = torch.compile(lambda t: (t.sin() * 2).sum(), backend="aot_eager")
    x = _r(8, rg=True)
    torch.use_deterministic_algorithms(False)
    try:
        y = fn(x)
    finally:
        torch.use_deterministic_algorithms(True)
    y.backward()
    return [x.grad]


def _module_bw(module, *shape):
    x = _r(*shape, rg=True)
    return _bw(module(x), x)


def _quantized_resize():
    q = torch.quantize_per_tensor(torch.tensor([-1.0, 0.0, 1.0, 2.0]), 0.1, 10, torch.quint8)
    return [q.resize_((10,)).dequantize()[:4]]


def _ctc():
    T, N, C, S = 20, 2, 5, 6
    lp = torch.randn(T, N, C).log_softmax(2).detach().requires_grad_()
    tg = torch.randint(1, C, (N, S))
    loss = nn.CTCLoss()(lp, tg, torch.full((N,), T, dtype=torch.long), torch.full((N,), S, dtype=torch.long))
    return _bw(loss, lp)


def _embedding_bag(mode):
    m = nn.EmbeddingBag(10, 3, mode=mode)
    y = m(torch.randint(0, 10, (64, 3)))
    y.sum().backward()
    return [y.detach(), m.weight.grad]


def _loss(fn, shape, target):
    return lambda: [fn(_r(*shape), target())]


def _cls_target(*shape):
    return lambda: torch.randint(0, 3, shape)


CASES = [
    # pooling
    Case("avg_pool3d_module", "ops.avg_pool3d_backward", lambda: _module_bw(nn.AvgPool3d(3), 2, 3, 4, 4, 4),
         aten=("avg_pool3d_backward",)),
    Case("avg_pool3d_functional", "ops.avg_pool3d_backward",
         lambda: (lambda x: _bw(F.avg_pool3d(x, 2), x))(_r(2, 3, 4, 4, 4, rg=True))),
    Case("adaptive_avg_pool2d_module", "ops.adaptive_avg_pool2d_backward",
         lambda: _module_bw(nn.AdaptiveAvgPool2d(3), 2, 3, 5, 5), aten=("_adaptive_avg_pool2d_backward",)),
    Case("adaptive_avg_pool1d_module", "ops.adaptive_avg_pool2d_backward",
         lambda: _module_bw(nn.AdaptiveAvgPool1d(3), 2, 3, 8), aten=("_adaptive_avg_pool2d_backward",)),
    Case("interpolate_area", "ops.adaptive_avg_pool2d_backward",
         lambda: (lambda x: _bw(F.interpolate(x, scale_factor=0.5, mode="area"), x))(_r(1, 2, 8, 8, rg=True)),
         aten=("_adaptive_avg_pool2d_backward",)),
    Case("adaptive_avg_pool2d_global_ok", "not_flagged.adaptive_avg_pool_global",
         lambda: _module_bw(nn.AdaptiveAvgPool2d(1), 2, 3, 5, 5), aten=("mean",),
         aten_absent=("_adaptive_avg_pool2d_backward",)),
    Case("adaptive_avg_pool1d_global_ok", "not_flagged.adaptive_avg_pool_global",
         lambda: (lambda x: _bw(F.adaptive_avg_pool1d(x, 1), x))(_r(2, 3, 8, rg=True)), aten=("mean",),
         aten_absent=("_adaptive_avg_pool2d_backward",)),
    Case("adaptive_avg_pool3d_module", "ops.adaptive_avg_pool3d_backward",
         lambda: _module_bw(nn.AdaptiveAvgPool3d(3), 2, 3, 5, 5, 5), aten=("_adaptive_avg_pool3d_backward",)),
    Case("adaptive_avg_pool3d_global_ok", "not_flagged.adaptive_avg_pool_global",
         lambda: (lambda x: _bw(F.adaptive_avg_pool3d(x, (1, 1, 1)), x))(_r(2, 3, 5, 5, 5, rg=True)),
         aten=("mean",), aten_absent=("_adaptive_avg_pool3d_backward",)),
    Case("adaptive_max_pool2d_module", "ops.adaptive_max_pool2d_backward",
         lambda: _module_bw(nn.AdaptiveMaxPool2d(3), 2, 3, 5, 5), aten=("adaptive_max_pool2d_backward",)),
    Case("adaptive_max_pool1d_module", "ops.adaptive_max_pool2d_backward",
         lambda: _module_bw(nn.AdaptiveMaxPool1d(3), 2, 3, 8), aten=("adaptive_max_pool2d_backward",)),
    Case("adaptive_max_pool3d_ok", "not_flagged.adaptive_max_pool3d_backward",
         lambda: _module_bw(nn.AdaptiveMaxPool3d(3), 2, 3, 5, 5, 5), aten=("adaptive_max_pool3d_backward",)),
    Case("max_pool3d_default", "ops.max_pool3d_backward_no_indices",
         lambda: _module_bw(nn.MaxPool3d(3), 2, 3, 6, 6, 6), aten=("max_pool3d_with_indices_backward",)),
    Case("max_pool3d_return_indices_ok", "ops.max_pool3d_backward_with_indices",
         lambda: (lambda x: _bw(nn.MaxPool3d(3, return_indices=True)(x)[0], x))(_r(2, 3, 6, 6, 6, rg=True))),
    Case("fractional_max_pool2d", "ops.fractional_max_pool2d_backward",
         lambda: _module_bw(nn.FractionalMaxPool2d(2, output_ratio=0.5), 2, 3, 8, 8),
         aten=("fractional_max_pool2d_backward",)),
    Case("fractional_max_pool3d", "ops.fractional_max_pool3d_backward",
         lambda: _module_bw(nn.FractionalMaxPool3d(2, output_ratio=0.5), 2, 3, 8, 8, 8),
         aten=("fractional_max_pool3d_backward",)),
    Case("max_unpool1d", "ops.max_unpool_forward", lambda: _unpool(1)),
    Case("max_unpool2d", "ops.max_unpool_forward", lambda: _unpool(2)),
    Case("max_unpool3d", "ops.max_unpool_forward", lambda: _unpool(3)),
    # upsampling
    Case("interpolate_linear", "ops.upsample_linear1d_backward",
         lambda: (lambda x: _bw(F.interpolate(x, scale_factor=2, mode="linear"), x))(_r(1, 2, 4, rg=True)),
         aten=("upsample_linear1d_backward",)),
    Case("upsample_module_linear", "ops.upsample_linear1d_backward",
         lambda: _module_bw(nn.Upsample(scale_factor=2, mode="linear"), 1, 2, 4)),
    Case("interpolate_bicubic", "ops.upsample_bicubic2d_backward",
         lambda: (lambda x: _bw(F.interpolate(x, scale_factor=2, mode="bicubic"), x))(_r(1, 2, 4, 4, rg=True)),
         aten=("upsample_bicubic2d_backward",)),
    Case("interpolate_bilinear_antialias", "ops.upsample_antialias_backward",
         lambda: (lambda x: _bw(F.interpolate(x, size=(4, 4), mode="bilinear", antialias=True), x))(
             _r(1, 2, 8, 8, rg=True)), aten=("_upsample_bilinear2d_aa_backward",)),
    Case("interpolate_bicubic_antialias", "ops.upsample_antialias_backward",
         lambda: (lambda x: _bw(F.interpolate(x, size=(4, 4), mode="bicubic", antialias=True), x))(
             _r(1, 2, 8, 8, rg=True)), aten=("_upsample_bicubic2d_aa_backward",)),
    Case("interpolate_bilinear_ok", "ops.upsample_bilinear2d_backward",
         lambda: (lambda x: _bw(F.interpolate(x, scale_factor=2, mode="bilinear"), x))(_r(1, 2, 4, 4, rg=True))),
    Case("upsampling_bilinear2d_module_ok", "ops.upsample_bilinear2d_backward",
         lambda: _module_bw(nn.UpsamplingBilinear2d(scale_factor=2), 1, 2, 4, 4)),
    Case("interpolate_trilinear_ok", "ops.upsample_trilinear3d_backward",
         lambda: (lambda x: _bw(F.interpolate(x, scale_factor=2, mode="trilinear"), x))(_r(1, 2, 4, 4, 4, rg=True))),
    Case("upsample_bilinear2d_native", "ops.upsample_linear_native_direct",
         lambda: (lambda x: _bw(torch._C._nn.upsample_bilinear2d(x, None, False, [2.0, 2.0]), x))(
             _r(1, 2, 4, 4, rg=True)), aten=("upsample_bilinear2d_backward",)),
    Case("upsample_trilinear3d_native", "ops.upsample_linear_native_direct",
         lambda: (lambda x: _bw(torch._C._nn.upsample_trilinear3d(x, None, False, [2.0, 2.0, 2.0]), x))(
             _r(1, 2, 4, 4, 4, rg=True)), aten=("upsample_trilinear3d_backward",)),
    Case("upsample_nearest_ok", "not_flagged.upsample_nearest",
         lambda: (lambda x: _bw(F.interpolate(x, scale_factor=2, mode="nearest"), x))(_r(1, 2, 4, 4, rg=True)),
         aten=("upsample_nearest2d_backward",)),
    # padding
    Case("reflection_pad1d_module", "ops.reflection_pad1d_backward",
         lambda: _module_bw(nn.ReflectionPad1d(2), 2, 3, 8), aten=("reflection_pad1d_backward",)),
    Case("conv1d_padding_mode_reflect", "ops.reflection_pad1d_backward",
         lambda: _module_bw(nn.Conv1d(3, 4, 3, padding=1, padding_mode="reflect"), 2, 3, 8),
         aten=("reflection_pad1d_backward",)),
    Case("reflection_pad3d_module", "ops.reflection_pad3d_backward",
         lambda: _module_bw(nn.ReflectionPad3d(1), 2, 3, 4, 4, 4), aten=("reflection_pad3d_backward",)),
    Case("conv3d_padding_mode_reflect", "ops.reflection_pad3d_backward",
         lambda: _module_bw(nn.Conv3d(2, 2, 3, padding=1, padding_mode="reflect"), 1, 2, 4, 4, 4),
         aten=("reflection_pad3d_backward",)),
    Case("pad_reflect_6_values", "ops.reflection_pad3d_backward",
         lambda: (lambda x: _bw(F.pad(x, (1,) * 6, mode="reflect"), x))(_r(1, 2, 4, 4, 4, rg=True)),
         aten=("reflection_pad3d_backward",)),
    Case("reflection_pad2d_ok", "ops.reflection_pad2d_backward",
         lambda: _module_bw(nn.ReflectionPad2d(2), 2, 3, 8, 8), aten=("reflection_pad2d_backward",)),
    Case("conv2d_padding_mode_reflect_ok", "ops.reflection_pad2d_backward",
         lambda: _module_bw(nn.Conv2d(2, 2, 3, padding=1, padding_mode="reflect"), 1, 2, 8, 8),
         aten=("reflection_pad2d_backward",)),
    *[Case(f"replication_pad{nd}d_module_ok", "ops.replication_pad_backward",
           (lambda nd: lambda: _module_bw(getattr(nn, f"ReplicationPad{nd}d")(1), *((2, 3) + (4,) * nd)))(nd))
      for nd in (1, 2, 3)],
    Case("conv2d_padding_mode_replicate_ok", "ops.replication_pad_backward",
         lambda: _module_bw(nn.Conv2d(2, 2, 3, padding=1, padding_mode="replicate"), 1, 2, 8, 8)),
    Case("replication_pad2d_native", "ops.replication_pad_native_direct",
         lambda: (lambda x: _bw(torch._C._nn.replication_pad2d(x, [1, 1, 1, 1]), x))(_r(2, 3, 4, 4, rg=True)),
         aten=("replication_pad2d_backward",)),
    # losses
    Case("nll_loss_4d_module", "ops.nll_loss2d_forward", _loss(nn.NLLLoss(), (2, 3, 5, 5), _cls_target(2, 5, 5)),
         aten=("nll_loss2d_forward",)),
    Case("cross_entropy_4d_module", "ops.nll_loss2d_forward",
         _loss(nn.CrossEntropyLoss(), (2, 3, 5, 5), _cls_target(2, 5, 5)), aten=("nll_loss2d_forward",)),
    Case("cross_entropy_3d_functional", "ops.nll_loss2d_forward", _loss(F.cross_entropy, (2, 3, 7), _cls_target(2, 7)),
         aten=("nll_loss2d_forward",)),
    Case("cross_entropy_label_smoothing_4d", "ops.nll_loss2d_forward",
         _loss(lambda x, t: F.cross_entropy(x, t, label_smoothing=0.1), (2, 3, 5, 5), _cls_target(2, 5, 5)),
         aten=("nll_loss2d_forward",)),
    Case("nll_loss_2d_input_ok", "not_flagged.nll_loss_2d_input", _loss(F.cross_entropy, (8, 3), _cls_target(8)),
         aten=("nll_loss_forward",), aten_absent=("nll_loss2d_forward",)),
    Case("nll_loss_1d_input_ok", "not_flagged.nll_loss_2d_input", _loss(F.nll_loss, (3,), lambda: torch.tensor(1)),
         aten=("nll_loss_forward",), aten_absent=("nll_loss2d_forward",)),
    Case("nll_loss2d_reduction_none_ok", "not_flagged.nll_loss_reduction_none",
         _loss(lambda x, t: F.nll_loss(x, t, reduction="none"), (2, 3, 5, 5), _cls_target(2, 5, 5)),
         aten=("nll_loss2d_forward",)),
    Case("cross_entropy_prob_target_ok", "not_flagged.cross_entropy_prob_target",
         _loss(F.cross_entropy, (2, 3, 5, 5), lambda: torch.softmax(_r(2, 3, 5, 5), 1)),
         aten_absent=("nll_loss2d_forward", "nll_loss_forward")),
    Case("ctc_loss_module", "ops.ctc_loss_backward", _ctc, aten=("_ctc_loss_backward",)),
    Case("embedding_bag_max", "ops.embedding_bag_max_backward", lambda: _embedding_bag("max"),
         aten=("_embedding_bag_backward",)),
    Case("embedding_bag_sum_ok", "not_flagged.embedding_bag_sum_mean", lambda: _embedding_bag("sum")),
    # grid_sample
    Case("grid_sample_2d", "ops.grid_sampler_backward",
         lambda: (lambda x: _bw(F.grid_sample(x, torch.rand(1, 3, 3, 2) * 2 - 1, align_corners=False), x))(
             _r(1, 2, 4, 4, rg=True)), aten=("grid_sampler_2d_backward",)),
    Case("grid_sample_3d", "ops.grid_sampler_backward",
         lambda: (lambda x: _bw(F.grid_sample(x, torch.rand(1, 3, 3, 3, 3) * 2 - 1, align_corners=False), x))(
             _r(1, 2, 4, 4, 4, rg=True)), aten=("grid_sampler_3d_backward",)),
    # put / take
    Case("put_inplace_no_accumulate", "ops.put_no_accumulate", lambda: [torch.zeros(5).put_(_idx(0, 0), _r(2))]),
    Case("put_outofplace_no_accumulate", "ops.put_no_accumulate", lambda: [torch.zeros(5).put(_idx(0, 0), _r(2))]),
    Case("torch_put_no_accumulate", "ops.put_no_accumulate", lambda: [torch.put(torch.zeros(5), _idx(0, 0), _r(2))]),
    Case("put_accumulate", "ops.put_accumulate_cuda",
         lambda: [torch.zeros(5).put_(_idx(0, 0), _r(2), accumulate=True)]),
    Case("put_accumulate_cpu_ok", "ops.put_accumulate_cpu",
         lambda: [torch.zeros(16).put_(torch.randint(0, 16, (100000,)), _r(100000), accumulate=True)]),
    Case("take_backward", "ops.take_backward",
         lambda: (lambda x: _bw(torch.take(x, _idx(0, 0, 3)), x))(_r(10, rg=True)), aten=("take", "put")),
    # scatter / index_reduce
    Case("scatter_reduce_prod", "ops.scatter_reduce_prod",
         lambda: [torch.ones(4).scatter_reduce(0, _idx(0, 0, 1), _r(3), "prod")]),
    Case("scatter_reduce_prod_inplace", "ops.scatter_reduce_prod",
         lambda: [torch.ones(4).scatter_reduce_(0, _idx(0, 0, 1), _r(3), "prod", include_self=False)]),
    Case("scatter_legacy_multiply", "ops.scatter_legacy_multiply",
         lambda: [torch.ones(4).scatter_(0, _idx(0, 0, 1), _r(3), reduce="multiply")]),
    Case("scatter_legacy_multiply_scalar_ok", "not_flagged.scatter_scalar_reduce",
         lambda: [torch.ones(4).scatter_(0, _idx(0, 0, 1), 2.0, reduce="multiply")]),
    *[Case(f"index_reduce_{red}", "ops.index_reduce",
           (lambda red: lambda: [torch.ones(4, 2).index_reduce_(0, _idx(0, 0, 1), _r(3, 2), red)])(red))
      for red in ("prod", "mean", "amax", "amin")],
    Case("scatter_reduce_amax_ok", "not_flagged.scatter_reduce_amax_amin",
         lambda: (lambda s: [torch.zeros(s[2]).scatter_reduce(0, s[1], s[0], "amax")])(_scatter_setup())),
    # histc / bincount / median / kthvalue / mode
    Case("histc_float", "ops.histc_float", lambda: [torch.histc(_r(100), bins=10, min=-3, max=3)]),
    Case("histc_method_float", "ops.histc_float", lambda: [_r(100).histc(bins=10, min=-3, max=3)]),
    Case("bincount_weights", "ops.bincount_weights", lambda: [torch.bincount(_idx(0, 1, 1, 3), torch.ones(4))]),
    Case("bincount_method_weights", "ops.bincount_weights",
         lambda: [_idx(0, 1, 1, 3).bincount(weights=torch.ones(4))]),
    Case("bincount_no_weights_ok", "not_flagged.bincount_no_weights", lambda: [torch.bincount(_idx(0, 1, 1, 3))]),
    Case("median_dim", "ops.median_with_indices", lambda: list(torch.median(_r(4, 5), 1))),
    Case("median_method_dim", "ops.median_with_indices", lambda: list(_r(4, 5).median(dim=0))),
    Case("nanmedian_dim", "ops.median_with_indices", lambda: list(torch.nanmedian(_r(4, 5), 1))),
    Case("median_all_ok", "not_flagged.median_no_dim", lambda: [torch.median(_r(4, 5))]),
    Case("kthvalue_ok", "not_flagged.kthvalue", lambda: list(torch.kthvalue(_r(4, 100), 3, dim=1))),
    Case("kthvalue_cpu", "ops.kthvalue_cuda", lambda: list(_r(4, 100).kthvalue(3))),
    Case("mode_eager_ok", "not_flagged.mode_eager", lambda: list(torch.mode(torch.randint(0, 3, (4, 50)).float(), 1))),
    Case("quantized_resize", "ops.quantized_resize", _quantized_resize),
    Case("compiled_backward_mode_flip", "ops.compiled_backward_mode_mismatch", _compiled_backward_mode_flip),
    # deterministic alternatives
    Case("scatter_add_", "ops.scatter_add",
         lambda: (lambda s: [torch.zeros(s[2]).scatter_add_(0, s[1], s[0])])(_scatter_setup()), aten=("scatter_add_",)),
    Case("torch_scatter_add_2d", "ops.scatter_add",
         lambda: [torch.scatter_add(torch.zeros(8, 32), 0, torch.randint(0, 8, (64, 32)), _r(64, 32))]),
    Case("gather_backward", "ops.gather_backward",
         lambda: (lambda x: _bw(torch.gather(x, 0, torch.randint(0, 16, (4096,))), x))(_r(16, rg=True)),
         aten=("gather", "scatter_add")),
    Case("take_along_dim_backward", "ops.gather_backward",
         lambda: (lambda x: _bw(torch.take_along_dim(x, torch.randint(0, 16, (4, 1024)), dim=1), x))(
             _r(4, 16, rg=True))),
    *[Case(f"scatter_reduce_{red}", "ops.scatter_reduce_sum_mean",
           (lambda red: lambda: (lambda s: [torch.zeros(s[2]).scatter_reduce(0, s[1], s[0], red)])(
               _scatter_setup()))(red))
      for red in ("sum", "mean")],
    Case("scatter_src_duplicates", "ops.scatter_src",
         lambda: (lambda s: [torch.zeros(s[2]).scatter(0, s[1], s[0])])(_scatter_setup())),
    Case("scatter_legacy_add", "ops.scatter_legacy_add",
         lambda: (lambda s: [torch.zeros(s[2]).scatter_(0, s[1], s[0], reduce="add")])(_scatter_setup())),
    Case("index_add_", "ops.index_add",
         lambda: [torch.zeros(16, 8).index_add_(0, torch.randint(0, 16, (4096,)), _r(4096, 8))], aten=("index_add_",)),
    Case("index_select_backward", "ops.index_select_backward",
         lambda: (lambda x: _bw(torch.index_select(x, 0, torch.randint(0, 16, (4096,))), x))(_r(16, 8, rg=True)),
         aten=("index_select", "index_add")),
    Case("repeat_interleave_backward", "ops.index_select_backward",
         lambda: (lambda x: _bw(torch.repeat_interleave(x, torch.randint(1, 300, (16,)), dim=0), x))(
             _r(16, 8, rg=True)), aten=("index_select", "index_add")),
    Case("index_put_no_accumulate_duplicates", "ops.index_put_no_accumulate",
         lambda: [torch.zeros(16).index_put_((torch.randint(0, 16, (4096,)),), _r(4096))], aten=("index_put_",)),
    Case("setitem_duplicates", "ops.index_put_no_accumulate",
         lambda: (lambda x: (x.__setitem__(torch.randint(0, 16, (4096,)), _r(4096)), [x])[1])(torch.zeros(16)),
         aten=("index_put_",)),
    Case("index_put_accumulate", "ops.index_put_accumulate_cpu",
         lambda: [torch.zeros(16).index_put_((torch.randint(0, 16, (100000,)),), _r(100000), accumulate=True)]),
    Case("getitem_backward", "ops.index_put_accumulate_cpu",
         lambda: (lambda x: _bw(x[torch.randint(0, 16, (100000,))], x))(_r(16, rg=True)), aten=("index_put",)),
    Case("index_copy_", "ops.index_copy",
         lambda: [torch.zeros(16, 4).index_copy_(0, torch.randint(0, 16, (4096,)), _r(4096, 4))],
         aten=("index_copy_",)),
    Case("bmm_sparse_dense", "ops.bmm_sparse_dense",
         lambda: [torch.bmm(((torch.rand(4, 32, 32) < 0.2).float() * _r(4, 32, 32)).to_sparse(), _r(4, 32, 16))]),
    Case("conv2d_fwd_bwd", "ops.convolution_cudnn", lambda: _module_bw(nn.Conv2d(8, 8, 3, padding=1), 4, 8, 16, 16)),
    Case("conv_transpose2d_fwd_bwd", "ops.convolution_cudnn",
         lambda: _module_bw(nn.ConvTranspose2d(8, 8, 3, stride=2), 4, 8, 16, 16)),
    Case("cumsum_float_1d", "ops.cumsum", lambda: [torch.cumsum(_r(1 << 16), 0)], aten=("cumsum",)),
    Case("embedding_backward_many_indices", "ops.embedding_dense_backward",
         lambda: (lambda m: (m(torch.randint(0, 8, (64, 1024))).sum().backward(), [m.weight.grad])[1])(
             nn.Embedding(8, 64)),
         aten=("embedding_dense_backward",)),
    Case("sdpa_backward", "ops.sdpa_backward",
         lambda: (lambda q, k, v: _bw(F.scaled_dot_product_attention(q, k, v, is_causal=True), q, k, v))(
             *(_r(2, 4, 64, 16, rg=True) for _ in range(3)))),
]  # fmt: skip
CASE_IDS = [c.id for c in CASES]


def _lookup(case: Case):
    table, entry_id = case.entry.split(".", 1)
    source = OPS if table == "ops" else TRAPS
    assert entry_id in source, f"case {case.id} refers to {case.entry}, which is not in the catalogue"
    return table, source[entry_id]


TORCH_VERSION = parse_version(torch.__version__)


def expected_to_raise(case: Case) -> bool:
    table, entry = _lookup(case)
    return table == "ops" and entry.raises and entry.applies_on_cpu and entry.holds_in(TORCH_VERSION)


def run(case: Case):
    torch.manual_seed(0)
    return [t.detach().clone() for t in case.fn() if isinstance(t, torch.Tensor)]


def test_cases_are_unique_and_cover_every_entry():
    assert len(set(CASE_IDS)) == len(CASE_IDS)
    covered = {c.entry for c in CASES}
    missing = [e.id for e in CAT.entries if f"ops.{e.id}" not in covered]
    assert not missing, f"entries without a CPU case: {missing}"
    for c in CASES:
        _lookup(c)


def test_every_cpu_entry_has_a_case_and_some_raise():
    cpu_entries = {e.id for e in CAT.entries if e.applies_on_cpu}
    assert {c.entry.split(".", 1)[1] for c in CASES if c.entry.startswith("ops.")} >= cpu_entries
    assert sum(expected_to_raise(c) for c in CASES) >= 8  # max_unpool x3, put x3, quantized resize_, compile


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_case_under_deterministic_mode(case: Case, deterministic):
    table, entry = _lookup(case)
    if expected_to_raise(case):
        with pytest.raises(RuntimeError) as info:
            run(case)
        assert any(text in str(info.value) for text in entry.error_texts), str(info.value)[:300]
        return
    first = run(case)  # must not raise
    if table == "ops" and entry.applies_on_cpu:  # a deterministic alternative that applies here
        second = run(case)
        assert len(first) == len(second)
        for a, b in zip(first, second):
            assert a.dtype == b.dtype and a.shape == b.shape
            assert torch.equal(a.view(-1).view(torch.uint8) if a.is_floating_point() else a,
                               b.view(-1).view(torch.uint8) if b.is_floating_point() else b)  # fmt: skip


def test_verified_cpu_field_matches_the_run(deterministic):
    """ops.toml's verified.cpu ("raises" / "no error") is what the CPU torch does."""
    recorded = {parse_version(e.verified["cpu_torch"]) for e in CAT.entries}
    if recorded != {TORCH_VERSION}:
        pytest.skip(f"verified.cpu was recorded for torch {recorded}")
    for entry in CAT.entries:
        outcomes = set()
        for case in (c for c in CASES if c.entry == f"ops.{entry.id}"):
            try:
                run(case)
                outcomes.add("no error")
            except RuntimeError:
                outcomes.add("raises")
        assert outcomes == {entry.verified["cpu"]}, entry.id


def test_not_flagged_cpu_claims_have_cases():
    """A [not_flagged] entry that records a CPU run has a case here (run above, must not raise)."""
    claimed = {n.id for n in CAT.not_flagged if (n.verified or {}).get("cpu")}
    with_cases = {c.entry.split(".", 1)[1] for c in CASES if c.entry.startswith("not_flagged.")}
    assert claimed and claimed <= with_cases, claimed - with_cases
    assert all(n.verified["cpu"] == "no error" for n in CAT.not_flagged if n.id in claimed)


# ----------------------------------------------------------------------------- fake CUDA (torch.compile tracing)


@pytest.fixture
def fake_cuda(deterministic):
    from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode

    log = logging.getLogger("torch._subclasses.fake_tensor")
    level = log.level
    log.setLevel(logging.CRITICAL)  # it logs every failing meta function at ERROR
    mode = FakeTensorMode(allow_non_fake_inputs=True)

    def make(*shape, dtype=torch.float32):
        return FakeTensor(mode, torch.empty(*shape, device="meta", dtype=dtype), torch.device("cuda"))

    try:
        with mode:
            yield make
    finally:
        log.setLevel(level)


META_CASES = [  # (id, entry whose kernel string the meta function raises with or None, fn(make))
    ("median_dim", "median_with_indices", lambda f: torch.median(f(4, 5), 1)),
    ("nanmedian_dim", "median_with_indices", lambda f: torch.nanmedian(f(4, 5), 1)),
    ("mode_dim", "median_with_indices", lambda f: torch.mode(f(4, 5), 1)),
    ("histc_float", "histc_float", lambda f: torch.histc(f(100), bins=10, min=-3, max=3)),
    *[(f"max_unpool{nd}d", "max_unpool_forward", (lambda nd: lambda f: getattr(F, f"max_unpool{nd}d")(
        f(*(1, 2) + (2,) * nd), f(*(1, 2) + (2,) * nd, dtype=torch.long), 2))(nd)) for nd in (1, 2, 3)],
    ("median_all_ok", None, lambda f: torch.median(f(4, 5))),
    ("histc_int_ok", None, lambda f: torch.histc(f(100, dtype=torch.long), bins=10, min=0, max=10)),
    ("kthvalue_ok", None, lambda f: torch.kthvalue(f(4, 100), 3, dim=1)),
]


@pytest.mark.parametrize(("case_id", "entry_id", "fn"), META_CASES, ids=[c[0] for c in META_CASES])
def test_meta_alerts_on_fake_cuda_tensors(case_id, entry_id, fn, fake_cuda):
    meta = next(s for s in CAT.special if s.id == "meta_alerts")
    if entry_id is None:
        fn(fake_cuda)
        return
    kernels = OPS[entry_id].kernels
    assert set(kernels) <= set(meta.raw["kernels"])
    with pytest.raises(RuntimeError) as info:
        fn(fake_cuda)
    assert any(k in str(info.value) for k in kernels)


def test_fill_uninitialized_memory(deterministic):
    """[environment.fill_uninitialized_memory]: new memory is filled with NaN / the max int."""
    env = next(s for s in CAT.special if s.id == "fill_uninitialized_memory")
    assert {"torch.empty", "torch.Tensor.resize_"} <= set(env.apis)
    assert torch.empty(8).isnan().all()
    assert (torch.empty(8, dtype=torch.long) == torch.iinfo(torch.long).max).all()
    assert torch.zeros(2).resize_(6)[2:].isnan().all()


# ----------------------------------------------------------------------------- dispatch trace


def _trace(fn) -> set[str]:
    from torch.utils._python_dispatch import TorchDispatchMode

    class Trace(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.ops: set[str] = set()

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.ops.add(func._schema.name.split("::", 1)[1])
            return func(*args, **(kwargs or {}))

    with Trace() as t:
        fn()
    return t.ops


TRACED = [c for c in CASES if c.aten or c.aten_absent]


@pytest.mark.parametrize("case", TRACED, ids=[c.id for c in TRACED])
def test_api_reaches_the_catalogued_kernel(case: Case):
    """Device-independent routing: the API reaches (or avoids) the catalogued ATen op."""
    ops = _trace(case.fn)
    assert set(case.aten) <= ops, f"missing {set(case.aten) - ops}; saw {sorted(ops)}"
    assert not set(case.aten_absent) & ops, f"unexpected {set(case.aten_absent) & ops}"
