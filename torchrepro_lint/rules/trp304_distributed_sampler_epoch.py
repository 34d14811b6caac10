from __future__ import annotations

import libcst as cst

from torchrepro_lint.analysis.dataflow.classes import derives_from
from torchrepro_lint.analysis.dataflow.core import flow
from torchrepro_lint.analysis.syntax import arg, bool_value, subtree
from torchrepro_lint.project.summaries import summary, summary_kind
from torchrepro_lint.rules.base import Example, Rule, programs_for
from torchrepro_lint.rules.edits import make_fix, statement_line
from torchrepro_lint.rules.statements import DEFERRED, bindings_of, block_of, insert_above

SAMPLER = "torch.utils.data.DistributedSampler"
SAMPLERS = frozenset({SAMPLER})
# Frameworks whose training loops call set_epoch on the loader's sampler themselves.
MANAGED_ROOTS = ("lightning", "pytorch_lightning", "accelerate", "transformers", "ignite", "composer")


class DistributedSamplerEpoch(Rule):
    code = "TRP304"
    name = "distributed-sampler-epoch"
    summary = "A shuffling `DistributedSampler` in a program with an epoch loop but no `set_epoch` call."
    why = (
        "`DistributedSampler` shuffles with a generator seeded from `seed + epoch`, and `epoch` "
        "only changes when you call `sampler.set_epoch(epoch)`. Without it every epoch visits "
        "the data in exactly the same order, which quietly changes training (and differs from "
        "the same script run on one GPU with a shuffling DataLoader)."
    )
    fix_safety = "unsafe"
    fix = (
        "Call `sampler.set_epoch(epoch)` (or `loader.sampler.set_epoch(epoch)`) at the start of "
        "every epoch, before iterating the loader. The fix inserts `sampler.set_epoch(epoch)` as the "
        "first statement of the epoch loop when it sees all of it in one function: the sampler "
        "assigned to a name (`sampler = DistributedSampler(...)`, torch's class itself), a loader "
        "given `sampler=sampler`, and after them a `for epoch in range(...)` whose body has a `for` "
        "over that loader. It is unsafe because it changes a run that was reproducible: from the "
        "second epoch on, every epoch sees a new order, so the numbers of earlier runs are not "
        "repeated by the fixed code."
    )
    not_reported = (
        "`DistributedSampler(..., shuffle=False)` (validation), or a `shuffle=` that is not a literal.",
        "A program that calls `set_epoch(...)` anywhere, on any receiver, such as "
        "`self.loader.sampler.set_epoch(epoch)` in another module.",
        "No visible epoch loop (a `for` / `while` whose target, iterable or test mentions "
        "`epoch`): a single pass needs no `set_epoch`.",
        "Programs that import Lightning, Accelerate, Transformers, Ignite or Composer: their "
        "training loops call `set_epoch` themselves.",
        "A project subclass whose own `__iter__` ignores `self.epoch`: `set_epoch` would change "
        "nothing.",
        "A call with `*args` or `**kwargs`.",
    )
    where_reported = (
        "At the sampler's construction: `torch.utils.data.DistributedSampler` (any alias) or a "
        "project subclass of it; every matching call, reachable from a program or not.",
        "The code searched for `set_epoch` and for an epoch loop is every module of the programs "
        "that run the construction (for a method no program is seen calling, the programs that "
        "reach its module); for code no program reaches, its own module.",
    )
    decisions = (
        "A `set_epoch(...)` call on any receiver counts, since the sampler often travels inside "
        "a loader (`self.train_data.sampler.set_epoch(epoch)`).",
        "Only a literal `shuffle=True` (or no `shuffle=`) counts as shuffling (precision first).",
    )
    reference = (
        ("torch.utils.data.distributed.DistributedSampler", "https://pytorch.org/docs/stable/data.html#torch.utils.data.distributed.DistributedSampler"),
    )
    # A candidate is a call resolving to DistributedSampler, or to a project subclass of it
    # that may be defined in another file under any name: a file can only name that through an
    # import (or a class of its own deriving from an imported one). Sound, but nearly every file
    # imports something: a narrower gate needs the project (the names of its subclasses).
    triggers = ("DistributedSampler", "import")
    hazards = (
        Example(
            '''import torch
from torch.utils.data import DataLoader, DistributedSampler

def train(model, dataset, epochs):
    sampler = DistributedSampler(dataset)  # <-- TRP304
    loader = DataLoader(dataset, batch_size=32, sampler=sampler)
    for epoch in range(epochs):
        for batch in loader:
            model(batch).sum().backward()
''',
            "An epoch loop without set_epoch",
            fixed='''import torch
from torch.utils.data import DataLoader, DistributedSampler

def train(model, dataset, epochs):
    sampler = DistributedSampler(dataset)
    loader = DataLoader(dataset, batch_size=32, sampler=sampler)
    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        for batch in loader:
            model(batch).sum().backward()
''',
        ),
        Example(
            '''from torch.utils.data import DataLoader
from torch.utils.data.distributed import DistributedSampler

class Trainer:
    def __init__(self, dataset):
        self.loader = DataLoader(dataset, batch_size=8, sampler=DistributedSampler(dataset, shuffle=True))  # <-- TRP304

    def fit(self, max_epochs):
        for epoch in range(max_epochs):
            for batch in self.loader:
                self.step(batch)
''',
            "Built inline, shuffle=True, never advanced",
        ),
        Example(
            {
                "train.py": '''import torch.utils.data as tud
from loop import run_epochs

def main(dataset):
    sampler = tud.distributed.DistributedSampler(dataset, num_replicas=2, rank=0)  # <-- TRP304
    run_epochs(tud.DataLoader(dataset, sampler=sampler), 10)

if __name__ == "__main__":
    main(None)
''',
                "loop.py": '''def run_epochs(loader, n_epochs):
    for epoch in range(n_epochs):
        for batch in loader:
            pass
''',
            },
            "The epoch loop lives in another module and never calls set_epoch",
        ),
    )
    traps = (
        Example(
            '''from torch.utils.data import DataLoader, DistributedSampler

def train(dataset, epochs):
    sampler = DistributedSampler(dataset)
    loader = DataLoader(dataset, sampler=sampler)
    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        for batch in loader:
            pass
''',
            "set_epoch at the top of every epoch",
        ),
        Example(
            '''from torch.utils.data import DataLoader, DistributedSampler

def evaluate(model, dataset, epochs):
    loader = DataLoader(dataset, sampler=DistributedSampler(dataset, shuffle=False))
    for epoch in range(epochs):
        for batch in loader:
            model(batch)
''',
            "A non-shuffling sampler (validation)",
        ),
        Example(
            {
                "train.py": '''from torch.utils.data import DataLoader, DistributedSampler
from engine import Runner

def main(dataset, epochs):
    runner = Runner(DataLoader(dataset, sampler=DistributedSampler(dataset)))
    for epoch in range(epochs):
        runner.run_epoch(epoch)

if __name__ == "__main__":
    main(None, 3)
''',
                "engine.py": '''class Runner:
    def __init__(self, loader):
        self.loader = loader

    def run_epoch(self, epoch):
        self.loader.sampler.set_epoch(epoch)
        for batch in self.loader:
            pass
''',
            },
            "set_epoch through loader.sampler, in another module of the program",
        ),
        Example(
            '''from torch.utils.data import DataLoader, DistributedSampler

def one_pass(dataset, model):
    for batch in DataLoader(dataset, sampler=DistributedSampler(dataset)):
        model(batch)
''',
            "A single pass: no epoch loop",
        ),
    )

    def check_module(self, module, context):
        index = module.index
        candidates = [s for s in index.calls if s.qualname and self._is_sampler(context, module, s.qualname)]
        if not candidates:
            return
        for site in candidates:
            call = site.node
            shuffle = arg(call, 3, "shuffle")
            if shuffle is not None and bool_value(shuffle) is not True:
                continue
            if any(a.star for a in call.args):
                continue
            scope = self._program_modules(context, module, call)
            if any(self._managed(m) for m in scope):
                continue
            # Other modules are asked through summaries: a comment there must not re-check this file.
            if any(summary(m, "calls set_epoch") for m in scope):
                continue
            if not any(summary(m, "epoch loop") for m in scope):
                continue
            yield context.report(
                self, module, call,
                "shuffling `DistributedSampler` but the program never calls `set_epoch(epoch)`: its "
                "shuffle is seeded with `seed + epoch`, so every epoch repeats the same order; call "
                "`sampler.set_epoch(epoch)` at the start of each epoch",
                fix=set_epoch_fix(module, call) if site.qualname == SAMPLER else None,
            )

    def _is_sampler(self, context, module, qualname: str) -> bool:
        found = derives_from(context.project, module, qualname, SAMPLERS)
        if found is None:
            return False
        if found is True:
            return True
        klass = found.module.index.classes.get(found.path)
        methods = flow(found.module.index).methods(klass) if klass is not None else {}
        iterate = methods.get("__iter__")
        if iterate is None:
            return True
        return any(
            isinstance(node, cst.Attribute) and node.attr.value == "epoch" for node in subtree(iterate.body)
        )

    def _program_modules(self, context, module, call) -> list:
        programs = programs_for(context, module, call)
        if not programs:
            return [module]
        ids = set().union(*(p.facts.modules for p in programs))
        return [m for m in context.project.modules.values() if m.path in ids] or [module]

    @staticmethod
    def _managed(module) -> bool:
        # From the IR (every import, any depth): no need to parse each module of the program.
        return any(name.split(".")[0] in MANAGED_ROOTS for name, _ in module.ir.imported_modules)


