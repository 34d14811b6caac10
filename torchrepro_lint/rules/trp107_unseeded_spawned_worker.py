from __future__ import annotations

from torchrepro_lint.project.known_apis import Kind
from torchrepro_lint.project.programs import CLAIMS, torch_randomness
from torchrepro_lint.rules.base import Example, Rule


class UnseededSpawnedWorker(Rule):
    code = "TRP107"
    name = "unseeded-spawned-worker"
    summary = "The parent seeds, then spawns workers that draw from torch without seeding."
    why = (
        "A spawned process starts a fresh interpreter: it does not inherit the parent's RNG state "
        "or its determinism flags. Seeding in the parent before `mp.spawn` protects nothing the "
        "workers do, and every worker of every run initialises differently."
    )
    fix = "Seed (and set determinism flags) inside the worker function, e.g. with `seed + rank`."
    decisions = (
        "Covers `torch.multiprocessing.spawn`, `start_processes` with the spawn method, "
        "`get_context(\"spawn\").Process` and `multiprocessing.Process` after "
        "`set_start_method(\"spawn\")`. A forked process inherits the parent's state and is not reported."
    )
    hazards = (
        Example(
            '''import torch
import torch.multiprocessing as mp
import torch.nn as nn

def worker(rank, world):
    model = nn.Linear(10, 10)

if __name__ == "__main__":
    torch.manual_seed(0)
    mp.spawn(worker, args=(2,), nprocs=2)  # <-- TRP107
''',
            "mp.spawn after seeding the parent",
        ),
        Example(
            '''import multiprocessing
import torch

def work():
    print(torch.rand(2))

if __name__ == "__main__":
    torch.manual_seed(1)
    ctx = multiprocessing.get_context("spawn")
    p = ctx.Process(target=work)  # <-- TRP107
    p.start()
''',
            "A spawn-context Process",
        ),
        Example(
            '''import torch
import torch.multiprocessing as mp

def run(rank):
    torch.randn(3)

if __name__ == "__main__":
    torch.backends.cudnn.deterministic = True
    torch.manual_seed(0)
    mp.start_processes(run, nprocs=2, start_method="spawn")  # <-- TRP107
''',
            "start_processes with the spawn method",
        ),
    )
    traps = (
        Example(
            '''import torch
import torch.multiprocessing as mp
import torch.nn as nn

def worker(rank):
    torch.manual_seed(100 + rank)
    model = nn.Linear(4, 4)

if __name__ == "__main__":
    torch.manual_seed(0)
    mp.spawn(worker, nprocs=4)
''',
            "The worker seeds itself",
        ),
        Example(
            '''import multiprocessing
import torch

def work():
    print(torch.rand(2))

if __name__ == "__main__":
    torch.manual_seed(1)
    p = multiprocessing.Process(target=work)
    p.start()
''',
            "A forked process inherits the seeded state",
        ),
        Example(
            '''import torch.multiprocessing as mp

def worker(rank):
    print("hello from", rank)

if __name__ == "__main__":
    mp.spawn(worker, nprocs=2)
''',
            "A worker without torch randomness",
        ),
    )

    def check_programs(self, context):
        for program in context.programs:
            for occurrence, parent_set_up, child in program.facts.spawns:
                if not parent_set_up or child.truncated:
                    continue
                if child.has(Kind.SEED_TORCH, Kind.SEED_CUDA, *CLAIMS):
                    continue
                first = torch_randomness(child)
                if first is None:
                    continue
                module, ref = occurrence.site
                yield context.report(
                    self,
                    module,
                    ref,
                    "the spawned worker starts a fresh interpreter with unseeded RNGs and default flags, "
                    "and draws from torch without seeding: seed inside the worker (e.g. `seed + rank`)",
                )
