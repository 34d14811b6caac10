from __future__ import annotations

import libcst as cst

from torchrepro_lint.analysis.dataflow.classes import callee_classes, derives_from
from torchrepro_lint.analysis.dataflow.core import flow
from torchrepro_lint.analysis.dataflow.dict_views import dict_view, literal
from torchrepro_lint.analysis.syntax import arg, int_value, is_none
from torchrepro_lint.analysis.literals import is_false
from torchrepro_lint.analysis.names import canonical
from torchrepro_lint.findings import Severity
from torchrepro_lint.project.programs import seeds_torch
from torchrepro_lint.rules.base import Example, Rule, programs_for
from torchrepro_lint.rules.edits import add_keywords, insert_after_imports, make_fix, module_name_for

DATALOADER = "torch.utils.data.DataLoader"
# Library loaders that are DataLoader subclasses and pass **kwargs on to it.
LIBRARY_LOADERS = frozenset(
    {
        DATALOADER,
        "torch_geometric.loader.DataLoader",
        "torch_geometric.loader.DenseDataLoader",
        "torch_geometric.loader.NeighborLoader",
        "torch_geometric.loader.LinkNeighborLoader",
        "torch_geometric.data.DataLoader",
        # torchdata's resumable loader (torchtune, OpenRLHF): a DataLoader subclass whose workers
        # get their seeds the same way
        "torchdata.stateful_dataloader.StatefulDataLoader",
        "torchdata.stateful_dataloader.stateful_dataloader.StatefulDataLoader",
    }
)
# torch.utils.data.DataLoader(dataset, batch_size, shuffle, sampler, batch_sampler, num_workers,
#                             collate_fn, pin_memory, drop_last, timeout, worker_init_fn,
#                             multiprocessing_context, generator, ...)
LIGHTNING_MODULES = frozenset(
    f"{root}.{name}"
    for root in ("lightning", "lightning.pytorch", "pytorch_lightning", "pytorch_lightning.core")
    for name in ("LightningDataModule", "LightningModule")
)
POSITION = {"shuffle": 2, "sampler": 3, "batch_sampler": 4, "num_workers": 5, "worker_init_fn": 10, "generator": 12}
ORDER_KEYS = ("sampler", "batch_sampler")  # a sampler may shuffle; without one, only `shuffle=` does
SEEDING_KEYS = ("worker_init_fn", "generator")