@summary_kind("calls set_epoch")
def _calls_set_epoch(module, _argument: str = "") -> bool:
    if "set_epoch" not in module.source.text:
        return False  # the call spells it: no need to parse the module to know
    return any(
        isinstance(site.node.func, cst.Attribute) and site.node.func.attr.value == "set_epoch"
        for site in module.index.calls
    )


@summary_kind("epoch loop")
def _has_epoch_loop(module, _argument: str = "") -> bool:
    if "epoch" not in module.source.text.lower():
        return False  # the loop's code is a slice of the text: no need to parse the module
    code = module.source.module.code_for_node
    for node in module.index.parents:
        if isinstance(node, cst.For):
            text = code(node.target) + " " + code(node.iter)
        elif isinstance(node, cst.While):
            text = code(node.test)
        else:
            continue
        if "epoch" in text.lower():
            return True
    return False


def set_epoch_fix(module, call: cst.Call):
    """`sampler.set_epoch(epoch)` as the first statement of each epoch loop (`for epoch in
    range(...)`) that follows the sampler's assignment in its block and iterates a loader given
    `sampler=sampler` (a `for` over it, in that loop's body): the sampler a name bound once in its
    function, the loader too. Anything else (a sampler built inline, a `while` loop, a loop in
    another function) gets no fix."""
    index = module.index
    assign = index.parents.get(call)
    if isinstance(assign, cst.Assign) and len(assign.targets) == 1:
        target = assign.targets[0].target
    elif isinstance(assign, cst.AnnAssign):
        target = assign.target
    else:
        return None
    line = statement_line(module, call)
    if assign.value is not call or not isinstance(target, cst.Name) or line is None:
        return None
    name = target.value
    owner = index.enclosing(line, cst.FunctionDef) or index.module
    block = block_of(module, line)
    if block is None or bindings_of(owner, name) != 1:
        return None
    loaders, given = _loaders(index, owner, name)
    code = index.module.code_for_node
    loops = []
    for statement in block[block.index(line) + 1 :]:
        loops.extend(_epoch_loops(index, statement, loaders, given, code))
    edits = [insert_above(module, loop.body.body[0], f"{name}.set_epoch({loop.target.value})") for loop in loops]
    return make_fix("unsafe", f"Call `{name}.set_epoch(epoch)` at the start of each epoch", edits)


