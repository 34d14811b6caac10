from __future__ import annotations

from torchrepro_lint.project.extract.autotune import CONFIG, ENV, MODE, OPTIONS, PATCH
from torchrepro_lint.project.known_apis import AUTOTUNE_SWITCHES, Kind
from torchrepro_lint.rules.base import Example, Rule
from torchrepro_lint.rules.context import describe, independent
from torchrepro_lint.rules.edits import insert_after, insert_before, make_fix, module_name_for


class CompileAutotuneWithDeterminism(Rule):
    code = "TRP207"
    name = "compile-autotune-with-determinism"
    summary = (
        'Compiled-kernel autotuning (`torch.compile(mode="max-autotune")`, Inductor\'s tuning '
        "switches) in a program that claims determinism without deterministic mode."
    )
    why = (
        "Max-autotune makes Inductor pick each matmul and convolution kernel by timing the "
        "candidates on the device, and coordinate-descent tuning retunes reductions' block sizes "
        "and warps by timing them: choices that change the order of floating-point sums. Timing "
        "noise picks differently from run to run, so the compiled model gives different results. "
        "It is the `cudnn.benchmark` of compiled code. Inductor's deterministic mode skips this "
        "tuning, and since torch 2.10 `torch.use_deterministic_algorithms(True)` turns it on."
    )
    fix_safety = "unsafe"
    fix = (
        "Turn deterministic mode on: `torch.use_deterministic_algorithms(True)`, which also turns on "
        "Inductor's deterministic mode (`torch._inductor.config.deterministic`) and keeps it on. "
        'For one compile only, pass `options={"max_autotune": True, "deterministic": True}` '
        "instead of the mode. The fix adds the call on the line after the determinism claim when "
        "that is in the same file, before the finding, else on the line before the reported "
        "statement (importing torch if needed). Unsafe: ops without a deterministic "
        "implementation will raise, and the compiled kernels are slower."
    )
    not_reported = (
        "A program that turns deterministic mode on on the same path: "
        "`torch.use_deterministic_algorithms(True)` (`warn_only=True` too), Lightning's "
        "`Trainer(deterministic=True)`, `transformers.enable_full_determinism`, ... (torch 2.10 "
        "and newer: it sets `torch._inductor.config.deterministic`).",
        "A program that claims no determinism: a benchmark or a speed test.",
        '`mode="reduce-overhead"`, `mode="default"`, no mode, and `max_autotune_pointwise`.',
        "A mode or options the linter cannot read: `mode=args.compile_mode`, `options=opts`, "
        "another `backend=`, `disable=True`.",
        '`options={..., "deterministic": True}` on the compile call itself.',
        "A tuner switch turned off again on the path (`torch._inductor.config.max_autotune = "
        "False`), a tuner and a claim in exclusive branches or under independent runtime flags "
        "(as TRP201).",
    )
    where_reported = (
        'At the compile call that asks for tuning: `torch.compile(..., mode="max-autotune")` or '
        '`"max-autotune-no-cudagraphs"`, `options={"max_autotune": True}` (or `max_autotune_gemm`, '
        "`coordinate_descent_tuning`), `module.compile(...)`, `@torch.compile(...)`; the mode may be "
        "a variable bound to a literal the linter sees (a parameter's default, an argument).",
        "At the switch that turns a tuner on: `torch._inductor.config.max_autotune = True` (any "
        "import form; also `max_autotune_gemm` and `coordinate_descent_tuning`), "
        "`torch._inductor.config.patch(max_autotune=True)` as a context manager, a call or a "
        'decorator, and `os.environ["TORCHINDUCTOR_MAX_AUTOTUNE"] = "1"` (`_GEMM`, '
        "`TORCHINDUCTOR_COORDINATE_DESCENT_TUNING`) where it is surely read (see the decisions).",
        "Only where, on some path of the program, a tuner is on at the end while determinism is "
        "claimed on that path (as TRP201 reads a claim: `cudnn.deterministic = True`, a helper's "
        "deterministic switch, ...) and deterministic mode is not on. Spawned processes are runs "
        "of their own. Once per place, however many programs reach it.",
    )
    decisions = (
        "Read in torch 2.13.0 (the same in 2.14.1): `list_mode_options` gives both max-autotune "
        "modes `max_autotune` and `coordinate_descent_tuning`; `select_algorithm.py` times matmul "
        "and convolution templates under `max_autotune or max_autotune_gemm` unless "
        "`config.deterministic` (then `pick_deterministic_choice`); `triton_heuristics.py`'s "
        "`_should_coordesc_tune` skips reductions in deterministic mode, because RBLOCK and "
        "num_warps \"shift numerics\"; `use_deterministic_algorithms` sets "
        "`torch._inductor.config.deterministic = mode` (torch/__init__.py, since PR #165950, in "
        "2.10).",
        "`torch._inductor.config.deterministic = True` (also `TORCHINDUCTOR_DETERMINISTIC=1`, "
        "`config.patch(deterministic=True)`) does not silence the rule: Dynamo restores "
        "`use_deterministic_algorithms(<its state>)` after tracing each frame "
        "(_dynamo/convert_frame.py, `preserve_global_state`), which sets the flag back to False, so "
        "the backward graph and later frames are compiled and tuned without it (seen on torch "
        "2.13.0: the backward graph lowered with `deterministic=False`). The message says so.",
        "Inductor reads its config when the compiled code first runs, not at `torch.compile(...)`, "
        "so the order of the switches and the claim does not matter: as TRP201, what is on at "
        "the end of a path counts. A switch set after the compile call still tunes it.",
        "`max_autotune_pointwise` is not reported: pointwise block sizes do not change results, and "
        "the reduction configs it adds are also timed in the default mode, which deterministic "
        "mode filters (`filter_reduction_configs_for_determinism`). The default mode is not "
        "reported either, though it times a few reduction configs without deterministic mode: "
        "TRP202 and TRP205 speak for a program without it.",
        "An environment variable set in code counts only at the entry module's top level before "
        "it imports anything but a few standard modules (`os`, `sys`, ...): Inductor reads it once, "
        "when `torch._inductor.config` is imported, which `torch._dynamo` and the libraries that "
        "import it do. A variable exported by the shell or a launcher is invisible to a linter.",
        "`torch.set_deterministic_debug_mode(...)` counts as deterministic mode, though it does not "
        "set Inductor's flag itself: the first frame's forward graph is compiled before Dynamo's "
        "restore sets it (precision first). Releases before 2.10, whose "
        "`use_deterministic_algorithms` did not touch Inductor, were not read: there too, a program "
        "in deterministic mode is not reported.",
        "Framework options that compile for you (`TrainingArguments(torch_compile_mode=...)`) are "
        "not followed; `batch_invariant` is not modelled (it stops coordinate descent on "
        "reductions, not template autotuning).",
    )
    options = (
        "`deterministic-functions`: calls to these helpers enable deterministic mode, and so "
        "Inductor's: the rule is silent on the paths that call one.",
    )
    reference = (
        ("torch.compile", "https://pytorch.org/docs/stable/generated/torch.compile.html"),
        ("torch.use_deterministic_algorithms", "https://pytorch.org/docs/stable/generated/torch.use_deterministic_algorithms.html"),
        ("pytorch#165950: Inductor's deterministic mode on with use_deterministic_algorithms", "https://github.com/pytorch/pytorch/pull/165950"),
    )
    hazards = (
        Example(
            '''import torch

def main():
    torch.manual_seed(0)
    torch.backends.cudnn.deterministic = True
    model = torch.nn.Linear(64, 64).cuda()
    model = torch.compile(model, mode="max-autotune")  # <-- TRP207

if __name__ == "__main__":
    main()
''',
            "Max-autotune under a cuDNN-only claim",
            fixed='''import torch

def main():
    torch.manual_seed(0)
    torch.backends.cudnn.deterministic = True
    torch.use_deterministic_algorithms(True)
    model = torch.nn.Linear(64, 64).cuda()
    model = torch.compile(model, mode="max-autotune")

if __name__ == "__main__":
    main()
''',
        ),
        Example(
            {
                "train.py": '''import torch
from speedups import enable_fast_kernels

def main():
    torch.backends.cudnn.deterministic = True
    enable_fast_kernels()
    model = torch.compile(torch.nn.Linear(64, 64))

if __name__ == "__main__":
    main()
''',
                "speedups.py": '''import torch._inductor.config

def enable_fast_kernels():
    torch._inductor.config.coordinate_descent_tuning = True  # <-- TRP207
''',
            },
            "A tuner switched on in a helper module",
        ),
        Example(
            '''import torch
from torch._inductor import config as inductor_config

def build(model, mode="max-autotune-no-cudagraphs"):
    return torch.compile(model, mode=mode)  # <-- TRP207

def main():
    torch.backends.cudnn.deterministic = True
    inductor_config.deterministic = True
    model = build(torch.nn.Linear(64, 64))

if __name__ == "__main__":
    main()
''',
            "A mode given as a default, and Inductor's flag set alone",
        ),
        Example(
            '''import torch
import torch._inductor.config

def main():
    torch.backends.cudnn.deterministic = True
    model = torch.compile(torch.nn.Linear(64, 64))
    with torch._inductor.config.patch(max_autotune=True):  # <-- TRP207
        model(torch.ones(2, 64))

if __name__ == "__main__":
    main()
''',
            "A config patch around the first call",
        ),
    )
    traps = (
        Example(
            '''import torch

def main():
    torch.use_deterministic_algorithms(True)
    model = torch.compile(torch.nn.Linear(64, 64), mode="max-autotune")

if __name__ == "__main__":
    main()
''',
            "Deterministic mode turns Inductor's deterministic mode on",
        ),
        Example(
            '''import time
import torch

def main():
    model = torch.compile(torch.nn.Linear(64, 64).cuda(), mode="max-autotune")
    start = time.perf_counter()
    model(torch.ones(8, 64, device="cuda"))
    print(time.perf_counter() - start)

if __name__ == "__main__":
    main()
''',
            "A benchmark claims no determinism",
        ),
        Example(
            '''import torch

def main():
    torch.backends.cudnn.deterministic = True
    model = torch.compile(torch.nn.Linear(64, 64), mode="reduce-overhead")

if __name__ == "__main__":
    main()
''',
            "`reduce-overhead` does not autotune",
        ),
        Example(
            '''import torch

def main(args):
    torch.backends.cudnn.deterministic = True
    model = torch.compile(torch.nn.Linear(64, 64), mode=args.compile_mode)

if __name__ == "__main__":
    main(None)
''',
            "A mode the linter cannot read",
        ),
        Example(
            '''import torch

def main():
    torch.backends.cudnn.deterministic = True
    model = torch.compile(
        torch.nn.Linear(64, 64), options={"max_autotune": True, "deterministic": True}
    )

if __name__ == "__main__":
    main()
''',
            "Deterministic for this compile",
        ),
        Example(
            '''import torch

def main(args):
    if args.deterministic:
        torch.backends.cudnn.deterministic = True
    else:
        torch._inductor.config.max_autotune = True
    model = torch.compile(torch.nn.Linear(64, 64))

if __name__ == "__main__":
    main(None)
''',
            "Exclusive branches",
        ),
    )

    def check_programs(self, context):
        done: set = set()
        for program in context.programs:
            runs = [program.facts, *(child for _, _, child in program.facts.spawns)]
            for facts in runs:
                for state in facts.final_states:
                    if state.claim is None or state.det_mode or not state.autotune:
                        continue
                    for tuner in state.autotune:
                        if tuner.site in done or independent(state.claim.guards, tuner.guards):
                            continue
                        done.add(tuner.site)
                        module, ref = tuner.site
                        yield context.report(
                            self,
                            module,
                            ref,
                            _message(tuner.detail, state.claim.site, bool(facts.of(Kind.INDUCTOR_DETERMINISTIC))),
                            fix=_fix(module, module.nodes[ref], state.claim.site),
                        )


