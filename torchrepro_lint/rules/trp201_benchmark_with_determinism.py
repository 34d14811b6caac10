from __future__ import annotations

import libcst as cst

from torchrepro_lint.rules.context import describe, independent
from torchrepro_lint.rules.base import Example, Rule
from torchrepro_lint.rules.edits import make_fix, replace


class BenchmarkWithDeterminism(Rule):
    code = "TRP201"
    name = "benchmark-with-determinism"
    summary = "`cudnn.benchmark = True` in a program that claims determinism."
    why = (
        "With benchmark mode cuDNN times several convolution algorithms on the first batches and "
        "keeps the fastest, which depends on timing noise, so each process may pick a different "
        "algorithm with different rounding. The program says it wants determinism, and this "
        "switch quietly takes it away."
    )
    fix_safety = "safe"
    fix = (
        "Set `cudnn.benchmark = False` on the path that claims determinism. The fix turns the "
        "reported `True` into `False`, in an assignment or a `benchmark=True` keyword."
    )
    not_reported = (
        "A switch in a branch exclusive with the claim: `if args.deterministic: ... else: "
        "cudnn.benchmark = True`.",
        "`cudnn.benchmark = not args.deterministic`.",
        "A switch reset to `False` on the claiming path: it is no longer on at the end.",
        "Two switches set under independent runtime flags (`if cfg.cudnn_benchmark:` and "
        "`if args.deterministic:`): a configuration choice, not a contradiction.",
        "Code that is imported but never runs, such as the `__init__` of a class that is never "
        "instantiated.",
        "`allow_tf32` and the other cuDNN flags.",
    )
    where_reported = (
        "At the switch that turns benchmark mode on: `cudnn.benchmark = True` (any alias), "
        "`torch.backends.cudnn.flags(benchmark=True)`, or Lightning's `Trainer(benchmark=True)`.",
        "Only when, on some path of the program, benchmark mode is still on at the end while "
        "determinism is claimed on that path (`use_deterministic_algorithms(True)`, "
        "`cudnn.deterministic = True`, a helper with its deterministic switch on, ...).",
        "A process the program spawns (`torch.multiprocessing.spawn`, ...) is checked as a run of "
        "its own, starting from default flags.",
        "Once per switch, however many programs reach it.",
    )
    decisions = (
        "Lightning's `Trainer(deterministic=True)` without `benchmark=` sets benchmark to False "
        "(its accelerator connector does), so it resets an earlier `cudnn.benchmark = True`.",
    )
    options = ("`deterministic-functions`: calls to these helpers claim determinism.",)
    reference = (
        ("Reproducibility: CUDA convolution benchmarking", "https://pytorch.org/docs/stable/notes/randomness.html#cuda-convolution-benchmarking"),
        ("torch.backends.cudnn.benchmark", "https://pytorch.org/docs/stable/backends.html#torch.backends.cudnn.benchmark"),
    )
    hazards = (
        Example(
            '''import torch

if __name__ == "__main__":
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = True  # <-- TRP201
''',
            "Both switches on",
            fixed='''import torch

if __name__ == "__main__":
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False
''',
        ),
        Example(
            {
                "train.py": '''import torch
from torch.backends import cudnn
from utils import init_seeds

def main(args):
    cudnn.benchmark = True  # <-- TRP201
    init_seeds(args.seed, deterministic=True)

if __name__ == "__main__":
    main(None)
''',
                "utils.py": '''import torch

def init_seeds(seed=0, deterministic=False):
    torch.manual_seed(seed)
    if deterministic:
        torch.use_deterministic_algorithms(True)
''',
            },
            "Determinism enabled through a helper's keyword argument",
        ),
        Example(
            '''import torch
import torch.backends.cudnn as cudnn

def main(args):
    if torch.cuda.is_available():
        cudnn.benchmark = True  # <-- TRP201
    torch.use_deterministic_algorithms(True)

if __name__ == "__main__":
    main(None)
''',
            "Set under a condition, claim unconditional",
        ),
    )
    traps = (
        Example(
            '''import torch

def main(args):
    if args.deterministic:
        torch.backends.cudnn.deterministic = True
    else:
        torch.backends.cudnn.benchmark = True

if __name__ == "__main__":
    main(None)
''',
            "Exclusive branches",
        ),
        Example(
            '''import torch
from torch.backends import cudnn

def main(args):
    cudnn.deterministic = args.deterministic
    cudnn.benchmark = not args.deterministic

if __name__ == "__main__":
    main(None)
''',
            "`benchmark = not deterministic`",
        ),
        Example(
            {
                "train.py": '''import torch
from fastpath import Accelerated

if __name__ == "__main__":
    torch.use_deterministic_algorithms(True)
''',
                "fastpath.py": '''import torch

class Accelerated:
    def __init__(self):
        torch.backends.cudnn.benchmark = True
''',
            },
            "Imported but never instantiated",
        ),
        Example(
            '''import torch

if __name__ == "__main__":
    torch.backends.cudnn.benchmark = True
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False
''',
            "Reset to False on the claiming path",
        ),
        Example(
            '''import torch

def main(cfg, args):
    if cfg.cudnn_benchmark:
        torch.backends.cudnn.benchmark = True
    if args.deterministic:
        torch.use_deterministic_algorithms(True)

if __name__ == "__main__":
    main(None, None)
''',
            "Independent runtime flags",
        ),
    )

    def check_programs(self, context):
        for program in context.programs:
            runs = [program.facts.final_states] + [child.final_states for _, _, child in program.facts.spawns]
            for states in runs:
                for state in states:
                    if state.claim is None or state.benchmark is None:
                        continue
                    if independent(state.claim.guards, state.benchmark.guards):
                        continue
                    module, ref = state.benchmark.site
                    yield context.report(
                        self,
                        module,
                        ref,
                        f"cuDNN benchmark mode is on while the program claims determinism "
                        f"({describe(state.claim.site)}): it picks convolution algorithms by timing, "
                        "differently in each process; set `cudnn.benchmark = False`",
                        fix=_fix(module, module.nodes[ref]),
                    )


def _fix(module, node):
    """`benchmark = True` -> `False`, in an assignment or a `benchmark=True` keyword."""
    value = None
    if isinstance(node, cst.Assign) and len(node.targets) == 1:
        value = node.value
    elif isinstance(node, cst.Call):
        value = next((a.value for a in node.args if a.keyword is not None and a.keyword.value == "benchmark"), None)
    if not (isinstance(value, cst.Name) and value.value == "True"):
        return None
    return make_fix("safe", "Set `cudnn.benchmark = False`", [replace(module, value, "False")])
