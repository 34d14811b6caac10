"""Shared by TRP401 and TRP402: the op matches of a module, program status, and message text.

Matching is ``analysis.op_matching.matcher.ops_in``; this module only decides what the messages say.
"""

from __future__ import annotations

from dataclasses import dataclass

from torchrepro_lint.catalog import load_catalog
from torchrepro_lint.analysis.op_matching.matcher import OpMatch, ops_in
from torchrepro_lint.project.known_apis import Kind
from torchrepro_lint.project.uses import ProjectUses

DET_MODE_CALL = "`torch.use_deterministic_algorithms(True)`"

# Shared by both rules' documentation (rules/TRP401.md, TRP402.md): one short item each.
EVIDENCE_WHERE = (
    "Only conditions the code shows count (precision before recall): a `mode`, `pad`, output "
    "size or `reduce` that is not a literal or a local constant leaves the call silent, as does a "
    "method on a receiver not shown to be a tensor (a NumPy array never is).",
    "A method that only tensors have (`index_add_`, `index_copy_`, `index_put_`, `put_`, "
    "`scatter_`, `scatter_add_`, `scatter_reduce_`, `index_reduce_`) on a parameter or attribute "
    "whose type the module does not show is a tensor's, where the module imports no look-alike "
    "library (paddle, oneflow, ...) and the project defines no method of that name. "
    "It is reported only where a program that runs the function (or, where none is seen to, one "
    "that imports its module) uses CUDA: the message says so.",
    "An argument with a few known values (`'bicubic' if fast else 'linear'`) is reported only "
    "when every value is. A `pad` display has as many values as it lists, whatever their names "
    "(`[left, right, top, bottom]` is 4, `[k // 2] * 4` too).",
    "A parameter of a module-level function (a version-gated `if ...: def op(...)` included) "
    "handed to the op (`def resize(x, mode='bilinear'): F.interpolate(x, mode=mode)`) takes the "
    "literals the project's calls give it, or its default where a call leaves it out; the op is "
    "reported in the wrapper when one of them matches, and the message names it. Calls from "
    "tests do not count; a call passing a non-literal adds nothing.",
    "A project name bound to a torch function (`interpolate = F.interpolate` in a `layers` "
    "module) is that function where another module imports and calls it.",
    "An unknown True/False flag (`antialias=self.flag`, or one that `**kwargs` may pass) is tried "
    "both ways, and silences the call only if the verdict changes: bilinear with an unknown "
    "`antialias` (TRP401 without it, TRP402 with it) is silent, while "
    "`interpolate(mode='bicubic', antialias=<unknown>, **kwargs)` is TRP402 either way "
    "(`**kwargs` cannot pass `mode` a second time).",
    "A call in the branch that a module-level helper takes for one value of its parameter "
    "(`if dims == 3: nn.AvgPool3d(...)` in `avg_pool_nd(dims, ...)`) is reported only where a "
    "call in the project selects that branch: with a literal (`avg_pool_nd(3, ...)`, `dims=3`, a "
    "value in a tested tuple), or by leaving out an argument whose default selects it.",
    "The device need not be known: an op on an unknown device is taken to run on CUDA, where "
    "these ops vary. A tensor shown to be on the CPU is not reported for a CUDA-only op, nor is "
    "data-pipeline code (Datasets, transforms, collate functions), taken to work on CPU tensors.",
)
EVIDENCE_DECISIONS = (
    "A helper's branch selected by a value from configuration (`dims=cfg.dims`) cannot be seen, "
    "so a project that builds 3-D models that way is not told: a known false negative, chosen "
    "over warning every image model about a branch it never takes.",
    "A receiver of unknown type is taken for a tensor only by a method name no other type a torch "
    "module meets has (NumPy's `put` and cupy's `scatter_add` lack the underscore); since nothing "
    "shows its device, a program on CUDA must run it (its device evidence, as TRP205 reads it). "
    "The program model does not follow `model(x)` into `forward`, so where no program is seen to "
    "run the function, the programs that import its module stand in.",
    "A wrapper's argument counts when one caller gives a matching literal (as a helper's branch "
    "does when one call selects it), unlike `a if c else b`, which must match both ways: each "
    "call shown runs the op with its value.",
)
GRAD_NOT_REPORTED = (
    "Backward-only ops (nondeterministic only in the backward pass, such as upsampling, padding "
    "and pooling) under `torch.no_grad()`, `torch.inference_mode()` or "
    "`set_grad_enabled(False)` (block or decorator, also a project decorator named like "
    "`smart_inference_mode`), and in Lightning's validation, test and predict steps.",
    "Backward-only ops in Datasets, transforms (`__call__` of a transform class, modules named "
    "`transforms` / `augmentations`) and collate functions.",
    "Backward-only ops in checkpoint loading: functions that call `torch.load` / "
    "`load_state_dict` or are named like `load_*` / `*_filter_fn`, functions handed to "
    "`register_load_state_dict_pre_hook` / `_post_hook`, module-level helpers called only from "
    "these, and the top level of a checkpoint converter (a script that loads weights and whose "
    "module has no `.backward()`, `torch.autograd`, optimizer, `.fit()` or `trainer.train()`).",
    "Backward-only ops in evaluation-only code, whose output is not backpropagated: the `else` of "
    "`if self.training:`, the body of `if not self.training:`, or after "
    "`if self.training: return losses` (only the plain `self.training` test counts).",
    "Backward-only ops whose result only feeds non-differentiable uses (`> 0.5`, `.gt_()`, "
    "`.long()`, `.item()`, `.numpy()`), also through views, elementwise math and reductions "
    "(`.pow(2).mean().numpy()`).",
    "Backward-only ops on data: an input argument of the `forward` of a top-level model (one the "
    "project builds outside any `nn.Module`, tests aside), or an entry of it "
    "(`batch[\"image\"]`), while the name still holds the argument: `x = F.interpolate(x, ...)` "
    "reads it; after `x = self.encode(x)`, or in a loop that rebinds `x`, it does not.",
    "Backward-only ops on a frozen attribute of `self`: a buffer, or an "
    "`nn.Parameter(..., requires_grad=False)` that nothing in the class unfreezes.",
    "Backward-only ops in code used only without gradients: a module-level function referenced "
    "only from such code (or from a method that only such code calls, as a pipeline's "
    "preprocessing run from its `@torch.no_grad()` `__call__`); the methods of a helper class that is not an `nn.Module` (no base "
    "class, even with a `forward`) built only there; any other method (not `forward` or a "
    "dunder) of a class built on `nn.Module`, `object` or the project's own classes, when every "
    "use of its name in the project runs without gradients.",
    "Backward-only ops in weight-resizing helpers named like `resize_pos_embed` / "
    "`resample_abs_pos_embed`: module-level ones that nothing references (they resize "
    "checkpoints), and methods the project calls only without gradients (from a "
    "`@torch.no_grad()` load_state_dict hook), tests aside.",
)
GRAD_DECISIONS = (
    "A framework's subclass (a Trainer, a LightningModule) never counts as used only without "
    "gradients: the framework calls its methods by name, where the linter cannot see it.",
    "Whether a method that uses a module-level function runs without gradients is read from "
    "the uses of its name: anywhere in the project for a public name, in its own module for a "
    "private one (`_encode_image`), as Python's convention has it; other classes' methods of "
    "the same name would otherwise decide.",
)

