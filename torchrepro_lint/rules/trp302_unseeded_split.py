from __future__ import annotations

import libcst as cst

from torchrepro_lint.analysis.dataflow.core import flow
from torchrepro_lint.analysis.syntax import arg, bool_value, is_none
from torchrepro_lint.project.known_apis import Kind
from torchrepro_lint.rules.base import Example, Rule, last_names, programs_for

RANDOM_SPLIT = "torch.utils.data.random_split"
DEVICE_SPECIFIC_SEEDS = frozenset({"accelerate.utils.set_seed", "accelerate.utils.random.set_seed"})
# sklearn splitters: (position of random_state, position of shuffle; None: keyword-only or absent,
# default of shuffle)
SKLEARN = {
    "sklearn.model_selection.train_test_split": (None, None, True),
    "sklearn.model_selection.KFold": (2, 1, False),
    "sklearn.model_selection.StratifiedKFold": (2, 1, False),
    "sklearn.model_selection.ShuffleSplit": (None, None, True),
    "sklearn.model_selection.StratifiedShuffleSplit": (None, None, True),
    "sklearn.model_selection.GroupShuffleSplit": (None, None, True),
}


class UnseededSplit(Rule):
    code = "TRP302"
    name = "unseeded-split"
    summary = "A random train/validation split without its own seed, in a program that does not seed it or seeds it per rank."
    why = (
        "`random_split` without `generator=` draws the permutation from torch's global generator; "
        "scikit-learn splitters without `random_state` draw from NumPy's. In a program that does "
        "not seed that generator, every run splits differently; when each rank seeds it with "
        "`seed + rank`, each rank splits differently. Either way samples move between training "
        "and validation, and validation scores stop being comparable (or leak)."
    )
    fix = (
        "Give the split its own seed: `random_split(ds, lengths, generator=torch.Generator()"
        ".manual_seed(seed))`, `train_test_split(..., random_state=seed)`, "
        "`KFold(n, shuffle=True, random_state=seed)`."
    )
    not_reported = (
        "A split given its own seed: `generator=` a generator, `random_state=` a value other than "
        "`None`.",
        "A split in a program that seeds the generator it draws from with one seed for every process.",
        "`KFold` / `StratifiedKFold` without a literal `shuffle=True`, `train_test_split("
        "shuffle=False)`, and a `shuffle=` whose value cannot be read.",
        "A call with `*args` or `**kwargs`.",
        "Hugging Face `datasets`' `Dataset.train_test_split`: its receiver's type is unknown here.",
    )
    where_reported = (
        "At the call: `torch.utils.data.random_split`, or scikit-learn's `train_test_split`, "
        "`KFold`, `StratifiedKFold`, `ShuffleSplit`, `StratifiedShuffleSplit`, "
        "`GroupShuffleSplit`; every matching call, reachable from a program or not.",
        "When a program that runs the split's function never seeds the generator it draws from: "
        "torch's for `random_split`, NumPy's global one for scikit-learn (`random_state=None` "
        "uses it). For a method no program is seen calling, the programs that reach its module "
        "decide.",
        "When such a program seeds it per rank: a seed expression that mentions a rank "
        "(`seed + rank`, `get_rank()`, `local_rank`, `RANK`), or accelerate's `set_seed(seed, "
        "device_specific=True)`, which adds the process index to the seed.",
        "When no program reaches the split (see the decisions).",
    )
    decisions = (
        "A program that seeds the generator anywhere counts as seeding; whether the seed comes "
        "before the split is not checked (precision first).",
        "A split that no program reaches is reported as a warning: its caller's seeding is "
        "unknown, and giving the split its own seed costs nothing.",
    )
    options = ("`seed-functions`: calls to these helpers seed torch, NumPy and `random`.",)
    reference = (
        ("torch.utils.data.random_split", "https://pytorch.org/docs/stable/data.html#torch.utils.data.random_split"),
        ("torch.Generator", "https://pytorch.org/docs/stable/generated/torch.Generator.html"),
        ("scikit-learn: Controlling randomness", "https://scikit-learn.org/stable/common_pitfalls.html#controlling-randomness"),
    )
    # Candidates are calls resolving to random_split or one of the sklearn splitters.
    triggers = last_names([RANDOM_SPLIT], SKLEARN)
    hazards = (
        Example(
            '''import torch
from torch.utils.data import random_split

def main():
    data = torch.utils.data.TensorDataset(torch.arange(100))
    train, val = random_split(data, [80, 20])  # <-- TRP302
    return train, val

if __name__ == "__main__":
    main()
''',
            "No seed anywhere in the program",
            fixed='''import torch
from torch.utils.data import random_split

def main():
    data = torch.utils.data.TensorDataset(torch.arange(100))
    train, val = random_split(data, [80, 20], generator=torch.Generator().manual_seed(0))
    return train, val

if __name__ == "__main__":
    main()
''',
        ),
        Example(
            '''import torch
import torch.distributed as dist
from torch.utils.data import random_split

def main(args):
    dist.init_process_group("nccl")
    torch.manual_seed(args.seed + dist.get_rank())
    data = torch.utils.data.TensorDataset(torch.arange(100))
    train, val = random_split(data, [0.9, 0.1])  # <-- TRP302
    return train, val

if __name__ == "__main__":
    main(None)
''',
            "Seeded per rank: every rank splits differently",
        ),
        Example(
            '''from sklearn.model_selection import KFold, train_test_split

def folds(x, y):
    xtr, xte, ytr, yte = train_test_split(x, y, test_size=0.2)  # <-- TRP302
    return KFold(5, shuffle=True).split(xtr)  # <-- TRP302
''',
            "scikit-learn splitters without random_state",
        ),
    )
    traps = (
        Example(
            '''import torch
from torch.utils.data import random_split

def split(data, seed):
    return random_split(data, [0.8, 0.2], generator=torch.Generator().manual_seed(seed))
''',
            "The split has its own seeded generator",
        ),
        Example(
            '''import torch
from torch.utils.data import random_split

if __name__ == "__main__":
    torch.manual_seed(42)
    data = torch.utils.data.TensorDataset(torch.arange(10))
    train, val = random_split(data, [8, 2])
''',
            "The program seeds torch with one seed for every process",
        ),
        Example(
            '''from sklearn.model_selection import KFold, train_test_split

def folds(x, y, seed):
    a = train_test_split(x, y, random_state=seed)
    b = train_test_split(x, y, shuffle=False)
    return KFold(5).split(x), a, b
''',
            "random_state given, no shuffling, or KFold without shuffle",
        ),
    )

    def check_module(self, module, context):
        index = module.index
        for site in index.calls_to(RANDOM_SPLIT, *SKLEARN):
            call = site.node
            if site.qualname == RANDOM_SPLIT:
                seed = arg(call, 2, "generator")
                kind, library = Kind.SEED_TORCH, "torch"
            else:
                state_position, shuffle_position, shuffle_default = SKLEARN[site.qualname]
                seed = arg(call, state_position, "random_state")
                shuffle = arg(call, shuffle_position, "shuffle")
                shuffles = shuffle_default if shuffle is None else bool_value(shuffle)
                if not shuffles:
                    continue  # no shuffling, or a shuffle flag we cannot read
                kind, library = Kind.SEED_NUMPY, "NumPy"
            if any(a.star for a in call.args):
                continue
            if seed is not None and not is_none(seed):
                continue
            problem = self._problem(context, module, call, kind, library)
            if problem is None:
                continue
            name = site.qualname.rsplit(".", 1)[1]
            remedy = "`generator=torch.Generator().manual_seed(seed)`" if site.qualname == RANDOM_SPLIT else "`random_state=seed`"
            yield context.report(
                self, module, call,
                f"`{name}` without its own seed draws from {library}'s global generator, {problem}: "
                f"samples move between training and validation from run to run; pass {remedy}",
            )

    def _problem(self, context, module, call, kind: str, library: str) -> str | None:
        programs = programs_for(context, module, call)
        if not programs:
            return "and no program here shows that it is seeded"
        for program in programs:
            seeds = program.facts.of(kind)
            if not seeds:
                return f"which `{program.name}` never seeds"
            per_rank = [o for o in seeds if _per_rank(o)]
            if per_rank:
                return f"which `{program.name}` seeds per rank, so every rank splits differently"
        return None


def _per_rank(occurrence) -> bool:
    module, ref = occurrence.site
    node = module.nodes[ref] if ref is not None else None
    if not isinstance(node, cst.Call):
        return "rank" in str(occurrence.detail[0] if occurrence.detail else "").lower()
    if module.index.resolve(node.func, node) in DEVICE_SPECIFIC_SEEDS:
        # accelerate's set_seed(seed, device_specific=True) seeds with `seed + process_index`
        if bool_value(arg(node, 1, "device_specific")) is True:
            return True
    data = flow(module.index)
    return any(_mentions_rank(data, a.value, 0) for a in node.args)


def _mentions_rank(data, expr: cst.CSTNode, depth: int) -> bool:
    if isinstance(expr, cst.Name):
        if "rank" in expr.value.lower():
            return True
        if depth < 3:
            value = data.reaching_value(expr)
            if value is not None:
                return _mentions_rank(data, value, depth + 1)
        return False
    if isinstance(expr, cst.Attribute):
        return "rank" in expr.attr.value.lower() or _mentions_rank(data, expr.value, depth)
    return any(_mentions_rank(data, child, depth) for child in expr.children)