class DataLoaderWorkerSeed(Rule):
    code = "TRP301"
    name = "dataloader-worker-seed"
    summary = "A DataLoader with worker processes but neither `generator=` nor `worker_init_fn=`."
    why = (
        "Without a `generator`, each pass over the loader draws the workers' base seed (and a "
        "shuffling loader draws its order) from torch's global generator. Any other draw in "
        "between (an extra evaluation pass, a debug batch, a new layer) shifts the data stream "
        "and every random augmentation in the workers; in a program that never seeds torch the "
        "worker seeds are simply random."
    )
    severity = Severity.WARNING
    fix_safety = "unsafe"
    fix = (
        "Give the loader its own seeded generator and seed the workers from it, as in PyTorch's "
        "reproducibility notes. The fix passes `generator=torch.Generator().manual_seed(seed)` "
        "(the `seed` option) and `worker_init_fn=seed_worker`, and adds the notes' `seed_worker` "
        "helper after the imports, once per module, importing `torch`, `numpy` and `random` as "
        "needed. Unsafe: it changes which samples and augmentations a run sees."
    )
    not_reported = (
        "`num_workers` absent, `0`, or a name bound to `0`: everything happens in the main process.",
        "A loader given `generator=` or `worker_init_fn=` (either one), directly or through a "
        "visible `**kwargs` dict.",
        "Opaque arguments, which may carry either argument: `**kwargs` received as a parameter or "
        "returned by a call, a dict built partly from one, or any `*args`.",
        "A project subclass whose own code passes `generator=` or `worker_init_fn=`.",
        "A loader built in a Lightning module or datamodule when the project calls "
        "`seed_everything(..., workers=True)`, or Fabric's `fabric.seed_everything(...)` (its "
        "`workers` defaults to True) and passes loaders through `fabric.setup_dataloaders`: "
        "Lightning then adds its own `worker_init_fn`.",
        "A loader handed to `fabric.setup_dataloaders(...)` or to a Lightning Trainer's `fit`, "
        "`validate`, `test` or `predict` (a `Trainer` built in view) after such a seed: as an "
        "argument, through a variable of its function (`loader = fabric.setup_dataloaders(loader)`), "
        "or returned by a function to a caller that hands it over. The seed counts earlier in the "
        "hand-over's function, at its module's top level, or earlier in a function that calls it. "
        "Lightning's `worker_init_fn` seeds each worker's `random`, NumPy and torch from the "
        "process seed, the worker and the rank (`pl_worker_init_function`).",
    )
    where_reported = (
        "At the loader's construction: every matching call, reachable from a program or not.",
        "Loaders: `torch.utils.data.DataLoader` (any alias, or a class variable bound to it), "
        "project subclasses, PyTorch Geometric's loaders and torchdata's `StatefulDataLoader`. "
        "Subclasses count by keyword only; torch's own `DataLoader` by position too.",
        "`num_workers` may be > 0 when it is a positive literal, any non-literal expression "
        "(`args.workers`, `min(8, os.cpu_count())`), or a key of a `**kwargs` dict built in the "
        "same function: a literal, `dict(...)`, `.update(...)` (a conditional one counts as made), "
        "`d[k] = v`, `a if c else b`.",
        "A warning; a note when every program that runs the call's function seeds torch (the "
        "stream is reproducible, but fragile). For a method no program is seen calling (a "
        "framework hook), the programs that reach its module decide.",
    )
    decisions = (
        "Either argument is enough to stay silent: `generator=` fixes the base seed and the "
        "shuffle order, and a user's `worker_init_fn` (or a project subclass that passes either "
        "argument itself) is trusted to seed the workers.",
        "For a plain function nobody calls, the level is a warning and the message names both "
        "outcomes (random worker seeds in an unseeded program, shifted ones in a seeded one).",
        "Lightning seeds only the loaders it is handed, and only when `PL_SEED_WORKERS` is 1 at "
        "that moment (fabric/utilities/data.py `_auto_add_worker_init_fn`, called by Fabric's "
        "`_setup_dataloader` and the Trainer's `_process_dataloader`). So `seed_everything(7)` "
        "(the function's `workers` defaults to False, `lightning.fabric.seed_everything` too), "
        "`workers=False`, a seed after the hand-over, or a loader the code iterates without "
        "handing it over stays reported. `use_distributed_sampler=False` changes nothing: the "
        "`worker_init_fn` is added whatever the sampler. A `fit` on a trainer the code does not "
        "show to be Lightning's is not taken to be one.",
    )
    options = (
        "`seed`: the seed the fix gives the loader's generator (default 0).",
        "`seed-functions`: calls to these helpers seed torch, which lowers the finding to a note.",
    )
    reference = (
        ("Reproducibility: DataLoader", "https://pytorch.org/docs/stable/notes/randomness.html#dataloader"),
        ("Randomness in multi-process data loading", "https://pytorch.org/docs/stable/data.html#randomness-in-multi-process-data-loading"),
        ("torch.utils.data.DataLoader", "https://pytorch.org/docs/stable/data.html#torch.utils.data.DataLoader"),
    )
    # A candidate needs workers: a `num_workers` keyword or dict key, or the sixth positional
    # argument of a call resolving to torch's DataLoader itself. (Loader subclasses, whatever
    # their name, only count a keyword.)
    triggers = ("num_workers", "DataLoader")
    hazards = (
        Example(
            '''import torch
from torch.utils.data import DataLoader

def make_loader(dataset, args):
    return DataLoader(dataset, batch_size=32, shuffle=True, num_workers=args.workers)  # <-- TRP301
''',
            "Workers from configuration, no generator",
            fixed='''import torch
from torch.utils.data import DataLoader
import numpy as np
import random


def seed_worker(worker_id):
    # From the PyTorch reproducibility notes: derive each worker's seeds from torch's.
    worker_seed = torch.initial_seed() % 2**32
    np.random.seed(worker_seed)
    random.seed(worker_seed)

def make_loader(dataset, args):
    return DataLoader(dataset, batch_size=32, shuffle=True, num_workers=args.workers, generator=torch.Generator().manual_seed(0), worker_init_fn=seed_worker)
''',
        ),
        Example(
            '''import torch

def loaders(train_set, use_cuda):
    kwargs = {"batch_size": 64}
    if use_cuda:
        kwargs.update({"num_workers": 2, "pin_memory": True, "shuffle": True})
    return torch.utils.data.DataLoader(train_set, **kwargs)  # <-- TRP301
''',
            "num_workers arrives through a dict filled with .update()",
        ),
        Example(
            '''from torch.utils.data import DataLoader as DL

class FastLoader(DL):
    pass

def build(ds, image_weights, workers=8):
    loader_cls = DL if image_weights else FastLoader
    return loader_cls(ds, batch_size=16, num_workers=workers)  # <-- TRP301
''',
            "A class variable bound to DataLoader or a project subclass",
        ),
        Example(
            '''import torch
from torch.utils.data import DataLoader

if __name__ == "__main__":
    torch.manual_seed(0)
    ds = torch.utils.data.TensorDataset(torch.randn(100, 3))
    kwargs = {"num_workers": 4, "pin_memory": True} if torch.cuda.is_available() else {}
    loader = DataLoader(ds, batch_size=10, **kwargs)  # <-- TRP301
''',
            "A conditional dict, in a seeded program (reported as a note)",
        ),
    )
    traps = (
        Example(
            '''from torch.utils.data import DataLoader

def make_loader(ds):
    return DataLoader(ds, batch_size=8, shuffle=True)
''',
            "num_workers absent: everything happens in the main process",
        ),
        Example(
            '''from torch.utils.data import DataLoader

def make_loader(ds, **loader_kwargs):
    return DataLoader(ds, batch_size=8, **loader_kwargs)
''',
            "Opaque **kwargs received as a parameter",
        ),
        Example(
            '''import random
import numpy as np
import torch
from torch.utils.data import DataLoader

def seed_worker(worker_id):
    seed = torch.initial_seed() % 2**32
    np.random.seed(seed)
    random.seed(seed)

def make_loader(ds, seed):
    g = torch.Generator()
    g.manual_seed(seed)
    opts = {"num_workers": 4, "worker_init_fn": seed_worker, "generator": g}
    return DataLoader(ds, batch_size=8, shuffle=True, **opts)
''',
            "Both arguments passed through a visible dict",
        ),
        Example(
            '''from torch.utils.data import DataLoader

def make_loader(ds, debug):
    workers = 0
    return DataLoader(ds, batch_size=8, num_workers=workers)
''',
            "num_workers bound to 0",
        ),
        Example(
            '''import torch
from torch.utils.data import DataLoader

def make_loader(ds, seed):
    return DataLoader(ds, num_workers=4, generator=torch.Generator().manual_seed(seed))
''',
            "A seeded generator alone fixes base seeds and order",
        ),
    )

    def check_module(self, module, context):
        index = module.index
        data = flow(index)
        for site in index.calls:
            call = site.node
            candidates = callee_classes(data, call.func, call)
            kinds = [self._loader_kind(context.project, module, q) for q in candidates]
            kinds = [k for k in kinds if k is not None]
            if not kinds or "provides" in kinds:
                continue
            positional_ok = all(k == "torch" for k in kinds)
            if any(a.star == "*" for a in call.args):
                continue
            explicit = {a.keyword.value: a.value for a in call.args if a.keyword is not None}
            if positional_ok:
                for key, position in POSITION.items():
                    value = arg(call, position, None)
                    if value is not None:
                        explicit.setdefault(key, value)
            view = literal(explicit)
            for a in call.args:
                if a.star == "**":
                    view = view.merged(dict_view(data, a.value, call))
            if not view.complete:
                continue
            workers = self._hazardous_workers(data, view)
            if workers is None:
                continue
            if self._lightning_seeds_workers(context, module, call) or _handed_to_seeding_lightning(context, module, call):
                continue
            programs = programs_for(context, module, call)
            seeded = None if not programs else all(seeds_torch(p.facts) for p in programs)
            severity = Severity.NOTE if seeded else Severity.WARNING
            fix = worker_seed_fix(module, call, context.config.seed)
            message = self._message(workers, seeded, module, self._may_shuffle(view, index, call))
            yield context.report(self, module, call, message, severity, fix=fix)

    @staticmethod
    def _loader_kind(project, module, qualname: str) -> str | None:
        """"torch" for a library loader, "subclass" for a project subclass, "provides" for a
        subclass that passes a generator or worker_init_fn itself, None otherwise."""
        if qualname in LIBRARY_LOADERS:
            return "torch" if qualname == DATALOADER else "subclass"
        symbol = derives_from(project, module, qualname, LIBRARY_LOADERS)
        if symbol is None or symbol is True:
            return None
        klass = symbol.module.index.classes.get(symbol.path)
        if klass is not None:
            for node in symbol.module.index.calls:
                if any(a.keyword is not None and a.keyword.value in SEEDING_KEYS for a in node.node.args):
                    if any(ancestor is klass for ancestor in symbol.module.index.ancestors(node.node)):
                        return "provides"
        return "subclass"

    @staticmethod
    def _hazardous_workers(data, view) -> cst.BaseExpression | None:
        """The num_workers expression of a dict option that may start workers without either
        seeding argument, else None."""
        for option in view.options:
            if any(key in option and not is_none(option[key]) for key in SEEDING_KEYS):
                continue
            workers = option.get("num_workers")
            if workers is None or not _may_be_positive(data, workers):
                continue
            return workers
        return None

    @staticmethod
    def _lightning_seeds_workers(context, module, call: cst.Call) -> bool:
        """A loader built in a Lightning module or datamodule, in a project that calls
        `seed_everything(..., workers=True)`: Lightning adds its own worker_init_fn."""
        klass = module.index.enclosing(call, cst.ClassDef)
        if klass is None:
            return False
        path = ".".join(
            n.name.value for n in reversed([klass, *[a for a in module.index.ancestors(klass) if isinstance(a, cst.ClassDef)]])
        )
        if derives_from(context.project, module, "@." + path, LIGHTNING_MODULES) is None:
            return False
        fabric_seeds = False  # Fabric's seed_everything, whose `workers` defaults to True
        loaders_set_up = False  # ... which only `fabric.setup_dataloaders` acts on
        for other in context.project.modules.values():
            for site in other.index.calls:
                method = site.node.func.attr.value if isinstance(site.node.func, cst.Attribute) else ""
                name = site.qualname or method
                loaders_set_up = loaders_set_up or method == "setup_dataloaders"
                if name.rsplit(".", 1)[-1] == "seed_everything":
                    workers = arg(site.node, 1, "workers")
                    if isinstance(workers, cst.Name) and workers.value == "True":
                        return True
                    fabric = site.qualname is None or site.qualname.endswith("Fabric.seed_everything")
                    fabric_seeds = fabric_seeds or (fabric and workers is None)
        return fabric_seeds and loaders_set_up

    @staticmethod
    def _may_shuffle(view, index, at: cst.CSTNode) -> bool:
        """Whether the loader may draw its order from torch's global generator: `shuffle=` not
        literally False, or a sampler that may (SequentialSampler never does; DistributedSampler
        orders by its own seed and epoch; torch's samplers given `generator=` shuffle with it; a
        BatchSampler orders by the sampler it wraps). A sequential
        loader still draws its workers' seeds."""
        for option in view.options:
            for key in ORDER_KEYS:
                if key in option and not is_none(option[key]) and _sampler_may_draw(index, option[key], at):
                    return True
            if "shuffle" in option and not is_false(option["shuffle"]):
                return True
        return False

    def _message(self, workers: cst.BaseExpression, seeded: bool | None, module, shuffles: bool = True) -> str:
        text = " ".join(module.source.module.code_for_node(workers).split())
        if len(text) > 30:
            text = text[:27] + "..."
        drawn = "worker seeds and the shuffle order are" if shuffles else "worker seeds (not the loader's order) are"
        if seeded:
            consequence = (
                f"{drawn} drawn from torch's global generator, so any other draw before a pass (an "
                f"extra eval batch, a new layer) shifts {'the data stream' if shuffles else 'the random augmentations workers draw'}"
            )
        elif seeded is None:
            consequence = (
                f"{drawn} drawn from torch's global generator: random in a program that does not seed "
                "torch, and shifted by any other draw in one that does"
            )
        else:
            consequence = (
                f"{drawn} drawn from torch's global generator, which this program does not seed, so "
                f"every run sees different {'augmentations and order' if shuffles else 'random augmentations in the workers'}"
            )
        return (
            f"DataLoader with `num_workers={text}` but neither `generator=` nor `worker_init_fn=`: "
            f"{consequence}; pass `generator=` a seeded `torch.Generator()` and "
            f"`worker_init_fn=seed_worker`"
        )


