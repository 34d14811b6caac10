from __future__ import annotations

import libcst as cst

from torchrepro_lint.analysis.dataflow.classes import DATASET_BASES, DATASET_PREFIXES, derives_from
from torchrepro_lint.analysis.dataflow.core import flow
from torchrepro_lint.analysis.syntax import arg, self_attribute, subtree
from torchrepro_lint.rules.base import Example, Rule, last_names

RNG_CONSTRUCTORS = {
    "numpy.random.default_rng": "np.random.default_rng",
    "numpy.random.RandomState": "np.random.RandomState",
    "numpy.random.Generator": "np.random.Generator",
    "random.Random": "random.Random",
    "torch.Generator": "torch.Generator",
}
TRANSFORM_PREFIXES = ("torchvision.transforms.", "albumentations.")
DRAWING_METHODS = ("__getitem__", "__getitems__", "__iter__", "__call__")
WORKER_INFO = "torch.utils.data.get_worker_info"
RESEEDING_METHODS = frozenset({"seed", "manual_seed", "set_state", "setstate", "__setstate__"})
COMPOSERS = frozenset({"Compose", "RandomApply", "RandomChoice", "RandomOrder", "OneOf", "SomeOf"})
TRANSFORM_KEYWORDS = frozenset({"transform", "transforms", "target_transform", "pre_transform", "augment", "augmentation"})
# Loaders whose first argument (or `dataset=`) is the dataset each worker gets a copy of.
LOADERS = ("torch.utils.data.DataLoader", "torchdata.stateful_dataloader.StatefulDataLoader")


