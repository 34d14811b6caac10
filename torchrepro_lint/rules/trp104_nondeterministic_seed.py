from __future__ import annotations

import libcst as cst

from torchrepro_lint.analysis.syntax import arg
from torchrepro_lint.project.known_apis import KNOWN_HELPERS
from torchrepro_lint.rules.base import Example, Rule, last_names

SEED_CALLS = {
    "torch.manual_seed": "seed",
    "torch.cuda.manual_seed": "seed",
    "torch.cuda.manual_seed_all": "seed",
    "random.seed": "a",
    "numpy.random.seed": "seed",
}
ENTROPY_PREFIXES = ("secrets.", "uuid.uuid1", "uuid.uuid4")
ENTROPY_CALLS = frozenset(
    {
        "time.time", "time.time_ns", "time.perf_counter", "time.perf_counter_ns", "time.monotonic",
        "time.monotonic_ns", "datetime.datetime.now", "datetime.datetime.utcnow", "datetime.now",
        "datetime.datetime.today", "os.getpid", "os.urandom", "torch.seed", "random.SystemRandom",
    }
)


class NondeterministicSeed(Rule):
    code = "TRP104"
    name = "nondeterministic-seed"
    summary = "A seed taken from the clock, the process id, OS entropy, or no seed at all."
    why = (
        "Seeding with `time.time()`, `os.getpid()` or `os.urandom` looks like seeding but gives a "
        "different seed every run, and nothing records it: the run cannot be repeated. "
        "`np.random.seed()` and `random.seed()` without an argument, and `torch.seed()`, reseed "
        "from OS entropy."
    )
    fix = "Use a fixed seed from configuration; if you want a fresh seed per run, log it, then seed with it."
    not_reported = (
        "A fresh seed drawn, then printed or logged, then used (`seed = int(time.time()); "
        "logging.info(\"seed: %d\", seed); torch.manual_seed(seed)`): the run can be repeated from the log.",
        "A fresh seed stored on an object, such as the run's config (`cfg.seed = int(time.time()); "
        "random.seed(cfg.seed)`), which is saved with the run.",
        "A seed from configuration or a parameter (`torch.manual_seed(args.seed)`).",
        "`torch.seed()` whose result is kept: assigned to a variable that is then recorded, stored on "
        "an object or in a container, or used in an expression.",
    )
    where_reported = (
        "At the seeding call: `torch.manual_seed`, `torch.cuda.manual_seed(_all)`, `random.seed` or "
        "`np.random.seed`, whose seed comes from `time.time()` (or `time_ns`, `perf_counter`, "
        "`monotonic`), `datetime.now()`/`utcnow()`/`today()`, `os.getpid()`, `os.urandom`, "
        "`uuid.uuid1`/`uuid4`, `secrets`, `random.SystemRandom` or `torch.seed()`.",
        "The source counts inside the seed expression (`int(time.time()) % 1000`) or in the value "
        "assigned to the variable passed as the seed, unless that variable is recorded.",
        "At `random.seed()` / `np.random.seed()` with no argument or `None`, and at a bare `torch.seed()` "
        "statement: each reseeds from OS entropy.",
        "At a framework helper called with no seed or `seed=None`, only where None means a random "
        "seed: mmengine's and mmcv's `set_random_seed`, detectron2's `seed_all_rng`.",
        "Every such call is reported, whether or not a program reaches it.",
    )
    decisions = (
        "A variable counts as recorded when, in the same function, another call takes it as an "
        "argument (a `print`, a logger call) or it is stored on an attribute or in a subscript.",
    )
    reference = (
        ("Reproducibility", "https://pytorch.org/docs/stable/notes/randomness.html"),
        ("torch.manual_seed", "https://pytorch.org/docs/stable/generated/torch.manual_seed.html"),
        ("torch.seed", "https://pytorch.org/docs/stable/generated/torch.seed.html"),
        ("random.seed", "https://docs.python.org/3/library/random.html#random.seed"),
    )
    # Candidates are calls resolving to a seeding call, a seed helper, or torch.seed.
    triggers = last_names(SEED_CALLS, [q for q, h in KNOWN_HELPERS.items() if h.random_when_seed_none], ["torch.seed"])
    hazards = (
        Example(
            '''import time
import torch

torch.manual_seed(int(time.time()))  # <-- TRP104
''',
            "Seeding from the clock",
            fixed='''import time
import torch

torch.manual_seed(0)
''',
        ),
        Example(
            '''import random
import numpy as np

np.random.seed()  # <-- TRP104
random.seed(None)  # <-- TRP104
''',
            "No seed is a seed from OS entropy",
        ),
        Example(
            '''import os
import torch

def setup():
    seed = os.getpid() % 1000
    torch.manual_seed(seed)  # <-- TRP104
''',
            "Through a variable that is never recorded",
        ),
        Example(
            '''from mmengine.runner import set_random_seed

set_random_seed(None)  # <-- TRP104
''',
            "A helper for which None means random",
        ),
    )
    traps = (
        Example(
            '''import logging
import time
import torch

def setup():
    seed = int(time.time())
    logging.info("seed: %d", seed)
    torch.manual_seed(seed)
''',
            "Drawn, logged, then used",
        ),
        Example(
            '''import torch

def setup(args):
    torch.manual_seed(args.seed)
''',
            "A seed from configuration",
        ),
        Example(
            '''import random
import time

def setup(cfg):
    cfg.seed = int(time.time())
    random.seed(cfg.seed)
''',
            "Stored on the run's config, which is saved with the run",
        ),
    )

    def check_module(self, module, context):
        index = module.index
        helpers = {q: h for q, h in KNOWN_HELPERS.items() if h.random_when_seed_none}
        for site in index.calls_to(*SEED_CALLS, *helpers, "torch.seed"):
            call = site.node
            if site.qualname == "torch.seed":
                if self._result_recorded(index, call):
                    continue
                yield context.report(
                    self, module, call,
                    "`torch.seed()` reseeds torch from OS entropy, so this run cannot be repeated; "
                    "seed with a fixed value from configuration (or log the returned seed)",
                )
                continue
            if site.qualname in helpers:
                helper = helpers[site.qualname]
                seed = arg(call, 0, helper.seed_param)
                if seed is None or _is_none(seed):
                    yield context.report(
                        self, module, call,
                        f"`{site.qualname.rsplit('.', 1)[1]}` with seed=None draws a random seed; pass a fixed seed",
                    )
                continue
            seed = arg(call, 0, SEED_CALLS[site.qualname])
            if seed is None or _is_none(seed):
                if site.qualname in ("random.seed", "numpy.random.seed"):
                    yield context.report(
                        self, module, call,
                        f"`{_short(site.qualname)}()` without a seed reseeds from OS entropy, so this run "
                        "cannot be repeated; pass a fixed seed",
                    )
                continue
            source = self._entropy_source(index, seed, call)
            if source is not None:
                yield context.report(
                    self, module, call,
                    f"the seed comes from `{source}`, which differs every run and is not recorded; "
                    "use a fixed seed from configuration, or log the seed before seeding with it",
                )

    def _entropy_source(self, index, expr: cst.BaseExpression, at: cst.CSTNode) -> str | None:
        direct = _entropy_call(index, expr, at)
        if direct is not None:
            return direct
        if isinstance(expr, cst.Name):
            value = index.assigned_value(expr.value, at)
            if value is not None and value is not expr:
                source = _entropy_call(index, value, at)
                if source is not None and not _recorded(index, expr.value, at):
                    return source
        return None

    def _result_recorded(self, index, call: cst.Call) -> bool:
        parent = index.parents.get(call)
        if isinstance(parent, cst.Assign):
            for target in parent.targets:
                if isinstance(target.target, cst.Name):
                    return _recorded(index, target.target.value, call, exclude=None)
                return True  # stored on an object or in a container
        return not isinstance(parent, cst.Expr)


