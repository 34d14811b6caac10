from __future__ import annotations

import libcst as cst

from torchrepro_lint.rules.context import describe
from torchrepro_lint.project.known_apis import Kind
from torchrepro_lint.project.programs import main_path_seeds
from torchrepro_lint.rules.base import Example, Rule
from torchrepro_lint.rules.edits import insert_after, make_fix, module_name_for


class PartialSeed(Rule):
    code = "TRP102"
    name = "partial-seed"
    summary = "torch is seeded, but Python's `random` or NumPy's global generator is drawn from and never seeded."
    why = (
        "Data pipelines mix generators: `random.shuffle` for file lists, `np.random` for crops and "
        "augmentations, torch for the model. Seeding torch alone leaves the others on OS entropy, "
        "so the data stream, and with it the result, still changes from run to run."
    )
    fix_safety = "safe"
    fix = (
        "Seed every generator the program draws from, next to the torch seed and with the same "
        "expression: `random.seed(seed)` / `np.random.seed(seed)`. Better, use a generator object "
        "(`np.random.default_rng(seed)`) passed where it is needed. The fix inserts the missing calls "
        "on the line after the seeding call, when that call passes its seed positionally."
    )
    not_reported = (
        "`import numpy` (or `import random`) without a draw from the global generator, e.g. "
        "`np.zeros(3)` only.",
        "A helper that seeds all three generators (`lightning.seed_everything(5)`, "
        "`transformers.set_seed`, a function named in `seed-functions`).",
        "A program that seeds `random`/NumPy but not torch: that is TRP101's finding, not reported twice.",
        "A draw assigned to a variable named as a seed (`seed = args.seed if args.seed is not None "
        "else random.randint(0, 2**32 - 1)`): it makes the run's seed, which is logged and given to "
        "torch (TRP104's trap), so it does not count as drawing from that generator.",
    )
    where_reported = (
        "At the program's torch seeding: the statement in the entry module, or the call of the helper "
        "that seeds. The message names the first draw from each unseeded generator.",
        "Draws: calls of Python's `random` module functions (`random.shuffle`, ...) and NumPy's global "
        "generator (`np.random.randint`, ...), anywhere in the program, other modules included.",
        "torch counts as seeded only on the program's own path: a `worker_init_fn` that seeds each "
        "DataLoader worker does not seed the main process.",
        "`random.seed()` / `np.random.seed()` without a seed does not count as seeding (that is TRP104).",
    )
    options = (
        "`seed-functions`: helpers the linter cannot see (installed packages) that seed `random`, "
        "NumPy and torch.",
    )
    reference = (
        ("Reproducibility: Python and NumPy", "https://pytorch.org/docs/stable/notes/randomness.html"),
        ("random.seed", "https://docs.python.org/3/library/random.html#random.seed"),
        ("numpy.random.seed", "https://numpy.org/doc/stable/reference/random/generated/numpy.random.seed.html"),
    )
    hazards = (
        Example(
            '''import random
import torch

def main():
    torch.manual_seed(0)  # <-- TRP102
    files = ["a.jpg", "b.jpg", "c.jpg"]
    random.shuffle(files)

if __name__ == "__main__":
    main()
''',
            "torch seeded, `random` drawn from",
            fixed='''import random
import torch

def main():
    torch.manual_seed(0)
    random.seed(0)
    files = ["a.jpg", "b.jpg", "c.jpg"]
    random.shuffle(files)

if __name__ == "__main__":
    main()
''',
        ),
        Example(
            '''import numpy as np
import torch

if __name__ == "__main__":
    torch.manual_seed(42)  # <-- TRP102
    crop = np.random.randint(0, 32)
''',
            "NumPy's global generator drawn from",
        ),
        Example(
            {
                "train.py": '''import torch
from data import jitter

if __name__ == "__main__":
    torch.manual_seed(1)  # <-- TRP102
    print(jitter(3.0))
''',
                "data.py": '''import numpy as np

def jitter(x):
    return x + np.random.normal(0, 0.1)
''',
            },
            "The draw is in another module",
        ),
    )
    traps = (
        Example(
            '''import numpy as np
import torch

if __name__ == "__main__":
    torch.manual_seed(0)
    x = np.zeros(3)
''',
            "`import numpy` without global draws",
        ),
        Example(
            '''import random
import numpy as np
from lightning import seed_everything

if __name__ == "__main__":
    seed_everything(5)
    random.shuffle([1, 2, 3])
    np.random.rand(2)
''',
            "A helper that seeds all three",
        ),
        Example(
            '''import random
import torch

if __name__ == "__main__":
    torch.manual_seed(3)
    random.seed(3)
    random.shuffle([1, 2])
''',
            "Both seeded",
        ),
    )

    def check_programs(self, context):
        for program in context.programs:
            facts = program.facts
            seeds = main_path_seeds(facts)
            if not seeds:
                continue
            missing = []
            for draw_kind, seed_kind, name, call in (
                (Kind.DRAW_RANDOM, Kind.SEED_RANDOM, "Python's `random`", "random.seed"),
                (Kind.DRAW_NUMPY, Kind.SEED_NUMPY, "NumPy's global generator", "np.random.seed"),
            ):
                draws = facts.of(draw_kind)
                if draws and not facts.has(seed_kind):
                    missing.append((name, call, draws[0]))
            if not missing:
                continue
            what = " and ".join(f"{name} ({describe(draw.site)})" for name, _, draw in missing)
            calls = " and ".join(f"`{call}(seed)`" for _, call, _ in missing)
            anchor_module, anchor_ref = seeds[0].anchor
            yield context.report(
                self,
                anchor_module,
                anchor_ref,
                f"torch is seeded but {what} is never seeded, so the data stream still changes every run; "
                f"add {calls} beside this seed",
                fix=_fix(anchor_module, anchor_module.nodes[anchor_ref], [call for _, call, _ in missing]),
            )


def _fix(module, node, calls):
    """`random.seed(<same seed>)` / `np.random.seed(<same seed>)` on the line after the seed."""
    if not isinstance(node, cst.Call) or not node.args or node.args[0].keyword is not None or node.args[0].star:
        return None
    seed = module.index.module.code_for_node(node.args[0].value)
    edits, lines = [], []
    for call in calls:
        name, imports = module_name_for(module, "random" if call == "random.seed" else "numpy")
        edits.extend(imports)
        lines.append(f"{name}.seed({seed})" if call == "random.seed" else f"{name}.random.seed({seed})")
    edits.extend(insert_after(module, node, line) for line in lines)
    return make_fix("safe", "Seed " + " and ".join(f"`{c}`" for c in calls) + " with the same seed", edits)