class DatasetHeldRng(Rule):
    code = "TRP303"
    name = "dataset-held-rng"
    summary = "A Dataset or transform keeps an RNG object on `self` and draws from it in worker processes."
    why = (
        "DataLoader workers each receive a copy of the dataset, and with it an identical copy of "
        "any generator object stored on it. PyTorch reseeds torch, `random` and NumPy's global "
        "generators in every worker, but not your objects: all workers produce the same random "
        "stream (duplicated crops and masks across a batch), and since workers restart from the "
        "pickled copy every epoch, the same stream repeats every epoch."
    )
    fix = (
        "Create the generator lazily, once per worker, from the worker's seed "
        "(`torch.utils.data.get_worker_info().seed`, as in the example; in the main process, a fixed "
        "seed or `torch.initial_seed()`), or reseed it from a "
        "`worker_init_fn` that calls `get_worker_info()`; or draw from torch's global generator, "
        "which the DataLoader seeds per worker. The right seed depends on the design."
    )
    not_reported = (
        "A generator created lazily or reseeded outside `__init__`: assigned, or reseeded with "
        "`.seed()`, `.manual_seed()`, `.set_state()` (or its `.state` / `.bit_generator` "
        "replaced), in another method: a per-worker re-creation, a per-epoch reseed hook, a "
        "method a `worker_init_fn` calls on the dataset.",
        "A generator that a function calling `get_worker_info()` replaces or reseeds on the "
        "worker's dataset: `info.dataset.rng = ...`, `ds = info.dataset; ds.rng.seed(s)`.",
        "A generator drawn from only in `__init__` (the main process), or only compared "
        "(`if self.rng is None`).",
        "A map-style dataset that draws only while preparing itself once (`if not self._ready: "
        "self._prepare()`, or `if self.order is None: self.order = ...`, the method or block "
        "setting the flag): each worker's copy prepares the same whole dataset, and item `i` is "
        "the same in every worker, as in one process. An `IterableDataset` is still reported.",
        "A generator received as a parameter (`self.rng = rng`): where it comes from is not followed.",
        "The same generator in a `Sampler`: samplers run in the main process.",
    )
    where_reported = (
        "At the `self.<rng> = ...` assignment in the class's own `__init__`, for "
        "`np.random.default_rng`, `np.random.RandomState`, `np.random.Generator`, "
        "`random.Random`, `torch.Generator` (also with `.manual_seed(s)` chained), also through "
        "a local name (`rng = ...; self.rng = rng`), as one alternative of `a if c else b` or "
        "`rng or default_rng(0)`, and in a method only `__init__` calls (`self._build()`, "
        "transitively; a method called from anywhere else may be a reseed).",
        "Datasets: project classes deriving from `Dataset`, `IterableDataset` or `TensorDataset`, "
        "a torchvision dataset, or PyTorch Geometric's `Dataset` / `InMemoryDataset`, and any "
        "class with `__getitem__` / `__iter__` whose instance the project passes to a "
        "`DataLoader` (directly or through a name).",
        "Transforms: classes with `__call__` that derive from a torchvision or albumentations "
        "transform, or that the project passes to `Compose([...])` (or `RandomApply`, "
        "`RandomChoice`, `RandomOrder`, `OneOf`, `SomeOf`), as `transform=` (or `transforms=`, "
        "`target_transform=`, `pre_transform=`, `augment=`, `augmentation=`), or assigns to "
        "`self.transform` and the like.",
        "Draws: uses of the attribute in `__getitem__`, `__getitems__`, `__iter__` or `__call__`, "
        "or in methods they call on `self`, transitively.",
    )
    decisions = (
        "Only a reseed that reaches the object itself counts. Still reported: a `worker_init_fn` "
        "that reseeds only the global `random` / `np.random` (the reproducibility notes' "
        "`seed_worker`), and a dataset that calls `get_worker_info()` only to shard its data: "
        "every worker's copy of the object still starts in the same state.",
        "Not reported: a dataset drawing from NumPy's global generator under a `worker_init_fn` "
        "that seeds only torch. Since PyTorch 1.9 each worker seeds `random`, torch and "
        "`np.random` itself, per worker, before `worker_init_fn` runs "
        "(`torch/utils/data/_utils/worker.py`, `_worker_loop`).",
    )
    reference = (
        ("Randomness in multi-process data loading", "https://pytorch.org/docs/stable/data.html#randomness-in-multi-process-data-loading"),
        ("torch.utils.data.get_worker_info", "https://pytorch.org/docs/stable/data.html#torch.utils.data.get_worker_info"),
        ("Reproducibility: DataLoader", "https://pytorch.org/docs/stable/notes/randomness.html#dataloader"),
    )
    # A candidate is `self.x = <one of RNG_CONSTRUCTORS>(...)` in the class's own __init__,
    # in this file.
    triggers = last_names(RNG_CONSTRUCTORS)
    hazards = (
        Example(
            '''import numpy as np
from torch.utils.data import Dataset

class NoisyImages(Dataset):
    def __init__(self, images, seed=0):
        self.images = images
        self.rng = np.random.default_rng(seed)  # <-- TRP303

    def __len__(self):
        return len(self.images)

    def __getitem__(self, i):
        return self.images[i] + self.rng.normal(size=self.images[i].shape)
''',
            "A seeded NumPy generator on a map-style dataset",
            fixed='''import numpy as np
import torch
from torch.utils.data import Dataset

class NoisyImages(Dataset):
    def __init__(self, images, seed=0):
        self.images = images
        self.seed = seed
        self.rng = None

    def __len__(self):
        return len(self.images)

    def __getitem__(self, i):
        if self.rng is None:
            info = torch.utils.data.get_worker_info()
            seed = info.seed if info is not None else self.seed
            self.rng = np.random.default_rng(seed % 2**32)
        return self.images[i] + self.rng.normal(size=self.images[i].shape)
''',
        ),
        Example(
            '''import torch
from torch.utils.data import IterableDataset

class Stream(IterableDataset):
    def __init__(self, n):
        self.n = n
        self.gen = torch.Generator().manual_seed(0)  # <-- TRP303

    def __iter__(self):
        for i in torch.randperm(self.n, generator=self.gen):
            yield int(i)
''',
            "A torch.Generator drawn from in __iter__",
        ),
        Example(
            '''import random
from torchvision import transforms

class RandomMask:
    def __init__(self, p):
        self.p = p
        self.random = random.Random(1234)  # <-- TRP303

    def __call__(self, img):
        return self._apply(img) if self.random.random() < self.p else img

    def _apply(self, img):
        return img * 0

pipeline = transforms.Compose([transforms.ToTensor(), RandomMask(0.5)])
''',
            "A transform class used in Compose",
        ),
        Example(
            {
                "data.py": '''import random
from torch.utils.data import Dataset

class Dropped(Dataset):
    def __init__(self, items):
        self.items = items
        self.random = random.Random(0)  # <-- TRP303

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        return [t for t in self.items[i] if self.random.random() > 0.1]
''',
                "train.py": '''import random
import numpy as np
import torch
from data import Dropped

def seed_worker(worker_id):
    seed = torch.initial_seed() % 2**32
    np.random.seed(seed)
    random.seed(seed)

loader = torch.utils.data.DataLoader(Dropped([]), num_workers=4, worker_init_fn=seed_worker)
''',
            },
            "A worker_init_fn that reseeds only the global generators",
        ),
    )
    traps = (
        Example(
            '''import numpy as np
import torch
from torch.utils.data import Dataset

class Crops(Dataset):
    def __init__(self, n):
        self.n = n
        self.rng = None

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if self.rng is None:
            info = torch.utils.data.get_worker_info()
            seed = info.seed if info is not None else 0
            self.rng = np.random.default_rng(seed % 2**32)
        return self.rng.integers(0, 100)
''',
            "The lazy per-worker pattern",
        ),
        Example(
            {
                "data.py": '''import numpy as np
from torch.utils.data import Dataset

class Jitter(Dataset):
    def __init__(self, n):
        self.n = n
        self.rng = np.random.RandomState(0)

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return self.rng.rand()
''',
                "train.py": '''import numpy as np
import torch
from data import Jitter

def reseed(worker_id):
    info = torch.utils.data.get_worker_info()
    info.dataset.rng = np.random.RandomState(info.seed % 2**32)

if __name__ == "__main__":
    loader = torch.utils.data.DataLoader(Jitter(10), num_workers=2, worker_init_fn=reseed)
''',
            },
            "A worker_init_fn that reseeds the held generator",
        ),
        Example(
            '''import torch
from torch.utils.data import Sampler

class Shuffled(Sampler):
    def __init__(self, n, seed):
        self.n = n
        self.g = torch.Generator().manual_seed(seed)

    def __iter__(self):
        return iter(torch.randperm(self.n, generator=self.g).tolist())
''',
            "A sampler runs in the main process",
        ),
        Example(
            '''import numpy as np
from torch.utils.data import Dataset

class Fixed(Dataset):
    def __init__(self, n, seed):
        rng = np.random.default_rng(seed)
        self.offsets = rng.normal(size=n)
        self.rng = np.random.default_rng(seed)

    def __len__(self):
        return len(self.offsets)

    def __getitem__(self, i):
        return self.offsets[i]
''',
            "Drawn only in __init__ (the main process), never per item",
        ),
    )

    def check_module(self, module, context):
        index = module.index
        data = flow(index)
        for path, klass in index.classes.items():
            methods = data.methods(klass)
            init = methods.get("__init__")
            if init is None or not any(m in methods for m in DRAWING_METHODS):
                continue
            setup = self._setup_methods(context, module, data, klass, methods)
            held = self._held_generators(index, data, klass, setup)
            if not held:
                continue
            role = self._role(context, module, path, klass, methods)
            if role is None:
                continue
            drawing = self._drawing_methods(data, klass, methods)
            for attr, (statement, ctor) in held.items():
                if not self._drawn(data, klass, attr, drawing, methods):
                    continue
                if self._reseeded(data, klass, attr, setup) or self._reseeded_by_worker_init(context, attr):
                    continue
                where = " / ".join(sorted(m.name.value for m in drawing if m.name.value in DRAWING_METHODS))
                yield context.report(
                    self, module, statement,
                    f"{role} `{klass.name.value}` keeps `self.{attr} = {ctor}(...)` and draws from it in "
                    f"`{where}`: every DataLoader worker gets an identical copy, so workers repeat each "
                    f"other's random stream, and it restarts every epoch; create it lazily per worker from "
                    f"`torch.utils.data.get_worker_info().seed`, or reseed it in a `worker_init_fn`",
                )

    # -- which classes -------------------------------------------------------------------------
    def _role(self, context, module, path: str, klass: cst.ClassDef, methods) -> str | None:
        project = context.project
        if derives_from(project, module, "@." + path, DATASET_BASES, DATASET_PREFIXES):
            return "dataset"
        if "__call__" not in methods:
            return "dataset" if self._passed_to_loader(context, module, path) else None
        if derives_from(project, module, "@." + path, frozenset(), TRANSFORM_PREFIXES):
            return "transform"
        if self._used_as_transform(context, module, path):
            return "transform"
        return "dataset" if self._passed_to_loader(context, module, path) else None

    def _passed_to_loader(self, context, module, path: str) -> bool:
        """An instance of the class is the dataset of a `DataLoader(...)` in the project
        (directly, or through a name bound to it): a dataset without a `Dataset` base."""
        project = context.project
        name = path.rsplit(".", 1)[-1]
        for other in project.modules_mentioning(name):
            index = other.index
            sites = index.calls_to(*LOADERS)
            if not sites:
                continue
            data = flow(index)
            for site in sites:
                dataset = arg(site.node, 0, "dataset")
                if isinstance(dataset, cst.Name):
                    dataset = data.reaching_value(dataset)
                if not isinstance(dataset, cst.Call) or not isinstance(dataset.func, (cst.Name, cst.Attribute)):
                    continue
                qualname = index.resolve(dataset.func, dataset)
                if not qualname or not qualname.endswith(name):
                    continue
                symbol = project.resolve(qualname, other)
                if symbol is not None and symbol.module is module and symbol.path == path:
                    return True
        return False

    def _used_as_transform(self, context, module, path: str) -> bool:
        project = context.project
        for other in project.modules.values():
            index = other.index
            for site in index.calls:
                if not site.qualname or not (site.qualname.endswith(path.rsplit(".", 1)[-1])):
                    continue
                symbol = project.resolve(site.qualname, other)
                if symbol is None or symbol.module is not module or symbol.path != path:
                    continue
                if _in_transform_position(index, site.node):
                    return True
        return False

    # -- generators held on self -------------------------------------------------------------------
    def _setup_methods(self, context, module, data, klass, methods) -> list[cst.FunctionDef]:
        """`__init__` and the methods only it calls (`self._build()`, transitively): what runs
        once, in the main process, before any worker copies the object. A method called from
        anywhere else (a drawing method, another class, another module) is not one of them."""
        setup = [methods["__init__"]]
        names = {"__init__"}
        changed = True
        while changed:
            changed = False
            for name, method in methods.items():
                if name in names or name in DRAWING_METHODS:
                    continue
                calls = data.self_attr_uses(klass, name)
                if not calls or not all(any(data.inside(c, m) for m in setup) for c in calls):
                    continue
                if len(data.attribute_names.get(name, ())) != len(calls):
                    continue  # `other.name` somewhere in this module
                if any(m is not module for m in context.project.modules_mentioning(name)):
                    continue
                setup.append(method)
                names.add(name)
                changed = True
        return setup

    def _held_generators(self, index, data, klass, setup) -> dict[str, tuple[cst.CSTNode, str]]:
        held: dict[str, tuple[cst.CSTNode, str]] = {}
        for method in setup:
            for node in subtree(method.body, skip=(cst.FunctionDef, cst.ClassDef, cst.Lambda)):
                if not isinstance(node, cst.Assign) or len(node.targets) != 1:
                    continue
                attr = self_attribute(node.targets[0].target)
                if attr is None or attr in held:
                    continue
                ctor = _rng_constructor(index, data, node.value)
                if ctor is not None:
                    held[attr] = (node, ctor)
        return held

    def _drawing_methods(self, data, klass, methods) -> list[cst.FunctionDef]:
        """__getitem__/__iter__/__call__ and the methods they call on self, transitively."""
        seen: dict[str, cst.FunctionDef] = {}
        queue = [m for m in DRAWING_METHODS if m in methods]
        while queue:
            name = queue.pop()
            if name in seen or name not in methods or name == "__init__":
                continue
            seen[name] = methods[name]
            for node in subtree(methods[name].body):
                if isinstance(node, cst.Call):
                    attr = self_attribute(node.func)
                    if attr is not None and attr in methods:
                        queue.append(attr)
        return list(seen.values())

    def _drawn(self, data, klass, attr: str, drawing, methods) -> bool:
        for use in data.self_attr_uses(klass, attr):
            if not any(data.inside(use, method) for method in drawing):
                continue
            parent = data.parents.get(use)
            if isinstance(parent, cst.Comparison):
                continue  # `if self.rng is None`
            if "__iter__" not in methods and self._prepared_once(data, klass, use, drawing):
                continue
            return True
        return False

    def _prepared_once(self, data, klass, use, drawing) -> bool:
        """A map-style dataset draws only while preparing itself once (`if not self._ready:
        self._prepare()` with `_prepare` setting the flag): every worker's copy prepares the same
        whole dataset, as one process would, and `__getitem__(i)` returns the same item in each."""
        method = data.index.enclosing(use, cst.FunctionDef)
        if method is None:
            return False
        if _under_once_guard(data, klass, use, method):
            return True
        if method.name.value in DRAWING_METHODS:
            return False
        calls = [c for c in data.self_attr_uses(klass, method.name.value) if any(data.inside(c, m) for m in drawing)]
        return bool(calls) and all(_under_once_guard(data, klass, c, method) for c in calls)

    def _reseeded(self, data, klass, attr: str, setup) -> bool:
        """Assigned or reseeded outside __init__ (and the methods only it calls): a lazy
        per-worker creation or a reseed hook."""
        for store in data.self_attr_stores(klass, attr):
            if not any(data.inside(store, m) for m in setup):
                return True
        for use in data.self_attr_uses(klass, attr):
            parent = data.parents.get(use)
            if isinstance(parent, cst.Attribute) and parent.attr.value in RESEEDING_METHODS and not any(
                data.inside(use, m) for m in setup
            ):
                return True
            if isinstance(parent, cst.Attribute) and parent.attr.value in ("bit_generator", "state") and data._is_store(parent):
                return True
        return False

    def _reseeded_by_worker_init(self, context, attr: str) -> bool:
        """A function anywhere in the project that calls get_worker_info() and replaces or reseeds
        `<worker info>.dataset.<attr>` (`info.dataset.rng = ...`, `ds = info.dataset;
        ds.rng.seed(s)`). Reseeding the global `random` / `np.random` there does not reach it."""
        for other in context.project.modules.values():
            index = other.index
            sites = index.calls_to(WORKER_INFO)
            if not sites:
                continue
            data = flow(index)
            functions = {id(data.owner(site.node)) for site in sites}
            for node in data.attribute_names.get(attr, ()):
                if id(data.owner(node)) not in functions or not isinstance(node, cst.Attribute):
                    continue
                if _replaced_or_reseeded(data, node) and _from_worker_dataset(data, node.value):
                    return True
        return False


