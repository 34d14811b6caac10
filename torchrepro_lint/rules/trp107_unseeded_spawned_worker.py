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
    not_reported = (
        "A worker that seeds itself (`torch.manual_seed(100 + rank)`, a seeding helper, "
        "`torch.cuda.manual_seed*`) or claims determinism.",
        "A process started without the spawn method (`multiprocessing.Process` with no spawn context "
        "or `set_start_method(\"spawn\")`): taken to be forked, it inherits the parent's seeded state.",
        "A worker that draws nothing from torch (it only prints, say).",
        "A spawn in a program whose parent neither seeds nor claims determinism: the worker loses "
        "nothing it would have inherited.",
    )
    where_reported = (
        "At the spawn call: `torch.multiprocessing.spawn` (`mp.spawn`), `start_processes` with "
        "`start_method=\"spawn\"`, `get_context(\"spawn\").Process(target=...)`, or "
        "`multiprocessing.Process` after `set_start_method(\"spawn\")`.",
        "Only when the parent seeds or claims determinism before the spawn, and the target, followed as "
        "part of the program, does torch randomness but neither seeds torch nor claims determinism.",
    )
    decisions = (
        "A target too large to follow to the end (the analysis stops at a step limit) is not reported: "
        "without all of its effects, a seed in it might be missed.",
    )
    options = (
        "`seed-functions`: helpers the linter cannot see (installed packages) that seed `random`, "
        "NumPy and torch; a worker that calls one seeds itself.",
        "`deterministic-functions`: helpers the linter cannot see that enable deterministic mode; "
        "they count as claiming determinism, in the parent or in the worker.",
    )
    reference = (
        ("Reproducibility", "https://pytorch.org/docs/stable/notes/randomness.html"),
        ("torch.multiprocessing: spawning subprocesses", "https://pytorch.org/docs/stable/multiprocessing.html#spawning-subprocesses"),
        ("Python: contexts and start methods", "https://docs.python.org/3/library/multiprocessing.html#contexts-and-start-methods"),
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
            fixed='''import torch
import torch.multiprocessing as mp
import torch.nn as nn

def worker(rank, world, seed):
    torch.manual_seed(seed + rank)
    model = nn.Linear(10, 10)

if __name__ == "__main__":
    torch.manual_seed(0)
    mp.spawn(worker, args=(2, 0), nprocs=2)
''',
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