# Lightning gives a loader handed to it a worker_init_fn that seeds each worker, when the loader
# has none and PL_SEED_WORKERS is 1 (fabric/utilities/data.py _auto_add_worker_init_fn), which
# `seed_everything(..., workers=True)` sets (fabric/utilities/seed.py; Fabric's static method
# defaults `workers` to True). It does so for the loaders given to `fabric.setup_dataloaders`
# (fabric.py _setup_dataloader, after any distributed sampler is put in) and to a Lightning
# Trainer's fit/validate/test/predict (pytorch/trainer/connectors/data_connector.py
# _process_dataloader).
TRAINER_RUNS = frozenset({"fit", "validate", "test", "predict"})
LIGHTNING_TRAINER = "lightning.Trainer"


def _handed_to_seeding_lightning(context, module, call: cst.Call) -> bool:
    """A loader that reaches `fabric.setup_dataloaders(...)` or a Lightning Trainer's run after
    a seed that turns worker seeding on: directly, through a variable of its function, or as
    what a function returns to one of its callers (one level)."""
    index = module.index
    if any(_workers_seeded_before(context, module, handoff) for handoff in _handoffs(index, call)):
        return True
    function = index.enclosing(call, cst.FunctionDef)
    if function is None or not _returns(index, function, call):
        return False
    path = ".".join(n.name.value for n in reversed([function, *_outer_defs(index, function)]))
    names = {f"{module.name}.{path}"}
    for other in context.project.modules.values():
        local = {"@." + path} if other is module else set()
        for site in other.index.calls_to(*names, *local):
            if any(_workers_seeded_before(context, other, handoff) for handoff in _handoffs(other.index, site.node)):
                return True
    return False


