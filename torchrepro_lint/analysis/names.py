"""Scopes and bindings: what a name means, resolved through imports and aliases.

Our own alias table instead of LibCST's ScopeProvider + QualifiedNameProvider, which cost about
4x the parse. A name resolves to a dotted qualified name (``torch.backends.cudnn``,
``numpy.random.seed``), to ``@.<path>`` for a definition in the same module (``@.set_seed``,
``@.Trainer.fit``), or to None when it is shadowed by something we cannot see through
(a parameter, a loop variable, the result of a call).
"""

from __future__ import annotations

import builtins
from dataclasses import dataclass, field

import libcst as cst

from torchrepro_lint.analysis.syntax import evaluated_string

LOCAL = "@."  # prefix of a qualified name defined in the module itself

# Spellings that reach the same object: canonicalised so rules list one name.
CANONICAL = {
    "torch.random.manual_seed": "torch.manual_seed",
    "torch.random.seed": "torch.seed",
    "torch.utils.data.dataloader.DataLoader": "torch.utils.data.DataLoader",
    "torch.utils.data.dataset.random_split": "torch.utils.data.random_split",
    "torch.utils.data.dataset.Dataset": "torch.utils.data.Dataset",
    "torch.utils.data.dataset.IterableDataset": "torch.utils.data.IterableDataset",
    "torch.utils.data.sampler.RandomSampler": "torch.utils.data.RandomSampler",
    "torch.utils.data.distributed.DistributedSampler": "torch.utils.data.DistributedSampler",
    "torch.nn.modules.module.Module": "torch.nn.Module",
    "torch.nn.parameter.Parameter": "torch.nn.Parameter",
    "pytorch_lightning.Trainer": "lightning.Trainer",
    "lightning.pytorch.Trainer": "lightning.Trainer",
    "pytorch_lightning.trainer.Trainer": "lightning.Trainer",
    "multiprocessing.context.SpawnContext": "multiprocessing.spawn_context",
}

_BUILTINS = frozenset(dir(builtins))


def canonical(qualname: str) -> str:
    if qualname.startswith("torch.multiprocessing."):
        # torch.multiprocessing re-exports the standard module (plus spawn and start_processes).
        rest = qualname[len("torch.multiprocessing.") :]
        if rest not in ("spawn", "start_processes"):
            qualname = "multiprocessing." + rest
    return CANONICAL.get(qualname, qualname)


def dotted(node: cst.BaseExpression) -> str | None:
    """`a.b.c` as text for a Name/Attribute chain, else None."""
    parts = []
    while isinstance(node, cst.Attribute):
        parts.append(node.attr.value)
        node = node.value
    if isinstance(node, cst.Name):
        parts.append(node.value)
        return ".".join(reversed(parts))
    return None


class _Shadowed:
    """A name bound to something we cannot see through."""


SHADOWED = _Shadowed()


@dataclass(eq=False)
class Scope:
    kind: str  # "module" | "function" | "class"
    parent: Scope | None
    qualpath: str  # dotted path of the defining function/class inside the module ("" for module)
    bindings: dict[str, object] = field(default_factory=dict)  # str | cst.BaseExpression | SHADOWED
    imported: set[str] = field(default_factory=set)  # names bound by an import statement

    def bind(self, name: str, value: object, *, is_import: bool = False) -> None:
        # `try: import tomllib / except ImportError: tomllib = None`: the import wins.
        if name in self.imported and not is_import:
            return
        if is_import:
            if name in self.imported:
                return  # the first import of a name wins (try/except import chains)
            self.imported.add(name)
        self.bindings[name] = value


class NameResolver:
    """Resolves Name/Attribute expressions to qualified names, given the scope they occur in."""

    def __init__(self, module_scope: Scope) -> None:
        self.module_scope = module_scope
        self._resolving: set[int] = set()

    def lookup(self, name: str, scope: Scope) -> str | None:
        current: Scope | None = scope
        first = True
        while current is not None:
            # Class bodies are not enclosing scopes for the functions defined in them.
            if current.kind != "class" or first:
                if name in current.bindings:
                    return self._value(current.bindings[name], current)
            first = False
            current = current.parent
        if name in _BUILTINS:
            return "builtins." + name
        return None

    def _value(self, value: object, scope: Scope) -> str | None:
        if isinstance(value, str):
            return value
        if isinstance(value, cst.BaseExpression):
            # An alias assigned from an expression (`npr = np.random`), resolved when first asked.
            key = id(value)
            if key in self._resolving:
                return None
            self._resolving.add(key)
            try:
                return alias_target(value, scope, self)
            finally:
                self._resolving.discard(key)
        return None

    def resolve(self, node: cst.BaseExpression, scope: Scope) -> str | None:
        """`T.backends.cudnn` -> "torch.backends.cudnn" when `import torch as T`."""
        parts = []
        while isinstance(node, cst.Attribute):
            parts.append(node.attr.value)
            node = node.value
        if not isinstance(node, cst.Name):
            return None
        base = self.lookup(node.value, scope)
        if base is None:
            return None
        parts.reverse()
        return canonical(".".join([base, *parts])) if parts else canonical(base)


def alias_target(value: cst.BaseExpression, scope: Scope, resolver: NameResolver) -> str | None:
    """What an assignment's right-hand side names, when it names a module, class or function."""
    if isinstance(value, (cst.Name, cst.Attribute)):
        return resolver.resolve(value, scope)
    if isinstance(value, cst.Call):
        func = resolver.resolve(value.func, scope)
        # ctx = mp.get_context("spawn"): processes made from ctx start fresh interpreters.
        if func in ("multiprocessing.get_context",) and value.args:
            arg = value.args[0].value
            if isinstance(arg, cst.SimpleString) and evaluated_string(arg) == "spawn":
                return "multiprocessing.spawn_context"
    return None