def _loaders(index, owner, sampler: str) -> tuple[set[str], set[int]]:
    """The names bound once to a call given `sampler=<sampler>`, and (ids) those calls."""
    names, calls = set(), set()
    for node in _running(owner):
        if isinstance(node, cst.Call) and any(
            a.keyword is not None and a.keyword.value == "sampler" and isinstance(a.value, cst.Name) and a.value.value == sampler
            for a in node.args
        ):
            calls.add(id(node))
            assign = index.parents.get(node)
            if isinstance(assign, cst.Assign) and len(assign.targets) == 1 and isinstance(assign.targets[0].target, cst.Name):
                loader = assign.targets[0].target.value
                if bindings_of(owner, loader) == 1:
                    names.add(loader)
    return names, calls


def _epoch_loops(index, node, loaders: set[str], given: set[int], code):
    """The outermost `for <name> in range(...)` loops in `node` (where it runs) that mention
    `epoch` and hold a `for` over a loader of the sampler."""
    stack = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, (*DEFERRED, cst.ClassDef)):
            continue
        if (
            isinstance(current, cst.For)
            and current.asynchronous is None
            and isinstance(current.target, cst.Name)
            and isinstance(current.iter, cst.Call)
            and index.resolve(current.iter.func, current.iter) == "builtins.range"
            and "epoch" in (code(current.target) + " " + code(current.iter)).lower()
            and isinstance(current.body, cst.IndentedBlock)
            and any(_iterates(inner, loaders, given) for inner in _running(current.body) if isinstance(inner, cst.For))
        ):
            yield current
            continue
        stack.extend(reversed(current.children))


def _iterates(loop: cst.For, loaders: set[str], given: set[int]) -> bool:
    """Whether a `for` iterates a loader of the sampler (`loader`, `enumerate(loader)`, a loader
    built there)."""
    return any((isinstance(n, cst.Name) and n.value in loaders) or id(n) in given for n in _running(loop.iter))


def _running(node: cst.CSTNode):
    """`node` and what is under it where it runs: not the bodies of functions, lambdas or classes
    defined there."""
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(c for c in current.children if not isinstance(c, (*DEFERRED, cst.ClassDef)))