def _outer_defs(index, node: cst.CSTNode) -> list:
    return [a for a in index.ancestors(node) if isinstance(a, (cst.FunctionDef, cst.ClassDef))]


def _handoffs(index, value: cst.Call):
    """The calls that hand Lightning the loader `value` builds, as an argument or through a
    variable (`loader = fabric.setup_dataloaders(loader)` reads the loader it rebinds)."""
    parent = next(index.ancestors(value), None)
    if isinstance(parent, cst.Arg):
        outer = next(index.ancestors(parent), None)
        if isinstance(outer, cst.Call) and _is_handoff(index, outer):
            yield outer
        return
    if not (isinstance(parent, cst.Assign) and len(parent.targets) == 1 and isinstance(parent.targets[0].target, cst.Name)):
        return
    data, name, scope = flow(index), parent.targets[0].target.value, index.enclosing_scope(value)
    for site in index.calls:
        if site.scope is scope and _is_handoff(index, site.node):
            if any(isinstance(a.value, cst.Name) and a.value.value == name and data.reaching_value(a.value) is value
                   for a in site.node.args):
                yield site.node


def _is_handoff(index, call: cst.Call) -> bool:
    func = call.func
    if not isinstance(func, cst.Attribute):
        return False
    if func.attr.value == "setup_dataloaders":
        return True  # Fabric's; its receiver is rarely in view (a parameter of a launched function)
    if func.attr.value not in TRAINER_RUNS:
        return False
    receiver = func.value
    if isinstance(receiver, cst.Name):
        receiver = flow(index).reaching_value(receiver)
    built = index.resolve(receiver.func, receiver) if isinstance(receiver, cst.Call) else None
    if built is not None and built.endswith(".from_argparse_args"):  # Lightning 1.x's classmethod
        built = canonical(built[: -len(".from_argparse_args")])
    return built == LIGHTNING_TRAINER


