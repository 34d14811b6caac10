from __future__ import annotations

import libcst as cst

from torchrepro_lint.analysis.names import dotted
from torchrepro_lint.rules.base import Example, Rule, last_names

CONSTRUCTORS = {
    "numpy.random.default_rng": "np.random.default_rng",
    "numpy.random.RandomState": "np.random.RandomState",
    "random.Random": "random.Random",
    "numpy.random.Generator": "np.random.Generator",
}
BIT_GENERATORS = frozenset(
    "numpy.random." + n for n in ("PCG64", "PCG64DXSM", "MT19937", "Philox", "SFC64")
)


def _unseeded(call: cst.Call) -> bool:
    if not call.args:
        return True
    first = call.args[0]
    return first.keyword is None and isinstance(first.value, cst.Name) and first.value.value == "None"


class UnseededRngObject(Rule):
    code = "TRP103"
    name = "unseeded-rng-object"
    summary = "A NumPy or Python generator object is created without a seed and used unseeded."
    why = (
        "`np.random.default_rng()`, `RandomState()` and `random.Random()` without a seed take "
        "their state from OS entropy. Whatever they draw (crops, masks, sampled indices) differs "
        "on every run even when everything else is seeded."
    )
    fix = "Pass a seed derived from the run's seed: `np.random.default_rng(seed)`."
    decisions = (
        "`torch.Generator()` is not reported: it starts from a fixed default seed. An object "
        "seeded later in the same function (`rng.seed(s)`), or on `self` anywhere in the class, "
        "or re-created there with a seed (`self.rng = random.Random(seed + epoch)`), is not reported. "
        "A seed passed as a variable is trusted."
    )
    # Candidates are calls resolving to one of CONSTRUCTORS; each spells its class's name.
    triggers = last_names(CONSTRUCTORS)
    hazards = (
        Example(
            '''import numpy as np

def make_masks(n):
    rng = np.random.default_rng()  # <-- TRP103
    return rng.random(n) > 0.5
''',
            "A generator from OS entropy",
        ),
        Example(
            '''import random

class Sampler:
    def __init__(self):
        self.rng = random.Random()  # <-- TRP103

    def pick(self, items):
        return self.rng.choice(items)
''',
            "Stored on self, never seeded",
        ),
        Example(
            '''import numpy as np

state = np.random.RandomState(None)  # <-- TRP103
gen = np.random.Generator(np.random.PCG64())  # <-- TRP103
''',
            "Explicit None, and a bit generator without a seed",
        ),
    )
    traps = (
        Example(
            '''import torch

gen = torch.Generator()
perm = torch.randperm(10, generator=gen)
''',
            "torch.Generator() starts from a fixed seed",
        ),
        Example(
            '''import random

def shuffled(items, seed):
    rng = random.Random()
    rng.seed(seed)
    rng.shuffle(items)
    return items
''',
            "Seeded on the next line",
        ),
        Example(
            '''import numpy as np

def noise(seed, n):
    rng = np.random.default_rng(seed)
    return rng.normal(size=n)
''',
            "Seeded at construction",
        ),
    )

    def check_module(self, module, context):
        index = module.index
        for site in index.calls_to(*CONSTRUCTORS):
            call = site.node
            if site.qualname == "numpy.random.Generator":
                inner = call.args[0].value if call.args else None
                if not (isinstance(inner, cst.Call) and index.resolve(inner.func, call) in BIT_GENERATORS and _unseeded(inner)):
                    continue
            elif not _unseeded(call):
                continue
            if self._seeded_later(index, call):
                continue
            name = CONSTRUCTORS[site.qualname]
            yield context.report(
                self,
                module,
                call,
                f"`{name}(...)` without a seed starts from OS entropy, so what it draws differs every run; "
                f"pass a seed derived from the run's seed",
            )

    def _seeded_later(self, index, call: cst.Call) -> bool:
        parent = index.parents.get(call)
        if not isinstance(parent, (cst.Assign, cst.AnnAssign)):
            return False
        targets = [t.target for t in parent.targets] if isinstance(parent, cst.Assign) else [parent.target]
        names = {dotted(t) for t in targets} - {None}
        if not names:
            return False
        owner = index.enclosing(call, cst.ClassDef) if any(n.startswith("self.") for n in names) else index.enclosing(
            call, cst.FunctionDef
        )
        for other in index.calls_to(*CONSTRUCTORS):
            # Re-created with a seed (`self.rng = random.Random(seed + epoch)`) counts as reseeding.
            holder = index.parents.get(other.node)
            if other.node is not call and isinstance(holder, (cst.Assign, cst.AnnAssign)) and not _unseeded(other.node):
                assigned = [t.target for t in holder.targets] if isinstance(holder, cst.Assign) else [holder.target]
                if {dotted(t) for t in assigned} & names and _owner(index, other.node, owner) is owner:
                    return True
        for other in index.calls:
            func = other.node.func
            if isinstance(func, cst.Attribute) and func.attr.value == "seed" and dotted(func.value) in names:
                if other.node.args and not _unseeded(other.node) and _owner(index, other.node, owner) is owner:
                    return True
        return False


def _owner(index, node, like):
    """The enclosing class or function of `node`, of the same kind as `like`."""
    return index.enclosing(node, type(like)) if like is not None else None
