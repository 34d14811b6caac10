"""What ModuleIndex's walk recorded of each statement, taken again for an edited text.

The language server indexes an edited buffer again on every edit. After an incremental reparse
(parsing/reparse.py) every statement the edit did not touch is the same node object as in the
previous text's tree, and what the walk makes of a statement depends only on its own subtree and
on the scope it is read in: the parents of its nodes, its calls, the bindings it makes in that
scope, the scopes it opens, the functions and classes it defines under that scope's path, its
imports. So the walk records, for every statement of a block, where its part of each table
starts and ends (`Walk`), and the next walk takes a statement it meets again from that record
instead of walking it (`Walk.take`; with the statements recorded right after it, as one run),
in the same place of each table. The statement's own parent is the new one; the scopes it opens
are copies, so the previous index stays as it was. `edit_nodes` then tells what the edit
changed (function_reuse.py lowers only that).
"""

from __future__ import annotations

import operator
from operator import add, sub

from torchrepro_lint.analysis.names import Scope

END = object()  # marks, on the walk's stack, where a recorded statement's subtree ends


class StatementRecord:
    """Where one statement's part of each table starts and ends (`Walk.lengths` order), and its
    nodes by class (made when it is first taken, then handed on: the same nodes next time)."""

    __slots__ = ("node", "scope", "start", "end", "by_type")

    def __init__(self, node, scope: Scope, start: tuple, end: tuple | None = None, by_type: dict | None = None) -> None:
        self.node, self.scope, self.start, self.end, self.by_type = node, scope, start, end, by_type


class Walk:
    """One walk's record. Tables: the index's parents, calls, scope_of and imports, and the
    walk's own log of bindings, definitions and statement records, all in walk order (and the
    index's functions and classes, for function_reuse.py)."""

    def __init__(self, package: str | None) -> None:
        self.package = package
        self.binds: list[tuple] = []  # (scope, name, value, is_import)
        self.definitions: list[tuple] = []  # (is a class, path, node): every setdefault tried
        self.records: list[StatementRecord] = []  # in the order the statements start
        # The walked index's tables (finish); not the index itself, which holds the walk: a
        # cycle would keep every edit's tree alive until a garbage collection.
        self.module = self.parents = self.calls = self.scope_of = self.imports = self.functions = self.classes = None
        self.taken = 0  # statements this walk took from the previous one (counted for tests)
        self.before: Walk | None = None  # the walk it took them from (until the edit is looked at)
        self.runs: list[tuple[int, int, int]] = []  # (start, end in before's parents, start in this one's)
        # The parents table as two lists in its order, kept as the walk fills it: a statement's
        # part is then a slice of each, where listing a finished table's items cost ~2 ms an edit.
        self.keys: list = []
        self.values: list = []
        self._scopes = self._by_node = None  # made when taken from (open)

    def lengths(self, index) -> tuple:
        return (
            len(index.parents), len(index.calls), len(self.binds), len(index.scope_of),
            len(self.definitions), len(index.imports), len(self.records),
        )

    def start(self, node, scope: Scope, index) -> StatementRecord:
        record = StatementRecord(node, scope, self.lengths(index))
        self.records.append(record)
        return record

    def finish(self, index) -> None:
        self.module, self.parents, self.calls, self.scope_of = index.module, index.parents, index.calls, index.scope_of
        self.imports, self.functions, self.classes = index.imports, index.functions, index.classes

    # -- taking statements again ------------------------------------------------------------
    def open(self) -> None:
        """Ready to be taken from (once per walk that takes from it)."""
        self.before = None  # (the walk this one took from is of no use now: no chain of trees)
        if self._by_node is None:
            self._scopes = list(self.scope_of.items())
            self._by_node = {id(record.node): record for record in self.records if record.end is not None}

    def take(self, node, parent, scope: Scope, index, walk: Walk | None, pending: list) -> bool:
        """Put `node`'s recorded part of every table into `index` (and its records into `walk`),
        where it was recorded under a scope of the same kind and path; False where it was not.
        The siblings after it on the walk's stack (`pending`) that were recorded right after it
        are taken with it, as one run."""
        first = self._by_node.get(id(node))
        if first is None or first.node is not node:
            return False
        old_scope = first.scope
        if old_scope.kind != scope.kind or old_scope.qualpath != scope.qualpath:
            return False
        roots, last = [first], first
        while pending and pending[-1][1] is parent:
            following = self._by_node.get(id(pending[-1][0]))
            if following is None or following.node is not pending[-1][0] or following.start != last.end or following.scope is not old_scope:
                break
            pending.pop()
            roots.append(following)
            last = following
        start, end = first.start, last.end
        before = walk.lengths(index) if walk is not None else None
        parents = index.parents
        size = len(parents)
        if walk is not None:
            walk.before = self
            walk.runs.append((start[0], end[0], size))
        keys, values = self.keys[start[0] : end[0]], self.values[start[0] : end[0]]
        for root in roots:  # (each statement is the first key of its part)
            at = root.start[0] - start[0]
            if at >= len(keys) or keys[at] is not root.node:
                raise TakenTwice  # (a statement met twice in the previous tree: it holds no part)
            values[at] = parent  # (their own parent is the new one)
        parents.update(zip(keys, values))
        if len(parents) != size + len(keys):
            raise TakenTwice  # a node already in the tree: the index is walked again whole
        if walk is not None:
            walk.keys += keys
            walk.values += values
        by_type = index._by_type  # (a defaultdict)
        for root in roots:  # (a statement's nodes by class, extended whole: a tenth of the time per node)
            groups = root.by_type
            if groups is None:
                groups = root.by_type = _by_class(keys[root.start[0] - start[0] : root.end[0] - start[0]])
            for kind, nodes in groups.items():
                by_type[kind].extend(nodes)

        # The scopes they open, copied (their bindings all come from inside the statements).
        scopes = {old_scope: scope}
        origins = index.scope_origins
        _stands_for(origins, scope, old_scope)
        for owner, old in self._scopes[start[3] : end[3]]:
            new = Scope(old.kind, scopes[old.parent], old.qualpath, dict(old.bindings), set(old.imported))
            scopes[old] = new
            index.scope_of[owner] = new
            origins[id(new)] = (new, old)
        for old, name, value, is_import in self.binds[start[2] : end[2]]:
            new = scopes[old]
            if old is old_scope:  # (the others are in the copies already)
                new.bind(name, value, is_import=is_import)
            if walk is not None:
                walk.binds.append((new, name, value, is_import))
        for is_class, path, each in self.definitions[start[4] : end[4]]:
            (index.classes if is_class else index.functions).setdefault(path, each)
        index.imports.extend(
            type(old)(old.module, old.names, old.node, scopes[old.scope]) for old in self.imports[start[5] : end[5]]
        )
        first_call = len(index.calls)
        index.calls.extend(
            type(old)(old.node, old.qualname, scopes[old.scope], old.statement) for old in self.calls[start[1] : end[1]]
        )
        index.taken_calls.append((first_call, len(index.calls)))  # (their qualnames are checked at the end)
        if walk is not None:  # their records and those of the statements inside them, moved
            walk.definitions.extend(self.definitions[start[4] : end[4]])
            walk.taken += len(roots)
            shift = tuple(map(sub, before, start))
            walk.records.extend(
                StatementRecord(
                    old.node, scopes[old.scope], tuple(map(add, old.start, shift)), tuple(map(add, old.end, shift)), old.by_type
                )
                for old in self.records[start[6] : end[6]]
            )
        return True


