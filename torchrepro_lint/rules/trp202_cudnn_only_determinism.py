from __future__ import annotations

import libcst as cst

from torchrepro_lint.project.known_apis import Kind
from torchrepro_lint.project.programs import DET_MODE
from torchrepro_lint.rules.base import Example, Rule
from torchrepro_lint.rules.edits import insert_after, make_fix, module_name_for


class CudnnOnlyDeterminism(Rule):
    code = "TRP202"
    name = "cudnn-only-determinism"
    summary = "`cudnn.deterministic = True`, but deterministic mode is never enabled."
    why = (
        "The cuDNN flag covers cuDNN convolutions only. Atomics-based CUDA kernels (`index_add`, "
        "`scatter_add`, pooling and interpolation backward, ...) stay nondeterministic, and "
        "nothing warns about them unless `torch.use_deterministic_algorithms(True)` is on."
    )
    fix_safety = "unsafe"
    fix = (
        "Add `torch.use_deterministic_algorithms(True)` next to it (with `warn_only=True` to find "
        "the offending ops first). The fix adds it on the line after the flag; there is no fix for "
        "`with cudnn.flags(deterministic=True):`, whose flag ends with the block. Unsafe: ops "
        "without a deterministic implementation will raise."
    )
    not_reported = (
        "A program that also calls `torch.use_deterministic_algorithms(True)` (`warn_only=True` "
        "included) on some path.",
        "A program whose helper enables deterministic mode: `transformers.set_seed(..., "
        "deterministic=True)`, Lightning's `Trainer(deterministic=True)`.",
        "A flag in code that no program runs.",
    )
    where_reported = (
        "At each `cudnn.deterministic = True` or `cudnn.flags(deterministic=True)` that runs in a "
        "program which enables deterministic mode on no path.",
        "Once per flag, however many programs reach it.",
    )
    options = ("`deterministic-functions`: calls to these helpers enable deterministic mode.",)
    reference = (
        ("Reproducibility: Avoiding nondeterministic algorithms", "https://pytorch.org/docs/stable/notes/randomness.html#avoiding-nondeterministic-algorithms"),
        ("torch.use_deterministic_algorithms", "https://pytorch.org/docs/stable/generated/torch.use_deterministic_algorithms.html"),
    )
    hazards = (
        Example(
            '''import torch

if __name__ == "__main__":
    torch.manual_seed(0)
    torch.backends.cudnn.deterministic = True  # <-- TRP202
''',
            "The classic recipe",
            fixed='''import torch

if __name__ == "__main__":
    torch.manual_seed(0)
    torch.backends.cudnn.deterministic = True
    torch.use_deterministic_algorithms(True)
''',
        ),
        Example(
            {
                "train.py": '''from setup_utils import make_reproducible

if __name__ == "__main__":
    make_reproducible()
''',
                "setup_utils.py": '''import torch.backends.cudnn as cudnn

def make_reproducible():
    cudnn.deterministic = True  # <-- TRP202
    cudnn.benchmark = False
''',
            },
            "In a helper module",
        ),
        Example(
            '''import torch

def main():
    with torch.backends.cudnn.flags(deterministic=True):  # <-- TRP202
        pass

if __name__ == "__main__":
    main()
''',
            "Through `cudnn.flags`",
        ),
    )
    traps = (
        Example(
            '''import torch

if __name__ == "__main__":
    torch.backends.cudnn.deterministic = True
    torch.use_deterministic_algorithms(True)
''',
            "Deterministic mode enabled too",
        ),
        Example(
            '''import torch
from transformers import set_seed

if __name__ == "__main__":
    torch.backends.cudnn.deterministic = True
    set_seed(0, deterministic=True)
''',
            "A helper enables deterministic mode",
        ),
        Example(
            '''import torch

def configure():
    torch.backends.cudnn.deterministic = True
''',
            "Not reachable from any program",
        ),
    )

    def check_programs(self, context):
        for program in context.programs:
            if program.facts.has(*DET_MODE):
                continue
            for occurrence in program.facts.of(Kind.CUDNN_DETERMINISTIC):
                module, ref = occurrence.site
                yield context.report(
                    self,
                    module,
                    ref,
                    "`cudnn.deterministic` covers cuDNN convolutions only; scatter/index_add/pooling "
                    "backward kernels stay nondeterministic: also call `torch.use_deterministic_algorithms(True)`",
                    fix=enable_deterministic_mode(module, module.nodes[ref]),
                )


def enable_deterministic_mode(module, node):
    """`torch.use_deterministic_algorithms(True)` on the line after `node`'s statement."""
    if isinstance(module.index.parents.get(node), cst.WithItem):
        return None  # `with cudnn.flags(...)`: the flag ends with the block; no line to add
    torch, imports = module_name_for(module, "torch")
    line = f"{torch}.use_deterministic_algorithms(True)"
    return make_fix("unsafe", f"Add `{line}`", [*imports, insert_after(module, node, line)])
