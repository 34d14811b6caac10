from __future__ import annotations

import libcst as cst

from torchrepro_lint.analysis.dataflow.classes import derives_from
from torchrepro_lint.analysis.dataflow.core import flow
from torchrepro_lint.analysis.syntax import arg, bool_value, subtree
from torchrepro_lint.project.summaries import summary, summary_kind
from torchrepro_lint.rules.base import Example, Rule, programs_for

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
    fix = (
        "Call `sampler.set_epoch(epoch)` (or `loader.sampler.set_epoch(epoch)`) at the start of "
        "every epoch, before iterating the loader."
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
