"""run_on_gpu.sh, after verify_on_cuda.py: cases only the package's tests have, version questions
on the installed torch, and whether flagged ops really vary between runs with determinism off."""
import inspect, json, os, sys
import torch, torch.nn as nn, torch.nn.functional as F

dev = os.environ.get("DEV", "cuda")
out = {"torch": torch.__version__, "git": torch.version.git_version, "cases": {}, "facts": {}, "variation": {}}

def r(*s, rg=False, dtype=torch.float32):
    t = torch.randn(*s, device=dev, dtype=dtype)
    return t.requires_grad_(True) if rg else t

def bw(y, *xs):
    y.sum().backward()
    return [y.detach()] + [x.grad for x in xs]

def bits(ts):
    return [t.detach().cpu().contiguous().reshape(-1).view(torch.uint8) if t.is_floating_point() else t.detach().cpu() for t in ts]

def run(name, fn):
    rec = {}
    try:
        torch.manual_seed(0); a = bits(fn()); (torch.cuda.synchronize() if dev == "cuda" else None); rec["raised"] = None
        torch.manual_seed(0); b = bits(fn())
        rec["repeat_equal"] = all(torch.equal(x, y) for x, y in zip(a, b))
    except Exception as e:
        rec["raised"] = f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"
    out["cases"][name] = rec
    print(name, rec)

def unpool(nd):
    pool = {1: nn.MaxPool1d, 2: nn.MaxPool2d, 3: nn.MaxPool3d}[nd](2, return_indices=True)
    unp = {1: nn.MaxUnpool1d, 2: nn.MaxUnpool2d, 3: nn.MaxUnpool3d}[nd](2)
    y, i = pool(r(*((1, 2) + (4,) * nd)))
    return [unp(y, i)]

torch.use_deterministic_algorithms(True)
run("adaptive_avg_pool1d_global_ok", lambda: (lambda x: bw(F.adaptive_avg_pool1d(x, 1), x))(r(2, 3, 8, rg=True)))
run("kthvalue_cuda", lambda: list(r(4, 100).kthvalue(3)))
for nd in (1, 2, 3):
    run(f"max_unpool{nd}d", lambda nd=nd: unpool(nd))
run("nll_loss_1d_input_ok", lambda: (lambda x: bw(F.nll_loss(x, torch.tensor(1, device=dev)), x))(r(3, rg=True)))
run("pad_reflect_6_values", lambda: (lambda x: bw(F.pad(x, (1,) * 6, mode="reflect"), x))(r(1, 2, 4, 4, 4, rg=True)))
# grid_sample 4-D bilinear/zeros/align_corners=True: cuDNN path; with cuDNN off, the native kernel
gs = lambda: (lambda x, g: bw(F.grid_sample(x, g, align_corners=True), x))(r(4, 8, 64, 64, rg=True), torch.rand(4, 64, 64, 2, device=dev) * 2 - 1)
run("grid_sample_align_corners_cudnn", gs)
with torch.backends.cudnn.flags(enabled=False):
    run("grid_sample_align_corners_no_cudnn", gs)
torch.use_deterministic_algorithms(False)
out["facts"]["max_pool3d_with_indices_has_decomposition"] = "are_deterministic_algorithms_enabled" in inspect.getsource(F.max_pool3d_with_indices)
# compiled backward flip under warn_only
try:
    torch.use_deterministic_algorithms(False)
    fn = torch.compile(lambda t: (t.sin() * 2).sum(), backend="aot_eager")
    x = r(8, rg=True); y = fn(x)
    torch.use_deterministic_algorithms(True, warn_only=True)
    y.backward(); out["facts"]["compiled_flip_warn_only"] = "no error"
except Exception as e:
    out["facts"]["compiled_flip_warn_only"] = f"{type(e).__name__}: {str(e)[:120]}"
torch.use_deterministic_algorithms(False)
print(out["facts"])

# Do flagged ops vary run to run with determinism off? 6 runs each, count distinct results.
N, M = 1 << 20, 64
idx = torch.randint(0, M, (N,), device=dev)
src = torch.randn(N, device=dev)
def emb():
    e = nn.Embedding(M, 32).to(dev); torch.manual_seed(1); nn.init.normal_(e.weight)
    i = torch.randint(0, M, (1 << 16,), device=dev, generator=torch.Generator(dev).manual_seed(2))
    e(i).sum().backward(); return e.weight.grad
def interp(mode):
    x = torch.randn(4, 16, 32, 32, device=dev, generator=torch.Generator(dev).manual_seed(3)).requires_grad_(True)
    (F.interpolate(x, scale_factor=2.5, mode=mode, align_corners=False) * 1.0001).sum().backward(); return x.grad
def grid(cudnn):
    x = torch.randn(4, 8, 64, 64, device=dev, generator=torch.Generator(dev).manual_seed(4)).requires_grad_(True)
    g = torch.rand(4, 64, 64, 2, device=dev, generator=torch.Generator(dev).manual_seed(5)) * 0.2 - 0.1
    with torch.backends.cudnn.flags(enabled=cudnn):
        F.grid_sample(x, g, align_corners=True).sum().backward()
    return x.grad
VAR = {
    "scatter_add_": lambda: torch.zeros(M, device=dev).scatter_add_(0, idx, src),
    "index_add_": lambda: torch.zeros(M, device=dev).index_add_(0, idx, src),
    "index_put_accumulate": lambda: torch.zeros(M, device=dev).index_put_((idx,), src, accumulate=True),
    "embedding_backward": emb,
    "bilinear_backward": lambda: interp("bilinear"),
    "bicubic_backward": lambda: interp("bicubic"),
    "grid_sample_backward_native": lambda: grid(False),
    "grid_sample_backward_cudnn": lambda: grid(True),
    "histc_float": lambda: torch.histc(src, bins=100),
    "bincount_weights": lambda: torch.bincount(idx, weights=src),
}
for det in (False, True):
    torch.use_deterministic_algorithms(det, warn_only=True)
    for name, fn in VAR.items():
        try:
            res = [fn().detach().cpu().contiguous().view(-1).view(torch.uint8) for _ in range(6)]
            distinct = len({bytes(t.tolist()) for t in res})
        except Exception as e:
            distinct = f"{type(e).__name__}"
        out["variation"][f"{name} det={det}"] = distinct
        print(f"{name:32s} det={det} distinct results of 6: {distinct}")
json.dump(out, open(os.path.join(os.environ.get("OUT", "."), "extra.json"), "w"), indent=1)
