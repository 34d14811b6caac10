"""Which classes an expression stands for.

- `callee_classes(data, func, at)`: the qualified names a called expression may be, through a
  variable bound to a class (`loader = DataLoader if a else MyLoader`).
- `derives_from(project, module, qualname, targets)`: whether a class is one of `targets` or a
  project class deriving from one through project base classes (dataset bases below).
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING

import libcst as cst

if TYPE_CHECKING:
    from torchrepro_lint.analysis.dataflow.core import Flow


def callee_classes(data: Flow, func: cst.BaseExpression, at: cst.CSTNode, depth: int = 0) -> set[str]:
    """Qualified names a called expression may be: itself, or through a variable bound to
    a name or to `A if c else B`."""
    if depth > 4:
        return set()
    if isinstance(func, cst.IfExp):
        return callee_classes(data, func.body, at, depth + 1) | callee_classes(data, func.orelse, at, depth + 1)
    resolved = data.index.resolve(func, at) if isinstance(func, (cst.Name, cst.Attribute)) else None
    if resolved is not None:
        return {resolved}
    if isinstance(func, cst.Name) and func.value in _bound_to_references(data):
        value = data.reaching_value(func)
        if value is not None:
            return callee_classes(data, value, value, depth + 1)
    return set()


_REFERENCES = (cst.Name, cst.Attribute, cst.IfExp)


def _bound_to_references(data: Flow) -> frozenset[str]:
    """The names that a plain `name = value`, `name: T = value` or `(name := value)` of the
    module binds to a name, an attribute or a conditional expression. `reaching_value` gives
    only such right-hand sides, and only those can stand for a class: for any other name the
    dataflow is not asked (TRP301 asks about every call of a module; `model(x)`, `loss_fn(...)`
    cost about 2 ms of an edit of timm's train.py)."""
    index = data.index
    found = index.derived.get("names bound to references")
    if found is None:
        names = set()
        for node in index.nodes_of(cst.Assign):
            if isinstance(node.value, _REFERENCES):
                names.update(t.target.value for t in node.targets if isinstance(t.target, cst.Name))
        for kind in (cst.AnnAssign, cst.NamedExpr):
            for node in index.nodes_of(kind):
                if isinstance(node.value, _REFERENCES) and isinstance(node.target, cst.Name):
                    names.add(node.target.value)
        found = index.derived["names bound to references"] = frozenset(names)
    return found


# Dataset base classes: a project class deriving from one is a dataset.
DATASET_BASES = frozenset(
    {
        "torch.utils.data.Dataset",
        "torch.utils.data.IterableDataset",
        "torch.utils.data.TensorDataset",
        "torch_geometric.data.Dataset",
        "torch_geometric.data.InMemoryDataset",
    }
)
DATASET_PREFIXES = ("torchvision.datasets.",)

_DERIVES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_EXTERNAL_ROOTS = frozenset(
    "torch numpy random os sys builtins time math datetime json logging argparse typing collections "
    "itertools functools pathlib re shutil subprocess glob io abc dataclasses enum copy pickle sklearn "
    "torchvision torch_geometric transformers lightning pytorch_lightning timm PIL cv2 pandas scipy".split()
)


def derives_from(project, module, qualname: str | None, targets: frozenset[str], prefixes: tuple[str, ...] = ()):
    """Whether the class `qualname` (as `module` sees it) is one of `targets` (or starts with
    one of `prefixes`), directly (True) or as a project class deriving from one through
    project base classes (its Symbol). None otherwise. Cached per module."""
    if not qualname:
        return None
    if qualname in targets or (prefixes and qualname.startswith(prefixes)):
        return True
    if qualname.split(".")[0] in _EXTERNAL_ROOTS:
        return None
    cache = _DERIVES.setdefault(module, {})
    key = (qualname, targets, prefixes)
    if key not in cache:
        cache[key] = None  # cycles answer None
        cache[key] = _derives(project, module, qualname, targets, prefixes, 0)
    return cache[key]


def _derives(project, module, qualname, targets, prefixes, depth):
    if depth > 8:
        return None
    symbol = project.resolve(qualname, module)
    if symbol is None or symbol.klass is None:
        return None
    for base in symbol.klass.bases:
        if base in targets or (prefixes and base.startswith(prefixes)):
            return symbol
        if base.split(".")[0] not in _EXTERNAL_ROOTS and _derives(project, symbol.module, base, targets, prefixes, depth + 1):
            return symbol
    return None