_ASKED = {
    MODE: "`mode=\"{knob}\"`",
    OPTIONS: '`options={{"{knob}": ...}}`',
    CONFIG: "`torch._inductor.config.{knob} = True`",
    PATCH: "`torch._inductor.config.patch({knob}=...)`",
    ENV: "`{knob}=1`",
}
_TIMES_TEMPLATES = "picks matmul and convolution kernels by timing them on the device"
_TIMES_REDUCTIONS = "retunes reductions' block sizes and warps by timing them"


def _message(detail: tuple, claim_site, inductor_flag_set: bool) -> str:
    source, knob = detail
    shown = AUTOTUNE_SWITCHES[knob] if source == ENV else knob
    if source == MODE:
        what = f"{_TIMES_TEMPLATES} and {_TIMES_REDUCTIONS}"
    else:
        what = _TIMES_REDUCTIONS if knob == "coordinate_descent_tuning" else _TIMES_TEMPLATES
    message = (
        f"{_ASKED[source].format(knob=shown)} {what}, differently from run to run, while the program "
        f"claims determinism ({describe(claim_site)}); `torch.use_deterministic_algorithms(True)` "
        "also turns on Inductor's deterministic mode, which skips this tuning"
    )
    if inductor_flag_set:
        message += (
            " (`torch._inductor.config.deterministic = True` alone does not last: Dynamo sets it back "
            "after tracing a frame, so the backward and later graphs are tuned)"
        )
    return message


def _fix(module, node, claim_site):
    """`torch.use_deterministic_algorithms(True)` after the claim (the line TRP202's fix adds, so
    the two fixes make one line), where the claim is in this file before the finding; else before
    the reported statement."""
    torch, imports = module_name_for(module, "torch")
    line = f"{torch}.use_deterministic_algorithms(True)"
    claim_module, claim_ref = claim_site
    edit = None
    if claim_module is module and claim_ref is not None:
        claim = module.nodes[claim_ref]
        if module.source.span(claim)[0] < module.source.span(node)[0]:
            edit = insert_after(module, claim, line)
    if edit is None:
        edit = insert_before(module, node, line)
    return make_fix("unsafe", f"Add `{line}`", [*imports, edit])