# Why the op varies run to run, by catalogue entry id (short: it goes in parentheses).
_ATOMIC_BACKWARD = "its CUDA backward adds gradients with atomics, in no fixed order"
_ATOMIC_FORWARD = "it sums with CUDA atomics, in no fixed order"
_DUPLICATES = "with duplicate indices, which write lands depends on thread timing"
WHY = {
    # TRP401: deterministic alternative exists
    "upsample_bilinear2d_backward": _ATOMIC_BACKWARD,
    "upsample_trilinear3d_backward": _ATOMIC_BACKWARD,
    "reflection_pad2d_backward": _ATOMIC_BACKWARD,
    "replication_pad_backward": _ATOMIC_BACKWARD,
    "max_pool3d_backward_with_indices": _ATOMIC_BACKWARD,
    "scatter_add": _ATOMIC_FORWARD,
    "scatter_reduce_sum_mean": _ATOMIC_FORWARD,
    "scatter_legacy_add": _ATOMIC_FORWARD,
    "index_add": _ATOMIC_FORWARD,
    "bmm_sparse_dense": _ATOMIC_FORWARD,
    "scatter_src": _DUPLICATES + " on CUDA",
    "index_put_no_accumulate": _DUPLICATES + ", on CPU and CUDA",
    "index_copy": _DUPLICATES + ", on CPU and CUDA",
    "index_put_accumulate_cpu": "on CPU it accumulates in parallel, in no fixed order",
    "put_accumulate_cpu": "on CPU it accumulates in parallel, in no fixed order",
    "cumsum": "a 1-D floating-point cumsum on CUDA is a parallel scan whose rounding varies",
    # TRP402: no deterministic implementation
    "put_no_accumulate": _DUPLICATES,
    "put_accumulate_cuda": _ATOMIC_FORWARD,
    "max_unpool_forward": "its writes through the indices may collide, on CPU and CUDA",
    "median_with_indices": "which index it returns among equal values is not fixed on CUDA",
    "kthvalue_cuda": "which index it returns among equal values is not fixed on CUDA",
    "histc_float": _ATOMIC_FORWARD,
    "bincount_weights": _ATOMIC_FORWARD,
    "index_reduce": "it reduces with CUDA atomics, in no fixed order",
    "scatter_reduce_prod": "it multiplies with CUDA atomics, in no fixed order",
    "scatter_legacy_multiply": "it multiplies with CUDA atomics, in no fixed order",
    "nll_loss2d_forward": "for inputs with 3 or more dims its CUDA kernel sums the loss with atomics",
    "quantized_resize": "new memory of a quantized tensor is not initialized",
}
DEFAULT_WHY = {"backward": _ATOMIC_BACKWARD, "forward": "it uses CUDA atomics, in no fixed order"}


