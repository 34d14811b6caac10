"""run_on_gpu.sh, last: the catalogue's [compile.*] and [environment.*] entries, which
verify_on_cuda.py has no case for. Each case records what happened, never asserts: the JSON
(recorded as environment-run.json and merged into the CUDA record) is compared with each entry's
condition by test_catalog_cuda_record.py, and NOTES.md says what it shows. `distinct` counts the
different results of `RUNS` runs on the same inputs: 1 means the run repeated bit for bit.

DEV=cpu runs it without a GPU (a dry run of the script itself; CPU answers say nothing of CUDA)."""
import importlib.util, json, os, traceback
import torch, torch.nn.functional as F

dev = os.environ.get("DEV", "cuda")
RUNS = 6
out = {"torch": torch.__version__, "git": torch.version.git_version, "device": dev, "cases": {}}


def _bits(tensors) -> list:
    return [t.detach().contiguous().reshape(-1).view(torch.uint8) for t in tensors]


def record(name, fn):
    try:
        value = fn()
    except Exception as e:  # the exception is the answer for some entries
        value = {"raised": f"{type(e).__name__}: {str(e).splitlines()[0][:240] if str(e) else ''}"}
        if os.environ.get("TRACE"):
            traceback.print_exc()
    out["cases"][name] = value
    print(name, value, flush=True)


def distinct(make, deterministic: bool) -> dict:
    """How many different results RUNS runs of `make` give (inputs drawn once, with seed 0)."""
    torch.use_deterministic_algorithms(deterministic)
    try:
        torch.manual_seed(0)
        step = make()
        seen: list[list] = []  # each different result once, compared bit for bit
        for _ in range(RUNS):
            result = _bits(step())
            if not any(all(torch.equal(a, b) for a, b in zip(result, other)) for other in seen):
                seen.append(result)
        return {"distinct": len(seen)}
    finally:
        torch.use_deterministic_algorithms(False)


# -- environment.fill_uninitialized_memory -----------------------------------------------------
def filled(deterministic: bool, fill: bool = True) -> dict:
    import torch.utils.deterministic as det

    before = det.fill_uninitialized_memory
    # Leave a known pattern in the memory the allocations below will be given (CUDA's caching
    # allocator hands back freed blocks as they are): a case then sees either its fill or 7s,
    # not what an earlier case filled them with.
    scratch = [torch.full((1 << 20,), 7.0, device=dev) for _ in range(8)]
    del scratch
    det.fill_uninitialized_memory = fill
    torch.use_deterministic_algorithms(deterministic)
    try:
        f = torch.empty(1 << 20, device=dev)
        i = torch.empty(1 << 16, dtype=torch.int64, device=dev)
        like = torch.empty_like(f)
        new = f.new_empty(1 << 16)
        strided = torch.empty_strided((256, 256), (256, 1), device=dev)
        grown = torch.zeros(4, device=dev)
        grown.resize_(1 << 16)
        return {
            "empty_any_seven": bool((f == 7.0).any()),
            "empty_all_nan": bool(f.isnan().all()),
            "empty_int64_all_max": bool((i == torch.iinfo(torch.int64).max).all()),
            "empty_like_all_nan": bool(like.isnan().all()),
            "new_empty_all_nan": bool(new.isnan().all()),
            "empty_strided_all_nan": bool(strided.isnan().all()),
            "resize_growth_all_nan": bool(grown[4:].isnan().all()),
        }
    finally:
        torch.use_deterministic_algorithms(False)
        det.fill_uninitialized_memory = before


record("fill_uninitialized_memory_mode_on_fill_off", lambda: filled(True, fill=False))
record("fill_uninitialized_memory_mode_off", lambda: filled(False))
record("fill_uninitialized_memory_mode_on", lambda: filled(True))


# -- compile.inductor_config_deterministic -------------------------------------------------------
def inductor_flag() -> dict:
    import torch._inductor.config as config

    found = {"has_attribute": hasattr(config, "deterministic")}
    if found["has_attribute"]:
        found["default"] = config.deterministic
        torch.use_deterministic_algorithms(True)
        try:
            found["with_mode_on"] = config.deterministic
        finally:
            torch.use_deterministic_algorithms(False)
    return found


record("inductor_config_deterministic", inductor_flag)


# -- compile.inductor_scatter_fallback / inductor_index_put_fallback / max_pool2d decomposition --
def compiled_scatter_add():
    index = torch.randint(0, 64, (1 << 20,), device=dev)
    src = torch.randn(1 << 20, device=dev)
    fn = torch.compile(lambda i, s: torch.zeros(64, device=dev).scatter_add(0, i, s), dynamic=False)
    return lambda: [fn(index, src)]


def compiled_index_put_accumulate():
    index = torch.randint(0, 64, (1 << 20,), device=dev)
    values = torch.randn(1 << 20, device=dev)
    fn = torch.compile(lambda i, v: torch.zeros(64, device=dev).index_put((i,), v, accumulate=True), dynamic=False)
    return lambda: [fn(index, values)]


def compiled_max_pool2d_backward():
    # Overlapping windows on a tensor with many ties: several outputs send gradient to one input.
    x = torch.randint(0, 3, (16, 16, 64, 64), device=dev).float().requires_grad_(True)
    grad = torch.randn(16, 16, 62, 62, device=dev)
    fn = torch.compile(lambda t: F.max_pool2d(t, 3, stride=1), dynamic=False)

    def step():
        x.grad = None
        fn(x).backward(grad)
        return [x.grad]

    return step


for name, make in (
    ("compiled_scatter_add", compiled_scatter_add),
    ("compiled_index_put_accumulate", compiled_index_put_accumulate),
    ("compiled_max_pool2d_backward", compiled_max_pool2d_backward),
):
    torch._dynamo.reset()
    record(name + "_mode_off", lambda make=make: distinct(make, False))
    torch._dynamo.reset()
    record(name + "_mode_on", lambda make=make: distinct(make, True))


# -- compile.flex_attention_flash_backward ---------------------------------------------------------
def flex_flash_backward() -> dict:
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    q, k, v = (torch.randn(1, 2, 256, 64, device=dev, requires_grad=True) for _ in range(3))
    mask = create_block_mask(lambda b, h, qi, ki: qi >= ki, 1, 1, 256, 256, device=dev)
    fn = torch.compile(flex_attention)
    torch.use_deterministic_algorithms(True)
    try:
        fn(q, k, v, block_mask=mask, kernel_options={"BACKEND": "FLASH"}).sum().backward()
        return {"raised": None}
    finally:
        torch.use_deterministic_algorithms(False)


if dev == "cuda":
    out["capability"] = list(torch.cuda.get_device_capability())
    torch._dynamo.reset()
    record("flex_attention_flash_backward_mode_on", flex_flash_backward)


# -- environment.topk_cutedsl -----------------------------------------------------------------
def topk_ties():
    x = torch.randint(0, 4, (64, 4096), device=dev).float()  # many ties
    return lambda: list(torch.topk(x, 256, dim=-1, largest=True, sorted=True))


record("cutlass_dsl_installed", lambda: {"found": importlib.util.find_spec("cutlass") is not None})
record("topk_ties_mode_off", lambda: distinct(topk_ties, False))
record("topk_ties_mode_on", lambda: distinct(topk_ties, True))

# environment.nccl_nvls needs NVLS hardware (NVSwitch, several GPUs): not run on one GPU.
out["cases"]["nccl_nvls"] = {"not_run": "one GPU, no NVSwitch"}

json.dump(out, open(os.path.join(os.environ.get("OUT", "."), "environment.json"), "w"), indent=1)
