from __future__ import annotations

from torchrepro_lint.rules.context import describe
from torchrepro_lint.project.known_apis import TRAINER_SEED, Kind
from torchrepro_lint.project.programs import CLAIMS, main_path_seeds
from torchrepro_lint.rules.trp202_cudnn_only_determinism import enable_deterministic_mode
from torchrepro_lint.rules.base import Example, Rule


class SeededNotDeterministic(Rule):
    code = "TRP205"
    name = "seeded-not-deterministic"
    summary = "A CUDA program seeds torch but never asks for deterministic kernels."
    why = (
        "Seeding fixes the random numbers, not the arithmetic. On CUDA, cuDNN picks convolution "
        "algorithms and atomics-based kernels (scatter, index_add, many backward passes) sum in "
        "whatever order threads finish, so the same seed still gives different losses after a "
        "few hundred steps."
    )
    fix_safety = "unsafe"
    fix = (
        "Add `torch.use_deterministic_algorithms(True)` after the seed; the fix inserts it on the "
        "line after the reported seeding statement. Keep `torch.backends.cudnn.benchmark` off "
        "(TRP201 reports it when on). Unsafe: it can slow training down and makes ops without a "
        "deterministic implementation raise; `warn_only=True` finds them first."
    )
    not_reported = (
        "A CPU-only program, or one whose device comes only from configuration: an unknown device "
        "is not taken for CUDA.",
        "A program that claims determinism in any way, `cudnn.deterministic = True` included "
        "(TRP202 covers what that flag misses).",
        "Asking about the device without using it: printing or comparing the accelerator, "
        "`device_count()`, `torch.cuda.synchronize()` inside `if "
        "torch.cuda.is_available():` (a timing helper waits for work put there by something else).",
        'Lightning\'s `accelerator="auto"`, `accelerate.Accelerator()` (also with `cpu=False`, the '
        'default, or `mixed_precision="fp16"`, which it drops on a CPU) and Hugging Face\'s '
        "`Trainer`: each uses a GPU only when one is present.",
        "A program whose only seed is the one Hugging Face's `Trainer` (or a project subclass) sets "
        "as it is built (`args.seed`, 42 unless given).",
        "A seed only in a `worker_init_fn`: it seeds each worker, not the main process.",
        '`torch.amp.GradScaler(enabled=False)` and `torch.autocast(device_type="cpu")`.',
    )
    where_reported = (
        "Once per program that seeds torch, uses CUDA and claims no determinism: at its torch "
        "seeding statement in the entry module, or at the call of the helper that seeds. The "
        "message names the CUDA evidence found.",
        'CUDA evidence: `.cuda()`, a `"cuda"` device (also through a variable, or `torch.device(x)` '
        'of such a value), the nccl backend (`init_process_group("nccl")`), and any call given a '
        "CUDA `device=` keyword, whatever the callee.",
        "CUDA evidence, a device kept on a project class (in this module or imported): "
        "`self.device` set in a method of the class or of a project base class; a class "
        "attribute or dataclass default read as `Config.device`, or as `cfg.device` after "
        "`cfg = Config(...)`; a constructor argument kept on `self`.",
        "Such a device is replaced by a keyword, or a dataclass field's position, given at "
        "construction; a literal assigned later in a method without a condition; one stored on "
        'the object or class (`cfg.device = "cpu"`). A device stored from outside the class '
        '(`trainer.device = "cuda"`) is what its methods then read as `self.device`.',
        "Attribute chains, one level: `self.cfg.device` where `self.cfg = Config(...)`, and "
        "`cfg.train.device` where the field is `train: TrainConfig = "
        "field(default_factory=TrainConfig)`, when the outer object is built in view. Built with "
        "`Config(**overrides)`, or returned by a function, an object's attributes are unknown.",
        "CUDA evidence, devices chosen in the same module: a helper that returns a CUDA device "
        "(or `torch.device(name)` of a parameter its caller or default gives as CUDA), also as a "
        "dataclass `field(default_factory=helper)`; `args.device` after `args = "
        'parser.parse_args()` where every matching `add_argument` defaults to `"cuda"`; '
        "`cfg.device` of a parameter annotated with a project class, and `cfg.policy.device` of "
        "a nested config field. A helper in another module is not followed.",
        "CUDA evidence, device-generic APIs: a kept or used "
        "`torch.accelerator.current_accelerator()`, `torch.accelerator.set_device_index` / "
        "`device_index`, `torch.accelerator.is_available()` where it picks a device, "
        "`torch.autocast` / `torch.amp.autocast` with a CUDA `device_type`, `torch.amp.GradScaler` "
        '(its device defaults to `"cuda"`), `torch.set_default_device("cuda")`.',
        'CUDA evidence, Lightning: `Trainer(accelerator="gpu"|"cuda")`, `Fabric(accelerator=...)` '
        "likewise, or `gpus=N`.",
        "Seeding and determinism, Lightning: `seed_everything` (also `Fabric.seed_everything`) "
        'seeds torch, NumPy and `random`. `Trainer(deterministic=True|"warn")` calls '
        '`use_deterministic_algorithms` (`warn_only` for `"warn"`), sets `CUBLAS_WORKSPACE_CONFIG`, '
        "and, unless `benchmark=` is given, turns cuDNN benchmark off; `Trainer(benchmark=True)` "
        "turns it on.",
        "Seeding and determinism, Hugging Face: `set_seed(seed, deterministic=True)` and "
        "`enable_full_determinism` (which also sets the cuBLAS variable and turns benchmark off) "
        "claim determinism, as does `TrainingArguments(full_determinism=True)`. Accelerate's "
        "`set_seed(seed, device_specific, deterministic)` likewise.",
        "Seeding and determinism, Composer: `reproducibility.seed_all` seeds, and "
        "`configure_deterministic_mode()` turns deterministic mode on. Its `Trainer(seed=None)` "
        "draws a random seed, so the `Trainer` is not taken to seed.",
    )
    decisions = (
        "Device-generic APIs count as CUDA: an accelerator is a GPU whose kernels have the same "
        "hazards.",
        "Any call given a CUDA `device=` keyword counts, whatever the callee: such calls "
        "(`.to(device=...)`, Lightning's precision plugins and `SingleDeviceStrategy`, model "
        "loaders such as yolov5's `attempt_load`, diffusers' `enable_model_cpu_offload`, project "
        "helpers that move a model) put work on that device. The one exception seen in training "
        'code, Lightning\'s `get_available_flops(device=torch.device("cuda"))`, only reads the '
        'device\'s name; it is in a Lightning test whose `torch.device("cuda")` counts by itself, '
        "so a narrower rule would remove no wrong finding.",
        "Only a seeding call the program makes shows that its author counts on repeatable runs, "
        "so a trainer's own default seed does not make the program seeded.",
    )
    options = (
        "`seed-functions`: calls to these helpers seed torch.",
        "`deterministic-functions`: calls to these helpers enable deterministic mode, which "
        "silences the rule.",
    )
    reference = (
        ("Reproducibility", "https://pytorch.org/docs/stable/notes/randomness.html"),
        ("Reproducibility: Avoiding nondeterministic algorithms", "https://pytorch.org/docs/stable/notes/randomness.html#avoiding-nondeterministic-algorithms"),
        ("torch.use_deterministic_algorithms", "https://pytorch.org/docs/stable/generated/torch.use_deterministic_algorithms.html"),
    )
    hazards = (
        Example(
            '''import torch
import torch.nn as nn

if __name__ == "__main__":
    torch.manual_seed(0)  # <-- TRP205
    model = nn.Conv2d(3, 8, 3).cuda()
''',
            "Seeded, on CUDA, no determinism",
            fixed='''import torch
import torch.nn as nn

if __name__ == "__main__":
    torch.manual_seed(0)
    torch.use_deterministic_algorithms(True)
    model = nn.Conv2d(3, 8, 3).cuda()
''',
        ),
        Example(
            '''import torch

def main():
    device = "cuda" if torch.cuda.is_available() else "cpu"
    torch.manual_seed(1)  # <-- TRP205
    x = torch.randn(4, 4).to(device)

if __name__ == "__main__":
    main()
''',
            "Device chosen at run time",
        ),
        Example(
            {
                "train.py": '''import torch.distributed as dist
from seeding import seed_all

if __name__ == "__main__":
    seed_all(0)  # <-- TRP205
    dist.init_process_group("nccl")
''',
                "seeding.py": '''import random
import numpy as np
import torch

def seed_all(s):
    random.seed(s)
    np.random.seed(s)
    torch.manual_seed(s)
''',
            },
            "Seeding helper in another module, NCCL",
        ),
        Example(
            '''import torch

if __name__ == "__main__":
    torch.manual_seed(1)  # <-- TRP205
    device = torch.accelerator.current_accelerator()
    model = torch.nn.Linear(4, 4).to(device)
''',
            "The device-generic accelerator API",
        ),
        Example(
            '''import torch

class Trainer:
    def __init__(self):
        self.device = "cuda" if torch.cuda.is_available() else "cpu"

    def fit(self, model):
        return model.to(self.device)

if __name__ == "__main__":
    torch.manual_seed(0)  # <-- TRP205
    Trainer().fit(torch.nn.Linear(4, 4))
''',
            "The device kept on an object",
        ),
        Example(
            {
                "train.py": '''import torch
from config import TrainConfig

if __name__ == "__main__":
    torch.manual_seed(0)  # <-- TRP205
    cfg = TrainConfig(epochs=5)
    model = torch.nn.Linear(4, 4).to(cfg.device)
''',
                "config.py": '''from dataclasses import dataclass

@dataclass
class TrainConfig:
    epochs: int = 10
    device: str = "cuda"
''',
            },
            "The device default of a config class in another module",
        ),
    )
    traps = (
        Example(
            '''import torch
import torch.nn as nn

if __name__ == "__main__":
    torch.manual_seed(0)
    model = nn.Linear(3, 3)
''',
            "A CPU-only program",
        ),
        Example(
            '''import torch

if __name__ == "__main__":
    torch.manual_seed(0)
    torch.use_deterministic_algorithms(True)
    x = torch.ones(3).cuda()
''',
            "Deterministic mode on",
        ),
        Example(
            '''import torch

if __name__ == "__main__":
    torch.manual_seed(0)
    torch.backends.cudnn.deterministic = True
    x = torch.ones(3).cuda()
''',
            "Determinism claimed (TRP202 covers what is missing)",
        ),
        Example(
            '''import torch

if __name__ == "__main__":
    torch.manual_seed(0)
    print("accelerator:", torch.accelerator.is_available())
    with torch.autocast(device_type="cpu", dtype=torch.bfloat16):
        y = torch.nn.Linear(4, 4)(torch.ones(2, 4))
''',
            "Only asking about the accelerator; CPU autocast",
        ),
        Example(
            '''import torch.nn as nn
from transformers import Trainer, TrainingArguments

if __name__ == "__main__":
    model = nn.Linear(8, 2).cuda()
    trainer = Trainer(model=model, args=TrainingArguments(output_dir="out"))
    trainer.train()
''',
            "Only Hugging Face's Trainer seeds (its default `args.seed`): no seed the program asked for",
        ),
        Example(
            '''import torch
from dataclasses import dataclass

@dataclass
class TrainConfig:
    device: str = "cuda"

if __name__ == "__main__":
    torch.manual_seed(0)
    cfg = TrainConfig(device="cpu")
    model = torch.nn.Linear(4, 4).to(cfg.device)
''',
            "A config's CUDA default overridden at construction",
        ),
        Example(
            {
                "train.py": '''import torch
from trainer import Trainer

if __name__ == "__main__":
    torch.manual_seed(0)
    trainer = Trainer()
    trainer.device = "cpu"
    trainer.fit(torch.nn.Linear(4, 4))
''',
                "trainer.py": '''class Trainer:
    def __init__(self):
        self.device = "cuda"

    def fit(self, model):
        return model.to(self.device)
''',
            },
            "A trainer's CUDA device replaced from outside the class before it is used",
        ),
    )

    def check_programs(self, context):
        for program in context.programs:
            facts = program.facts
            # A trainer's own seed (Hugging Face's, with its default `args.seed`) is no sign that
            # the author counts on repeating runs: only a seed the program asks for is.
            seeds = [seed for seed in main_path_seeds(facts) if seed.detail[:1] != (TRAINER_SEED,)]
            cuda = facts.of(Kind.CUDA)
            if not seeds or not cuda or facts.has(*CLAIMS):
                continue
            module, ref = seeds[0].anchor
            yield context.report(
                self,
                module,
                ref,
                f"the program is seeded and runs on CUDA ({describe(cuda[0].site)}) but never enables "
                "deterministic algorithms: cuDNN and atomics still vary run to run; add "
                "`torch.use_deterministic_algorithms(True)` after the seed",
                fix=enable_deterministic_mode(module, module.nodes[ref]) if ref is not None else None,
            )