def why(entry) -> str:
    return WHY.get(entry.id, DEFAULT_WHY["backward" if entry.phases == ("backward",) else "forward"])


# What to do instead (TRP402), by entry id. TRP401's fix is always deterministic mode.
ADVICE = {
    "avg_pool3d_backward": "use a 3-D convolution with fixed uniform weights, or accept it with `warn_only=True`",
    "adaptive_avg_pool2d_backward": "use `nn.AvgPool` with a fixed kernel and stride (or global pooling, output size 1, which is a deterministic mean)",
    "adaptive_avg_pool3d_backward": "use `nn.AvgPool3d` with a fixed kernel and stride (or output size 1, a deterministic mean)",
    "adaptive_max_pool2d_backward": "use `nn.MaxPool` with a fixed kernel and stride, or `amax` over the pooled dims",
    "max_pool3d_backward_no_indices": "pass `return_indices=True` (it then takes a deterministic path in deterministic mode)",
    "fractional_max_pool2d_backward": "use a regular `MaxPool2d`, or accept it with `warn_only=True`",
    "fractional_max_pool3d_backward": "use a regular `MaxPool3d`, or accept it with `warn_only=True`",
    "max_unpool_forward": "replace it with a scatter through `index_put_` on a zero tensor, or accept it with `warn_only=True`",
    "upsample_linear1d_backward": "add a dim and use `mode='bilinear'` (deterministic in deterministic mode), or `mode='nearest'`",
    "upsample_bicubic2d_backward": "use `mode='bilinear'` (deterministic in deterministic mode) or `mode='nearest'`",
    "upsample_antialias_backward": "drop `antialias=True` (bilinear then has a deterministic path)",
    "upsample_linear_native_direct": "call `F.interpolate` from eager (non-TorchScript) code so its deterministic decomposition is used",
    "reflection_pad1d_backward": "pad with `mode='replicate'` (deterministic in deterministic mode), or reflect-pad in 2-D with 4 pad values",
    "reflection_pad3d_backward": "pad with `mode='replicate'` (deterministic in deterministic mode)",
    "replication_pad_native_direct": "call `F.pad(mode='replicate')` from eager (non-TorchScript) code",
    "nll_loss2d_forward": "flatten to (N*d, C) logits and (N*d,) targets before the loss, or use `reduction='none'` and reduce yourself",
    "ctc_loss_backward": "use the cuDNN path (int32 targets, blank=0, float32 log-probs), or accept it with `warn_only=True`",
    "embedding_bag_max_backward": "use `mode='sum'` or `mode='mean'`",
    "grid_sampler_backward": "there is no deterministic alternative: accept it with `warn_only=True`, or keep the sampled input out of the graph",
    "put_no_accumulate": "use `x.view(-1).index_put_((index,), values)` (deterministic in deterministic mode)",
    "put_accumulate_cuda": "use `x.view(-1).index_put_((index,), values, accumulate=True)` (sort-based and deterministic on CUDA)",
    "take_backward": "index the flattened tensor instead: `x.reshape(-1)[index]`",
    "scatter_reduce_prod": "there is no deterministic alternative: accept it with `warn_only=True`",
    "scatter_legacy_multiply": "there is no deterministic alternative: accept it with `warn_only=True`",
    "index_reduce": "use `scatter_reduce` with reduce 'sum', 'mean', 'amax' or 'amin' (deterministic or order-free)",
    "histc_float": "bin the values yourself and count with `torch.bincount` (deterministic without weights)",
    "bincount_weights": "sum the weights with `torch.zeros(n).index_add_(0, index, weights)` (deterministic in deterministic mode)",
    "median_with_indices": "take the middle element of `x.sort(dim=dim).values` (or `median()` without `dim`)",
    "kthvalue_cuda": "use `x.sort(dim=dim).values` (torch 2.10 and newer no longer raise here)",
    "quantized_resize": "allocate the quantized tensor at its final size",
}


