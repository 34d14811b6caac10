from __future__ import annotations

import libcst as cst

from torchrepro_lint.project.known_apis import Kind
from torchrepro_lint.project.programs import torch_randomness
from torchrepro_lint.rules.base import Example, Rule
from torchrepro_lint.rules.edits import make_fix, module_name_for, replace


class CudaOnlySeed(Rule):
    code = "TRP106"
    name = "cuda-only-seed"
    summary = "Only the CUDA generators are seeded: torch's CPU generator stays random."
    why = (
        "`torch.cuda.manual_seed(_all)` seeds the GPUs' generators only. Modules are initialised on "
        "the CPU before `.cuda()`, and CPU-side draws (`randperm` for shuffling, augmentations) use "
        "the CPU generator, which stays on OS entropy."
    )
    fix_safety = "safe"
    fix = (
        "Use `torch.manual_seed(seed)`, which seeds the CPU generator and every CUDA device. The fix "
        "replaces the called function, keeping the arguments and the module's spelling of torch."
    )
    not_reported = (
        "A program that also seeds torch: `torch.manual_seed` beside the CUDA seed, or a helper that calls it.",
        "A program with no torch randomness (it draws only from `random`, say): the CUDA seed has "
        "nothing to protect.",
        "A CUDA seeding call that no program reaches, such as a helper nobody calls.",
    )
    where_reported = (
        "At each `torch.cuda.manual_seed` or `torch.cuda.manual_seed_all` call the program reaches: in "
        "the entry module, or inside the helper that makes it, in whatever module.",
        "Only in programs that draw from torch and never call `torch.manual_seed` (or a helper that "
        "does). Such programs get TRP106, not TRP101.",
    )
    options = (
        "`seed-functions`: helpers the linter cannot see (installed packages) that seed `random`, "
        "NumPy and torch; a program that calls one is seeded.",
    )
    reference = (
        ("Reproducibility", "https://pytorch.org/docs/stable/notes/randomness.html"),
        ("torch.manual_seed", "https://pytorch.org/docs/stable/generated/torch.manual_seed.html"),
        ("torch.cuda.manual_seed_all", "https://pytorch.org/docs/stable/generated/torch.cuda.manual_seed_all.html"),
    )
    hazards = (
        Example(
            '''import torch
import torch.nn as nn

if __name__ == "__main__":
    torch.cuda.manual_seed_all(0)  # <-- TRP106
    model = nn.Linear(4, 4).cuda()
''',
            "Only the GPUs seeded",
            fixed='''import torch
import torch.nn as nn

if __name__ == "__main__":
    torch.manual_seed(0)
    model = nn.Linear(4, 4).cuda()
''',
        ),
        Example(
            '''import torch

def seed(s):
    torch.cuda.manual_seed(s)  # <-- TRP106

if __name__ == "__main__":
    seed(1)
    idx = torch.randperm(100)
''',
            "In a helper",
        ),
        Example(
            {
                "run.py": '''import torch
import util

if __name__ == "__main__":
    util.seed_gpus(3)
    weights = torch.rand(10)
''',
                "util.py": '''import torch

def seed_gpus(s):
    torch.cuda.manual_seed_all(s)  # <-- TRP106
''',
            },
            "In another module",
        ),
    )
    traps = (
        Example(
            '''import torch

if __name__ == "__main__":
    torch.manual_seed(0)
    torch.cuda.manual_seed_all(0)
    x = torch.rand(3)
''',
            "Both seeded",
        ),
        Example(
            '''import random
import torch

if __name__ == "__main__":
    random.seed(0)
    torch.cuda.manual_seed(0)
    print(random.random())
''',
            "No torch randomness to protect",
        ),
        Example(
            '''import torch

def seed_all(s):
    torch.cuda.manual_seed_all(s)
''',
            "Not reachable from any program",
        ),
    )

    def check_programs(self, context):
        for program in context.programs:
            facts = program.facts
            if facts.has(Kind.SEED_TORCH) or torch_randomness(facts) is None:
                continue
            for occurrence in facts.of(Kind.SEED_CUDA):
                module, ref = occurrence.site
                message = (
                    "`torch.cuda.manual_seed*` seeds only the GPUs; the CPU generator (module init, "
                    "randperm, augmentations) stays random: use `torch.manual_seed`, which seeds every device"
                )
                anchor_module, anchor_ref = occurrence.anchor
                yield context.report(self, module, ref, message, fix=_fix(module, module.nodes[ref])) or context.report(
                    self, anchor_module, anchor_ref, message
                )


def _fix(module, call):
    """`torch.cuda.manual_seed_all(s)` -> `torch.manual_seed(s)`, keeping the module's spelling."""
    if not isinstance(call, cst.Call):
        return None
    func = call.func
    if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Attribute) and func.value.attr.value == "cuda":
        base = module.index.module.code_for_node(func.value.value)
        return make_fix("safe", "Use `torch.manual_seed`, which seeds every device", [replace(module, func, f"{base}.manual_seed")])
    torch, imports = module_name_for(module, "torch")
    return make_fix("safe", "Use `torch.manual_seed`, which seeds every device", [*imports, replace(module, func, f"{torch}.manual_seed")])
