"""A kept call of the previous language-server run, put on this run's module objects.

The edited module is a new object, and an edit shifts the node refs after it: inserting a line
in `main()` moves every call below it. A site in a module that changed is moved to the node of
the same statement in the new module (`ref_map`): the statements before the edit keep their
refs, those after it keep their content. A site in the edited region has no counterpart, and
the recording that points at it is dropped.
"""

from __future__ import annotations

from dataclasses import fields
from operator import attrgetter

from torchrepro_lint.project import ir
from torchrepro_lint.project.modules import ProjectModule, Symbol
from torchrepro_lint.project.reads import unrecorded
from torchrepro_lint.project.interpreter.recordings import Remapped


class Gone(Exception):
    """A module or node the recording points at has no counterpart in this run."""


class Moved(Remapped):
    """Sites, occurrences, states, facts and symbols on this run's modules (`modules`, by path).
    One for a run: what it moved (paths flow from one recording into the next) and the refs of
    each changed module (`ref_maps`, by (id(old), id(new))) serve every recording."""

    def __init__(self, modules: dict, before: dict | None = None) -> None:
        super().__init__()
        self.modules = modules
        self.ref_maps: dict[tuple[int, int], dict[int, int]] = {}
        self.before = before  # the last run's modules, by path (ProjectIndex.reusable)
        self._changed: set | None = None
        self._last_run: frozenset = frozenset()  # the last run's module objects
        self._replaced: frozenset | None = None  # those of them that this run has not (yet) taken again

    def none_changed(self, paths: frozenset) -> bool:
        """Whether each of these paths, where the last run had a module, has that same object
        now: a recording of the last run that points only at them is this run's as it is. (A
        module that is loaded later in the run counts as changed: moving costs only time.)"""
        return paths.isdisjoint(self._changed_paths())

    def _changed_paths(self) -> set:
        """The paths whose last-run module this run does not have (yet), found once a run."""
        if self._changed is None:
            before, now = self.before or {}, self.modules
            self._changed = {path for path, module in before.items() if now.get(path) is not module}
        return self._changed

    def modules_in(self, modules: frozenset) -> frozenset:
        """A set of the last run's modules, on this run's: only those that changed are looked
        up (set operations; a kept walk names about 30 modules, most never edited)."""
        if self.before is not None:
            if self._replaced is None:
                self._last_run = frozenset(self.before.values())
                self._replaced = frozenset(self.before[path] for path in self._changed_paths())
            if modules <= self._last_run:  # (else: moved one by one, whatever they are)
                hit = self._replaced & modules
                return modules if not hit else (modules - hit) | frozenset(map(self.module, hit))
        return frozenset(map(self.module, modules))

    def module(self, module: ProjectModule) -> ProjectModule:
        current = self.modules.get(module.path)
        if current is None:
            raise Gone
        return current

    def site(self, site):
        old, ref = site
        module = self.module(old)
        if module is old:
            return site
        new_ref = self.refs(old, module).get(ref)
        if new_ref is None:
            raise Gone
        return (module, new_ref)

    anchor = site

    def symbol(self, symbol: Symbol | None) -> Symbol | None:
        if symbol is None:
            return None
        module = self.module(symbol.module)
        return symbol if module is symbol.module else Symbol(module, symbol.path)

    def refs(self, old: ProjectModule, new: ProjectModule) -> dict[int, int]:
        key = (id(old), id(new))
        found = self.ref_maps.get(key)
        if found is None:
            found = self.ref_maps[key] = ref_map(old, new)
        return found


def ref_map(old: ProjectModule, new: ProjectModule) -> dict[int, int]:
    """Old ref -> new ref for the statements outside the edited region: the longest run of
    equal statements from the start (same refs) and from the end (same content, refs shifted).
    A ref that would map two ways is left out."""
    with unrecorded():  # (only where sites point: the program reads what it reads itself)
        before, after = _leaves(old.ir), _leaves(new.ir)
    prefix = 0
    limit = min(len(before), len(after))
    while prefix < limit and (before[prefix] is after[prefix] or before[prefix] == after[prefix]):
        prefix += 1
    suffix = 0
    while suffix < limit - prefix and _same_but_ref(before[-1 - suffix], after[-1 - suffix]):
        suffix += 1
    pairs = [(s.ref, s.ref) for s in before[:prefix]]
    pairs += [(a.ref, b.ref) for a, b in zip(before[len(before) - suffix:], after[len(after) - suffix:])]
    mapped: dict[int, int] = {}
    torn: set[int] = set()
    for a, b in pairs:
        if mapped.setdefault(a, b) != b:
            torn.add(a)
    for a in torn:
        del mapped[a]
    return mapped


# The leaves of the last IRs asked: an edit's new IR is the old one of the next edit.
_LEAVES_KEPT = 4
_leaves_memo: dict[int, tuple] = {}


def _leaves(module: ir.ModuleIR) -> list:
    """The statements that carry a ref (where an occurrence can be), in ref order."""
    found = _leaves_memo.get(id(module))
    if found is not None and found[0] is module:
        return found[1]
    out: list = []
    _add_leaves(module.top, out)
    for function in module.functions.values():
        _add_leaves(function.body, out)
    out.sort(key=_REF)
    if len(_leaves_memo) >= _LEAVES_KEPT:
        del _leaves_memo[next(iter(_leaves_memo))]
    _leaves_memo[id(module)] = (module, out)
    return out


_LEAF_TYPES = frozenset({ir.Effect, ir.Call, ir.ImportModule, ir.Spawn})  # (final classes: no subclasses)


def _add_leaves(statements, out: list) -> None:
    for statement in statements:
        kind = type(statement)
        if kind in _LEAF_TYPES:
            out.append(statement)
        elif kind is ir.Branch:
            _add_leaves(statement.then, out)
            _add_leaves(statement.orelse, out)
        elif kind is ir.Try:
            for block in ir.blocks_of(statement):
                _add_leaves(block, out)


_REF = attrgetter("ref")
# Per leaf class: its compared fields but `ref`, read at once (a shifted statement is equal but
# for its ref; building a copy with the other ref to compare was most of ref_map's time).
_OTHER_FIELDS = {
    kind: attrgetter(*[f.name for f in fields(kind) if f.compare and f.name != "ref"]) for kind in _LEAF_TYPES
}


def _same_but_ref(a, b) -> bool:
    kind = type(a)
    if kind is not type(b):
        return False
    other = _OTHER_FIELDS.get(kind)
    if other is None:
        return a == b
    return other(a) == other(b)