def _returns(index, function: cst.FunctionDef, value: cst.Call) -> bool:
    """Whether `function` returns what `value` builds: `return DataLoader(...)`, or a variable bound to it."""
    parent = next(index.ancestors(value), None)
    if isinstance(parent, cst.Return):
        return True
    if not (isinstance(parent, cst.Assign) and len(parent.targets) == 1 and isinstance(parent.targets[0].target, cst.Name)):
        return False
    name, data = parent.targets[0].target.value, flow(index)
    return any(
        isinstance(r.value, cst.Name) and r.value.value == name and index.enclosing(r, cst.FunctionDef) is function
        and data.reaching_value(r.value) is value
        for r in index.nodes_of(cst.Return)
    )


def _workers_seeded_before(context, module, handoff: cst.Call) -> bool:
    """A seed that turns worker seeding on before `handoff`: earlier in its function (or at the
    top level of its module), or earlier in a function that calls its function."""
    index = module.index
    function = index.enclosing(handoff, cst.FunctionDef)
    if _seeds_workers_in(index, function, handoff) or (function is not None and _seeds_workers_in(index, None, None)):
        return True
    if function is None:
        return False
    path = ".".join(n.name.value for n in reversed([function, *_outer_defs(index, function)]))
    for other in context.project.modules.values():
        names = [f"{module.name}.{path}", *(["@." + path] if other is module else [])]
        for site in other.index.calls_to(*names):
            if _seeds_workers_in(other.index, other.index.enclosing(site.node, cst.FunctionDef), site.node):
                return True
    return False