AREA_ADVICE = "downsample with `F.avg_pool2d` / `nn.AvgPool2d` and an integer factor instead of `mode='area'`"


# Advice that names a deterministic path only holds from the release that has it.
ADVICE_SINCE = {"max_pool3d_backward_no_indices": "max_pool3d_backward_with_indices"}


def advice(match: OpMatch, torch_version: tuple[int, int]) -> str:
    if match.entry.id.startswith("adaptive_avg_pool") and match.api.name in (
        "torch.nn.functional.interpolate", "torch.nn.functional.upsample", "torch.nn.Upsample"
    ):
        return AREA_ADVICE
    alternative = ADVICE_SINCE.get(match.entry.id)
    if alternative:
        since = load_catalog().entry(alternative).since
        if since and torch_version < since:
            return "accept it with `warn_only=True` (`return_indices=True` takes a deterministic path only from torch %d.%d)" % since
    return ADVICE.get(match.entry.id, "accept it with `warn_only=True`")


_USES: list = []  # [ProjectUses] of the project being linted (the last one)


def _all(module, context) -> list[OpMatch]:
    if not _USES or _USES[0].project is not context.project:
        _USES[:] = [ProjectUses(context.project)]
    uses = _USES[0]
    return ops_in(module.index, context.config.torch_version, module.source.path.as_posix(), uses)


def matches(module, context, rule: str) -> list[OpMatch]:
    return [m for m in _kept(module, context) if m.rule == rule]


def raising_calls(module, context) -> set[int]:
    """Calls that TRP402 reports: TRP401 stays quiet there (one finding per call)."""
    return {id(m.site.node) for m in _kept(module, context) if m.rule == "TRP402"}