def _under_once_guard(data, klass, node, method) -> bool:
    """`node` runs under `if not self.x:` / `if self.x is None:` where that block or `method`
    sets `self.x`: once per object."""
    for ancestor in data.index.ancestors(node):
        if isinstance(ancestor, (cst.FunctionDef, cst.ClassDef)):
            return False
        if not isinstance(ancestor, cst.If) or not data.inside(node, ancestor.body):
            continue
        test = ancestor.test
        if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
            flag = self_attribute(test.expression)
        elif isinstance(test, cst.Comparison) and len(test.comparisons) == 1 and isinstance(test.comparisons[0].operator, cst.Is):
            comparator = test.comparisons[0].comparator
            flag = self_attribute(test.left) if isinstance(comparator, cst.Name) and comparator.value == "None" else None
        else:
            flag = None
        if flag is not None and any(
            data.inside(store, ancestor.body) or data.inside(store, method) for store in data.self_attr_stores(klass, flag)
        ):
            return True
    return False


def _replaced_or_reseeded(data, node: cst.Attribute) -> bool:
    """`x.rng = ...`, `x.rng.seed(...)` / `.manual_seed(...)` / `.set_state(...)`, `x.rng.state = ...`"""
    if data._is_store(node):
        return True
    parent = data.parents.get(node)
    if isinstance(parent, cst.Attribute) and parent.value is node:
        if parent.attr.value in RESEEDING_METHODS:
            return isinstance(data.parents.get(parent), cst.Call)
        return parent.attr.value in ("bit_generator", "state") and data._is_store(parent)
    return False