def _seeds_workers_in(index, function, before) -> bool:
    """`seed_everything(..., workers=True)`, or Fabric's method without `workers=`, in `function`
    (None: the module's top level) and before the node `before` (None: anywhere there)."""
    positions = index.positions()
    for site in index.calls:
        func = site.node.func
        name = site.qualname or (func.attr.value if isinstance(func, cst.Attribute) else "")
        if name.rsplit(".", 1)[-1] != "seed_everything" or index.enclosing(site.node, cst.FunctionDef) is not function:
            continue
        if before is not None and positions[id(site.node)] > positions[id(before)]:
            continue
        workers = arg(site.node, 1, "workers")
        if workers is None:
            if site.qualname is None or site.qualname.endswith("Fabric.seed_everything"):
                return True
        elif isinstance(workers, cst.Name) and workers.value == "True":
            return True
    return False


def _may_be_positive(data, expr: cst.BaseExpression, depth: int = 0) -> bool:
    if depth > 4:
        return True
    value = int_value(expr)
    if value is not None:
        return value > 0
    if isinstance(expr, cst.IfExp):
        return _may_be_positive(data, expr.body, depth + 1) or _may_be_positive(data, expr.orelse, depth + 1)
    if isinstance(expr, cst.Name):
        if is_none(expr) or expr.value == "False":
            return False
        bound = data.reaching_value(expr)
        if bound is not None and data.parameter(expr) is None:
            return _may_be_positive(data, bound, depth + 1)
    return True


SEED_WORKER = """def seed_worker(worker_id):
    # From the PyTorch reproducibility notes: derive each worker's seeds from torch's.
    worker_seed = {torch}.initial_seed() % 2**32
    {np}.random.seed(worker_seed)
    {random}.seed(worker_seed)
"""


def worker_seed_fix(module, call, seed: int):
    """`generator=` a seeded generator and `worker_init_fn=seed_worker`, adding the helper once."""
    if not isinstance(call, cst.Call):
        return None
    edits = []
    names = {}
    for qualname, key in (("torch", "torch"), ("numpy", "np"), ("random", "random")):
        names[key], imports = module_name_for(module, qualname)
        edits.extend(imports)
    if "seed_worker" not in module.index.functions:
        edits.append(insert_after_imports(module, "\n\n" + SEED_WORKER.format(**names).rstrip("\n")))
    generator = f"{names['torch']}.Generator().manual_seed({seed})"
    edits.append(add_keywords(module, call, [("generator", generator), ("worker_init_fn", "seed_worker")]))
    return make_fix("unsafe", "Seed the workers and the shuffle from a seeded generator", edits)


# Samplers whose order never comes from torch's global generator.
OWN_ORDER_SAMPLERS = frozenset(
    {"torch.utils.data.SequentialSampler", "torch.utils.data.sampler.SequentialSampler",
     "torch.utils.data.DistributedSampler", "torch.utils.data.distributed.DistributedSampler"}
)  # fmt: skip
BATCH_SAMPLERS = frozenset({"torch.utils.data.BatchSampler", "torch.utils.data.sampler.BatchSampler"})


def _given_generator(call: cst.Call) -> bool:
    generator = arg(call, None, "generator")
    return generator is not None and not is_none(generator)


def _sampler_may_draw(index, value: cst.BaseExpression, at: cst.CSTNode, depth: int = 0) -> bool:
    """Whether a `sampler=` / `batch_sampler=` value may draw its order from the global generator."""
    if isinstance(value, cst.Name) and depth < 3:
        assigned = index.assigned_value(value.value, at)
        return assigned is None or assigned is value or _sampler_may_draw(index, assigned, at, depth + 1)
    if not isinstance(value, cst.Call) or not isinstance(value.func, (cst.Name, cst.Attribute)):
        return True
    q = index.resolve(value.func, value)
    if q in OWN_ORDER_SAMPLERS:
        return False
    if q and q.startswith("torch.utils.data.") and _given_generator(value):
        return False  # `RandomSampler(ds, generator=g)` shuffles with g
    if q in BATCH_SAMPLERS:
        inner = arg(value, 0, "sampler")
        return inner is None or depth >= 3 or _sampler_may_draw(index, inner, at, depth + 1)
    return True