def _kept(module, context) -> list[OpMatch]:
    """The matches, less the assumed ones (a tensor-only method on a receiver of unknown type)
    that no program using CUDA runs, or whose method name the project defines itself."""
    return [m for m in _all(module, context) if not m.assumed or assumed_programs(module, context, m)]


def assumed_programs(module, context, match: OpMatch) -> list:
    """For an assumed match: the programs that run the function around it (where no program is
    seen to, as a `forward` that `model(x)` runs: those that import its module) and use CUDA (a
    `.cuda()`, a CUDA device, ...; not hiding the GPUs). Nothing shows the receiver's device, so
    a program that shows CUDA is the evidence. None when the project defines a function or
    method of that name: the receiver may be one of its objects."""
    method = match.api.name.rsplit(".", 1)[-1]
    if context.project.modules_mentioning(f"def {method}("):
        return []
    programs = context.programs_running(module, match.site.node) or context.programs_reaching(module)
    return [p for p in programs if p.facts.has(Kind.CUDA) and not hides_gpus(p.facts)]


@dataclass
class DetModeStatus:
    programs: list  # programs reaching the module
    strict: tuple | None  # (program, occurrence) enabling deterministic mode without warn_only
    warn_only: tuple | None  # (program, occurrence) enabling it with warn_only
    without: list  # programs reaching the module that never enable it
    cpu_only: bool = False  # programs reach the module, and every one of them hides the GPUs

    @property
    def always_on(self) -> bool:
        return bool(self.programs) and not self.without


def hides_gpus(facts) -> bool:
    """The program sets `CUDA_VISIBLE_DEVICES` to "" or "-1" (test suites do, to run on the
    CPU): no CUDA kernel runs in it, so neither a CUDA op's variation nor its raising."""
    return any(o.detail[1:2] in (("",), ("-1",)) and o.detail[0] == "CUDA_VISIBLE_DEVICES" for o in facts.of(Kind.ENV_SET))


def assumed_note(match: OpMatch) -> str:
    """What the message adds after the call: an argument the function's callers give (a
    wrapper's `mode`), and why a receiver of unknown type is taken for a tensor."""
    notes = []
    if match.given:
        notes.append(f"with {match.given}, as a call of its function gives it")
    if match.assumed:
        notes.append(f"only tensors have `{match.api.name.rsplit('.', 1)[-1]}`, and a program that runs it uses CUDA")
    return f" ({'; '.join(notes)})" if notes else ""


def det_mode_status(module, context, cuda: bool = False, programs: list | None = None) -> DetModeStatus:
    """How the programs that run `module` (or `programs`) set deterministic mode; with `cuda` (a
    CUDA-only entry), of those that can run CUDA kernels (hides_gpus)."""
    reaching = programs = context.programs_reaching(module) if programs is None else programs
    if cuda:
        programs = [p for p in programs if not hides_gpus(p.facts)]
    strict = next(((p, o) for p in programs for o in p.facts.of(Kind.DET_MODE)), None)
    warn = next(((p, o) for p in programs for o in p.facts.of(Kind.DET_MODE_WARN)), None)
    without = [p for p in programs if not p.facts.has(Kind.DET_MODE, Kind.DET_MODE_WARN)]
    return DetModeStatus(programs, strict, warn, without, bool(reaching) and not programs)


def where(context, pair) -> str:
    return context.line_of(pair[1].site)


def programs_phrase(status: DetModeStatus) -> str:
    if not status.programs:
        return "deterministic mode is never enabled"
    names = [p.entry.source.path.name for p in status.without]
    shown = ", ".join(f"`{n}`" for n in dict.fromkeys(names[:2]))
    more = f" (and {len(names) - 2} more)" if len(names) > 2 else ""
    verb = "never enables" if len(names) == 1 else "never enable"
    return f"{shown}{more} {verb} deterministic mode"