def _from_worker_dataset(data, expr: cst.BaseExpression, depth: int = 0) -> bool:
    """Whether `expr` is the worker's dataset copy (or an object inside it): `info.dataset`,
    `info.dataset.base`, or a name assigned from one of them."""
    if depth > 6:
        return False
    if isinstance(expr, cst.Attribute):
        return expr.attr.value == "dataset" or _from_worker_dataset(data, expr.value, depth + 1)
    if isinstance(expr, cst.Name):
        value = data.reaching_value(expr)
        return value is not None and _from_worker_dataset(data, value, depth + 1)
    return False


def _rng_constructor(index, data, value: cst.BaseExpression, depth: int = 0) -> str | None:
    """`np.random.default_rng(...)`, `torch.Generator().manual_seed(s)`, ... -> display name;
    also through a local name (`rng = ...; self.rng = rng`) and as one alternative of `x if c
    else y` / `rng or default_rng(0)`: the object held whenever that alternative is taken."""
    if depth > 4:
        return None
    while isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value == "manual_seed":
        value = value.func.value
    if isinstance(value, cst.Call):
        qualname = index.resolve(value.func, value) if isinstance(value.func, (cst.Name, cst.Attribute)) else None
        return RNG_CONSTRUCTORS.get(qualname or "")
    if isinstance(value, cst.IfExp):
        return _rng_constructor(index, data, value.body, depth + 1) or _rng_constructor(index, data, value.orelse, depth + 1)
    if isinstance(value, cst.BooleanOperation) and isinstance(value.operator, cst.Or):
        return _rng_constructor(index, data, value.right, depth + 1)
    if isinstance(value, cst.Name):
        bound = data.reaching_value(value)
        return _rng_constructor(index, data, bound, depth + 1) if bound is not None else None
    return None


def _in_transform_position(index, call: cst.Call) -> bool:
    """Inside a `Compose([...])`-like call, or passed as `transform=`."""
    for ancestor in index.ancestors(call):
        if isinstance(ancestor, cst.Arg) and ancestor.keyword is not None and ancestor.keyword.value in TRANSFORM_KEYWORDS:
            return True
        if isinstance(ancestor, cst.Call):
            if ancestor is call:
                continue
            qualname = index.resolve(ancestor.func, ancestor) if isinstance(ancestor.func, (cst.Name, cst.Attribute)) else None
            return (qualname or "").rsplit(".", 1)[-1] in COMPOSERS
        if isinstance(ancestor, (cst.BaseSmallStatement, cst.BaseCompoundStatement)):
            break
    parent = index.parents.get(call)
    if isinstance(parent, cst.Assign) and any(
        self_attribute(t.target) in TRANSFORM_KEYWORDS for t in parent.targets
    ):
        return True
    return False
