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
# Restoring a saved state fixes every bit of a generator, as a seed does. Per kind, the methods
# that restore one; NumPy's Generators are also restored by assigning `rng.bit_generator.state`.
RESTORE_METHODS = {
    "numpy.random.default_rng": frozenset({"__setstate__"}),
    "numpy.random.Generator": frozenset({"__setstate__"}),
    "numpy.random.RandomState": frozenset({"set_state", "__setstate__"}),
    "random.Random": frozenset({"setstate", "__setstate__"}),
}
RESTORED_BY_BIT_GENERATOR_STATE = frozenset({"numpy.random.default_rng", "numpy.random.Generator"})


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
    not_reported = (
        "`torch.Generator()`: it starts from a fixed default seed, not from OS entropy.",
        "An object created with a seed (`np.random.default_rng(seed)`); a seed passed as a variable is trusted.",
        "An object seeded (`rng.seed(s)`) or restored from a saved state (`rng.bit_generator.state = "
        "saved`, `set_state`, `setstate`, `__setstate__`, as its kind has them) in the same block "
        "before anything else uses it, or in every branch of an `if` there.",
        "An object on `self` or a module global that is seeded (`.seed(s)`) anywhere in its class or module.",
        "An object re-created with a seed in the same function or class "
        "(`self.rng = random.Random(seed + epoch)`).",
    )
    where_reported = (
        "At the constructor call: `np.random.default_rng()`, `np.random.RandomState()`, "
        "`random.Random()` with no argument or `None`, and `np.random.Generator(...)` of a bit "
        "generator (`PCG64()`, `MT19937()`, `Philox()`, `SFC64()`, `PCG64DXSM()`) without a seed.",
        "Every such call is reported, whether or not a program reaches it.",
    )
    decisions = (
        "A restore elsewhere than right after creation (`if saved_state is not None: rng.bit_generator.state = "
        "saved_state`; a `set_state` in another method) runs only when resuming, so it does not count: "
        "a fresh run still starts from OS entropy.",
    )
    reference = (
        ("NumPy: random.default_rng", "https://numpy.org/doc/stable/reference/random/generator.html#numpy.random.default_rng"),
        ("NumPy: seeding and entropy", "https://numpy.org/doc/stable/reference/random/bit_generators/index.html#seeding-and-entropy"),
        ("Python: random.Random", "https://docs.python.org/3/library/random.html#random.Random"),
        ("Reproducibility", "https://pytorch.org/docs/stable/notes/randomness.html"),
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
            fixed='''import numpy as np

def make_masks(n, seed):
    rng = np.random.default_rng(seed)
    return rng.random(n) > 0.5
''',
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
        Example(
            '''import numpy as np

def batches(n, saved_state=None):
    rng = np.random.default_rng()  # <-- TRP103
    if saved_state is not None:
        rng.bit_generator.state = saved_state
    return rng.permutation(n)
''',
            "Restored from a saved state only when resuming",
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
        Example(
            '''import numpy as np

def resume_order(n, saved_state):
    rng = np.random.default_rng()
    rng.bit_generator.state = saved_state
    return rng.permutation(n)
''',
            "Its whole state restored before use",
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
            if self._seeded_later(index, call, site.qualname):
                continue
            name = CONSTRUCTORS[site.qualname]
            yield context.report(
                self,
                module,
                call,
                f"`{name}(...)` without a seed starts from OS entropy, so what it draws differs every run; "
                f"pass a seed derived from the run's seed",
            )

    def _seeded_later(self, index, call: cst.Call, kind: str) -> bool:
        parent = index.parents.get(call)
        if not isinstance(parent, (cst.Assign, cst.AnnAssign)):
            return False
        targets = [t.target for t in parent.targets] if isinstance(parent, cst.Assign) else [parent.target]
        names = {dotted(t) for t in targets} - {None}
        if not names:
            return False
        if _set_before_use(index, parent, names, kind):
            return True
        on_self = any(n.startswith("self.") for n in names)
        owner = index.enclosing(call, cst.ClassDef) if on_self else index.enclosing(call, cst.FunctionDef)
        for other in index.calls_to(*CONSTRUCTORS):
            # Re-created with a seed (`self.rng = random.Random(seed + epoch)`) counts as reseeding.
            holder = index.parents.get(other.node)
            if other.node is not call and isinstance(holder, (cst.Assign, cst.AnnAssign)) and not _unseeded(other.node):
                assigned = [t.target for t in holder.targets] if isinstance(holder, cst.Assign) else [holder.target]
                if {dotted(t) for t in assigned} & names and _owner(index, other.node, owner) is owner:
                    return True
        if owner is not None and not on_self:
            return False  # a function's local: otherwise only a seed or restore before use counts
        # On `self` or a module global, methods and functions run in an order not seen here:
        # `.seed(s)` anywhere in the class or module counts. A restore does not: it runs when
        # resuming, so a fresh run still starts from OS entropy.
        for other in index.calls:
            func = other.node.func
            if isinstance(func, cst.Attribute) and func.attr.value == "seed" and dotted(func.value) in names:
                if other.node.args and not _unseeded(other.node) and _owner(index, other.node, owner) is owner:
                    return True
        return False


def _set_before_use(index, creation: cst.BaseSmallStatement, names: set[str], kind: str) -> bool:
    """Whether, after `creation` in its block, the first statement that mentions the object
    seeds or restores it, or is an `if` whose every branch does so before using it."""
    mentioned = _mentioning(index, names)

    def sets_state(statement) -> bool:
        if isinstance(statement, cst.If):
            orelse = statement.orelse
            if id(statement.test) in mentioned or orelse is None or not in_block(statement.body):
                return False
            return sets_state(orelse) if isinstance(orelse, cst.If) else in_block(orelse.body)
        return _seeds_or_restores(statement, names, kind)

    def in_block(block) -> bool:
        return first_mention_sets_state(_statements(block))

    def first_mention_sets_state(statements) -> bool:
        for statement in statements:
            if sets_state(statement):
                return True
            if id(statement) in mentioned:
                return False
        return False

    line = index.parents.get(creation)
    block = index.parents.get(line) if isinstance(line, cst.SimpleStatementLine) else line
    if not isinstance(block, (cst.IndentedBlock, cst.SimpleStatementSuite, cst.Module)):
        return False
    statements = _statements(block)
    after = next(i for i, statement in enumerate(statements) if statement is creation) + 1
    return first_mention_sets_state(statements[after:])


def _statements(block) -> list[cst.CSTNode]:
    """A block's statements in order, the small statements of each line one by one."""
    if isinstance(block, cst.SimpleStatementSuite):
        return list(block.body)
    out = []
    for item in block.body:
        out.extend(item.body if isinstance(item, cst.SimpleStatementLine) else (item,))
    return out


def _mentioning(index, names: set[str]) -> set[int]:
    """ids of every node that is, or contains, an expression naming the object (`rng`, `self.rng`)."""
    last_parts = {name.rsplit(".", 1)[-1] for name in names}
    found: set[int] = set()
    for node in index.nodes_of(cst.Name):
        if node.value not in last_parts:
            continue
        parent = index.parents.get(node)
        if isinstance(parent, cst.Arg) and parent.keyword is node:
            continue  # `f(rng=...)` names a parameter
        expression = parent if isinstance(parent, cst.Attribute) and parent.attr is node else node
        if dotted(expression) in names:
            found.add(id(expression))
            found.update(id(a) for a in index.ancestors(expression))
    return found


def _seeds_or_restores(statement: cst.CSTNode, names: set[str], kind: str) -> bool:
    """`rng.seed(s)`, `rng.set_state(saved)` (the restores of its kind) or
    `rng.bit_generator.state = saved` as a statement of its own."""
    if isinstance(statement, cst.Expr) and isinstance(statement.value, cst.Call):
        call = statement.value
        func = call.func
        if isinstance(func, cst.Attribute) and dotted(func.value) in names and call.args:
            if func.attr.value == "seed":
                return not _unseeded(call)
            return func.attr.value in RESTORE_METHODS[kind]
    if isinstance(statement, cst.Assign) and kind in RESTORED_BY_BIT_GENERATOR_STATE:
        states = {name + ".bit_generator.state" for name in names}
        return any(dotted(target.target) in states for target in statement.targets)
    return False


def _owner(index, node, like):
    """The enclosing class or function of `node`, of the same kind as `like`."""
    return index.enclosing(node, type(like)) if like is not None else None