def _by_class(nodes: list) -> dict:
    """The nodes by exact class, each list in their order."""
    groups: dict = {}
    for node in nodes:
        kind = type(node)
        found = groups.get(kind)
        if found is None:
            groups[kind] = [node]
        else:
            found.append(node)
    return groups


def _stands_for(origins: dict, scope: Scope, old: Scope) -> None:
    """Record that `scope` takes the place of the previous walk's `old` (None where statements
    of two different scopes were taken into it: no counterpart)."""
    entry = origins.get(id(scope))
    if entry is None or entry[0] is not scope:
        origins[id(scope)] = (scope, old)
    elif entry[1] is not old:
        origins[id(scope)] = (scope, None)


def edit_nodes(walk: Walk) -> tuple[list, list] | None:
    """What the edit changed, as nodes: those of `walk`'s tree that were not in the tree it took
    statements from, and those of that tree that are gone; None where it took none."""
    before = walk.before
    if before is None:
        return None
    new_parents, old_parents = walk.parents, before.parents
    new_keys = list(new_parents)
    added, gone = [], []
    position = 0
    for _, end, new_start in walk.runs:
        added.extend(node for node in new_keys[position:new_start] if node not in old_parents)
        position = new_start + (end - _)
    added.extend(node for node in new_keys[position:] if node not in old_parents)
    position = 0
    for start, end, _ in sorted(walk.runs):
        gone.extend(node for node in before.keys[position:start] if node not in new_parents)
        position = end
    gone.extend(node for node in before.keys[position:] if node not in new_parents)
    return added, gone


def _scope_shape(scope, names: dict) -> tuple:
    """A scope as comparable data: its kind, path, bindings (values by identity, or as text),
    the imported names and its parent's shape (scopes are named by the node that opens them)."""
    if scope is None:
        return None
    bindings = tuple((name, value if isinstance(value, str) else id(value)) for name, value in scope.bindings.items())
    return (names.get(id(scope), "module"), scope.kind, scope.qualpath, bindings, frozenset(scope.imported), names.get(id(scope.parent), "module" if scope.parent else None))


def index_shape(index) -> dict:
    """An index as comparable data (node identities, names, scope shapes): a taken walk must give
    the shape of a whole one (tests/pipeline/test_walk_reuse.py, benchmarks/reparse_fuzz.py --index)."""
    names = {id(scope): id(node) for node, scope in index.scope_of.items()}
    scope = lambda s: _scope_shape(s, names)
    return {
        "parents": [(id(node), id(parent)) for node, parent in index.parents.items()],
        "by_type": {kind: [id(node) for node in nodes] for kind, nodes in index._by_type.items() if nodes},
        "calls": [(id(site.node), site.qualname, id(site.statement), names.get(id(site.scope), "module")) for site in index.calls],
        "scopes": [(id(node), scope(s)) for node, s in index.scope_of.items()],
        "module": scope(index.scope),
        "functions": [(path, id(node)) for path, node in index.functions.items()],
        "classes": [(path, id(node)) for path, node in index.classes.items()],
        "imports": [(r.module, r.names, id(r.node), names.get(id(r.scope), "module")) for r in index.imports],
        # (a recorded walk's lists are its parents table: what the next walk takes slices of)
        "walk lists": index.walk is None or (
            len(index.walk.keys) == len(index.parents)
            and all(map(operator.is_, index.walk.keys, index.parents))
            and all(map(operator.is_, index.walk.values, index.parents.values()))
        ),
    }


class TakenTwice(Exception):
    """A taken statement's node was in the tree already (never seen: a tree shares no nodes)."""