def _short(qualname: str) -> str:
    return qualname.replace("numpy.", "np.")


def _is_none(expr) -> bool:
    return isinstance(expr, cst.Name) and expr.value == "None"


def _entropy_call(index, expr: cst.CSTNode, at: cst.CSTNode) -> str | None:
    if isinstance(expr, cst.Call):
        qualname = index.resolve(expr.func, at)
        if qualname and (qualname in ENTROPY_CALLS or qualname.startswith(ENTROPY_PREFIXES)):
            return qualname
    for child in expr.children:
        found = _entropy_call(index, child, at)
        if found is not None:
            return found
    return None


def _recorded(index, name: str, at: cst.CSTNode, exclude: cst.CSTNode | None = "seed-call") -> bool:
    """Whether a variable is printed, logged, or stored elsewhere besides the seeding call."""
    function = index.enclosing(at, cst.FunctionDef)
    seed_call = at if exclude == "seed-call" else None
    for site in index.calls:
        if site.node is seed_call or index.enclosing(site.node, cst.FunctionDef) is not function:
            continue
        if any(_mentions(arg.value, name) for arg in site.node.args):
            return True
    for node, parent in index.parents.items():
        if isinstance(node, (cst.Assign,)) and index.enclosing(node, cst.FunctionDef) is function:
            if any(isinstance(t.target, (cst.Attribute, cst.Subscript)) for t in node.targets) and _mentions(node.value, name):
                return True
    return False


def _mentions(expr: cst.CSTNode, name: str) -> bool:
    if isinstance(expr, cst.Name):
        return expr.value == name
    return any(_mentions(child, name) for child in expr.children)
