from __future__ import annotations

import libcst as cst

from torchrepro_lint.analysis.dataflow.core import flow
from torchrepro_lint.analysis.syntax import arg, bool_value, is_none
from torchrepro_lint.project.known_apis import KNOWN_HELPERS, Kind
from torchrepro_lint.rules.base import Example, Rule, last_names, programs_for
from torchrepro_lint.rules.edits import add_keywords, make_fix, module_name_for, replace
from torchrepro_lint.rules.statements import bindings_of, bound_before

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
    fix_safety = "unsafe"
    fix = (
        "Give the split its own seed: `random_split(ds, lengths, generator=torch.Generator()"
        ".manual_seed(seed))`, `train_test_split(..., random_state=seed)`, "
        "`KFold(n, shuffle=True, random_state=seed)`. The fix writes that argument (or replaces its "
        "`None`) with the program's own seed: a seeding call's argument in the same file, without "
        "its rank (`args.seed` of `torch.manual_seed(args.seed + rank)`), when it is a literal or "
        "a name holding the same value at the split (`SEED`, `args.seed` in the same function); "
        "in a program that seeds nothing (or code no program runs), the `seed` setting; otherwise no "
        "fix. Unsafe: it changes "
        "which samples land in validation and, as the split stops drawing from the global "
        "generator, every later draw of a seeded program."
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
                fix=split_seed_fix(context, module, site, programs_for(context, module, call)),
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


# Where the seed is in a seeding call: (position, keyword).
SEED_ARGUMENT = {"torch.manual_seed": (0, "seed"), "random.seed": (0, "a"), "numpy.random.seed": (0, "seed")}


def split_seed_fix(context, module, site, programs):
    """The split given its own seed (`generator=torch.Generator().manual_seed(seed)`,
    `random_state=seed`), with the program's seed expression where it is in scope at the split,
    or the `seed` setting where no program seeds anything; otherwise None."""
    seed = _seed_for(context, module, site.node, programs)
    if seed is None:
        return None
    call = site.node
    if site.qualname == RANDOM_SPLIT:
        torch, imports = module_name_for(module, "torch")
        edit = _seed_argument(module, call, 2, "generator", f"{torch}.Generator().manual_seed({seed})")
        return make_fix("unsafe", "Give the split its own seeded generator", [*imports, edit])
    edit = _seed_argument(module, call, SKLEARN[site.qualname][0], "random_state", seed)
    return make_fix("unsafe", "Give the split its own `random_state`", [edit])


def _seed_argument(module, call: cst.Call, position: int | None, keyword: str, code: str):
    given = arg(call, position, keyword)
    if given is not None:
        return replace(module, given, code)  # a `None` (the rule reports no other value)
    return add_keywords(module, call, [(keyword, code)])


def _seed_for(context, module, call: cst.Call, programs) -> str | None:
    seeds = [o for p in programs for o in p.facts.of(Kind.SEED_TORCH, Kind.SEED_NUMPY, Kind.SEED_RANDOM) if o.ordered]
    if not seeds:
        return str(context.config.seed)  # as TRP101's and TRP301's fixes
    found = {text for text in (_seed_in_scope(module, call, o) for o in seeds) if text is not None}
    return found.pop() if len(found) == 1 else None


def _seed_in_scope(module, call: cst.Call, occurrence) -> str | None:
    """The seed of a seeding call of this module, without its rank (`args.seed` of `args.seed +
    rank`), when it is a literal or a name (`SEED`, `args.seed`, `cfg["seed"]`) that holds the
    same value at the split."""
    seed_module, ref = occurrence.site
    if seed_module is not module or ref is None:
        return None
    node = module.nodes[ref]
    if not isinstance(node, cst.Call):
        return None
    qualname = module.index.resolve(node.func, node)
    helpers = {**KNOWN_HELPERS, **module.helpers}
    if qualname in SEED_ARGUMENT:
        expr = arg(node, *SEED_ARGUMENT[qualname])
    elif qualname in helpers and helpers[qualname].seed_text is None:
        expr = arg(node, 0, helpers[qualname].seed_param)
    else:
        return None
    if expr is None or is_none(expr):
        return None
    data = flow(module.index)
    terms = [t for t in _terms(expr) if not _mentions_rank(data, t, 0)]
    if len(terms) != 1 or not _simple(terms[0]):
        return None
    base = terms[0]
    root = _root(base)
    if root is not None and not _same_value(module, root, node, call):
        return None
    return module.index.module.code_for_node(base.with_changes(lpar=(), rpar=()))


def _terms(expr: cst.BaseExpression) -> list[cst.BaseExpression]:
    """The terms of a sum (`args.seed + rank`: both)."""
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Add):
        return [*_terms(expr.left), *_terms(expr.right)]
    return [expr]


def _simple(expr: cst.BaseExpression) -> bool:
    """A literal integer, or a name with attributes and literal subscripts."""
    if isinstance(expr, cst.Integer):
        return True
    if isinstance(expr, cst.Subscript):
        return (
            len(expr.slice) == 1
            and isinstance(expr.slice[0].slice, cst.Index)
            and isinstance(expr.slice[0].slice.value, (cst.SimpleString, cst.Integer))
            and _simple(expr.value)
            and not isinstance(expr.value, cst.Integer)
        )
    if isinstance(expr, cst.Attribute):
        return _simple(expr.value) and not isinstance(expr.value, cst.Integer)
    return isinstance(expr, cst.Name) and expr.value not in ("None", "True", "False")


def _root(expr: cst.BaseExpression) -> str | None:
    while isinstance(expr, (cst.Attribute, cst.Subscript)):
        expr = expr.value
    return expr.value if isinstance(expr, cst.Name) else None


def _same_value(module, name: str, seed: cst.Call, split: cst.Call) -> bool:
    """Whether `name` holds at the split what it held at the seeding call: both in one function
    (or both at module level) where it is bound once, before the split, or a module-level name
    bound once that neither function binds."""
    index = module.index
    seed_owner = index.enclosing(seed, cst.FunctionDef)
    split_owner = index.enclosing(split, cst.FunctionDef)
    if seed_owner is split_owner and bindings_of(split_owner or index.module, name):
        return bound_before(module, split_owner or index.module, name, split)
    functions = [a for node in (seed, split) for a in index.ancestors(node) if isinstance(a, cst.FunctionDef)]
    if any(bindings_of(function, name) for function in functions):
        return False
    if index.enclosing(split, cst.FunctionDef, cst.ClassDef, cst.Lambda) is not split_owner:
        return False  # (in a class body or a lambda: not followed)
    return bindings_of(index.module, name) == 1
