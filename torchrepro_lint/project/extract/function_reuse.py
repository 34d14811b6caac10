"""Which functions of an edited buffer keep the IR their previous lowering gave.

The language server lowers an edited buffer again on every edit, and in a model file most of
that time is the functions the edit did not touch (timm's resnet.py: 110 functions, 7 of its 10
ms). A function's lowering reads its own subtree, and from outside it: names through the scopes
around it (the module's, a class's, an enclosing function's), the module's function and class
tables, and a few module-wide facts (stores to an attribute anywhere, `self.x = ...` in a
class's methods, calls that trace a model). So where the edit (`walk_reuse.edit_nodes`) is
inert for all of those, the functions outside the edited one keep their IR:
- no changed node is in a class body outside its methods (what the methods may read);
- none is a definition, lambda, import, `global`/`nonlocal`, a store to an attribute, or a
  call that traces a model; a function or class on the way down to the edit (a new object
  because its body changed) has the same header (name, parameters, decorators, bases);
- where the edit changed top-level code (an assignment added at the end of a script, a
  statement such as a top-level `try` on the way down to an edited function), no name in that
  code is a name anywhere else in the module (`_names_read_elsewhere`): a function reads the
  module's names through its scope (rebinding `set_seed = build` changes what `set_seed()`
  calls in every function), and another top-level statement can pass a value on (`B = A`).
  The top level is then lowered again; otherwise its IR is taken too (its statements are the
  same, but for definitions, which it does not lower).
Then the module's tables of functions and classes are the same, and so are its bindings of the
names the taken functions read: only code outside functions, a definition, `global` or an
import changes them.
A function nested in the edited one is lowered again (it reads the edited one's names). A taken
function's IR comes with its node refs moved to where this lowering numbers them (`shifted`); the
equivalence tests (tests/project/test_function_reuse.py, benchmarks/reparse_fuzz.py --index) compare
with a whole lowering.

Inside the edited function, the statements the edit did not touch are taken the same way, one by
one at any depth, where the edit changed only simple lines of the function itself and bound no
name that the rest of the module mentions (`statement_reuse`): typing in the 700 lines of a
training script's `main()` lowers the line typed, not the function.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import libcst as cst

from torchrepro_lint.analysis.module_index import ModuleIndex, _child_fields
from torchrepro_lint.analysis.walk_reuse import Walk, edit_nodes
from torchrepro_lint.project import ir
from torchrepro_lint.project.extract.calls import TRACING_CALLS

# A changed node of one of these kinds changes what other functions' lowering reads.
_REFUSED = frozenset({cst.Import, cst.ImportFrom, cst.Global, cst.Nonlocal, cst.Lambda, cst.Param, cst.Parameters, cst.Decorator})
_STORES = (cst.Assign, cst.AnnAssign, cst.AugAssign)


@dataclass
class RefLayout:
    """Where a lowering put its node refs: the top level's first, then each function's."""

    top: int  # refs [0, top) are the top level's
    functions: dict[str, tuple[int, int]] = field(default_factory=dict)  # path -> [first, end)
    # Each statement lowered in a function an edit changed: id(node) -> (node, first ref, end
    # ref, its IR before `live`). The next edit of that function takes those it left alone.
    statements: dict[int, tuple] = field(default_factory=dict)


@dataclass
class FunctionReuse:
    """The previous lowering (its IR, node table and layout), and what this one takes from it:
    its top level, and the functions at `paths`."""

    module: ir.ModuleIR
    nodes: list
    layout: RefLayout
    paths: frozenset[str]
    gone: list  # the previous tree's nodes the edit took out
    top: bool = True  # the top level's IR is taken too (False: the edit changed top-level code)
    # The edited functions whose statements the edit left alone are taken from `layout.statements`
    # (statement_reuse): a draw typed in the 700 lines of timm's main() lowered all of them again
    in_functions: frozenset[str] = frozenset()


def function_reuse(
    index: ModuleIndex, tree, module: ir.ModuleIR, nodes: list, layout: RefLayout, text_before: str | None = None
) -> FunctionReuse | None:
    """What a lowering of `index`'s tree takes from the previous lowering (`module`, `nodes`,
    `layout`) of `tree`, where the index took its walk from that tree's (walk_reuse.py); with
    `text_before` (that tree's text), statements of the edited functions too."""
    walk = index.walk
    before = walk.before if walk is not None else None
    if before is None or before.module is not tree or before.package != index.package:
        return None  # (lowered from another tree)
    changes = edit_nodes(walk)
    walk.before = None  # (the previous tree: of no more use)
    found = _edited_functions(index, before, *changes) if changes is not None else None
    if found is None:
        return None
    edited, top_changed = found
    paths = frozenset(
        path for path, node in index.functions.items()
        if before.functions.get(path) is node and not any(path == e or path.startswith(e + ".") for e in edited)
    )
    in_functions = frozenset()
    if text_before is not None and not top_changed and layout.statements:
        in_functions = statement_reuse(index, before, *changes, edited, text_before)
    return FunctionReuse(module, nodes, layout, paths, changes[1], top=not top_changed, in_functions=in_functions)


# Nodes that an edit of a statement inside them makes new, their own parts unchanged: a body on
# the way down (a compound statement whose header changed has new nodes outside any simple line)
_ON_THE_WAY = frozenset({
    cst.IndentedBlock, cst.SimpleStatementLine, cst.If, cst.Else, cst.For, cst.While, cst.With, cst.Try,
    cst.TryStar, cst.ExceptHandler, cst.ExceptStarHandler, cst.Finally, cst.FunctionDef,
})
_UNBOUND = object()


def statement_reuse(
    index: ModuleIndex, before: Walk, added: list, gone: list, edited: set[str], text_before: str
) -> frozenset[str]:
    """The edited functions whose untouched statements (at any depth) keep the IR they had.
    A statement's lowering reads its own subtree, the headers of the statements around it
    (`if torch.cuda.is_available():`), names through the function's scope (what a name
    resolves to, the value last bound to it), and the function's other calls that mention the
    names it binds (`_only_traced`, `_seed_made`). So where every changed line is a simple
    statement line of the function itself (no header changed, no nested function), and no
    changed line mentions a name the function binds that the rest of the module mentions (a
    line `edit_3 = torch.randn(3)` typed in main()), every other statement of it lowers as
    before, its refs shifted. Function-wide facts (its returns, dead assignments) are found
    again over the whole body. Lines parsed again around the edit as they were do not count."""
    same = _parsed_again(added, gone)
    if same is None:
        return frozenset()
    names: list[tuple[str, bool]] = []  # (a name in a changed line, whether it was added)
    for side, nodes in ((index, added), (before, gone)):
        parents = side.parents
        for node in nodes:
            kind = type(node)
            if kind in _ON_THE_WAY and (kind is not cst.SimpleStatementLine or id(node) in same):
                continue
            ancestor, line = parents.get(node), node if kind is cst.SimpleStatementLine else None
            while ancestor is not None and type(ancestor) is not cst.FunctionDef:
                if line is None and type(ancestor) is cst.SimpleStatementLine:
                    line = ancestor
                ancestor = parents.get(ancestor)
            if line is None or ancestor is None or _outermost_function(side, node) is not ancestor:
                return frozenset()
            if kind is cst.Name and id(line) not in same:
                names.append((node.value, side is index))
    text_now = index.source.text
    found = set()
    for path in edited:
        new, old = index.functions.get(path), before.functions.get(path)
        new_scope = index.scope_of.get(new) if new is not None else None
        old_scope = before.scope_of.get(old) if old is not None else None
        if new_scope is None or old_scope is None or new_scope.imported != old_scope.imported:
            continue
        bound = old_scope.bindings.keys() | new_scope.bindings.keys()
        if any(name in bound and _mentions(text_before if is_added else text_now, name) for name, is_added in names):
            continue  # (a name of the function that other statements may mention, in a changed line)
        if all(_same_binding(name, old_scope, new_scope, text_before, text_now) for name in bound):
            found.add(path)
    return frozenset(found)


def _parsed_again(added: list, gone: list) -> set[int] | None:
    """The ids of the simple lines on either side that are the same code as one on the other
    (reparse.py parses the statements next to an edit again); None where there are too many
    to pair."""
    new_lines = [node for node in added if type(node) is cst.SimpleStatementLine]
    old_lines = [node for node in gone if type(node) is cst.SimpleStatementLine]
    if len(new_lines) * len(old_lines) > 400:
        return None
    same: set[int] = set()
    for new in new_lines:
        for old in old_lines:
            if id(old) not in same and new.deep_equals(old):
                same.update((id(new), id(old)))
                break
    return same


def _same_binding(name: str, old, new, text_before: str, text_now: str) -> bool:
    a, b = old.bindings.get(name, _UNBOUND), new.bindings.get(name, _UNBOUND)
    if a is b or type(a) is str and a == b:
        return True
    if isinstance(a, cst.CSTNode) and isinstance(b, cst.CSTNode) and a.deep_equals(b):
        return True  # (a statement next to the edit, parsed again: the same code, another node)
    if a is _UNBOUND:
        return not _mentions(text_before, name)  # a new name, which no other code could read
    if b is _UNBOUND:
        return not _mentions(text_now, name)  # a name no longer bound, which no code reads now
    return False


def _mentions(text: str, name: str) -> bool:
    """Whether `name` is a word of `text` (str.find: a regular expression took 1.3 ms on a
    60 kB script, twice an edit)."""
    at = text.find(name)
    while at != -1:
        end = at + len(name)
        if (at == 0 or not _word_char(text[at - 1])) and (end == len(text) or not _word_char(text[end])):
            return True
        at = text.find(name, at + 1)
    return False


def _word_char(character: str) -> bool:
    return character.isalnum() or character == "_"


def _edited_functions(index: ModuleIndex, before: Walk, added: list, gone: list) -> tuple[set[str], bool] | None:
    """(the paths of the outermost functions holding the edit, whether it changed top-level
    code), where it is inert for the rest of the module (see above); None where it is not
    (`before`: the tables of the previous tree, which has the `gone` nodes)."""
    edited: set[str] = set()
    top_level: list = []  # changed nodes outside every function and class
    for side, nodes in ((index, added), (before, gone)):
        sites = {id(site.node): site for site in side.calls} if any(type(node) is cst.Call for node in nodes) else {}
        for node in nodes:
            kind = type(node)
            if kind is cst.IndentedBlock:
                continue  # a body on the way down: what changed in it is its statements
            if kind in _REFUSED:
                return None
            if kind is cst.FunctionDef or kind is cst.ClassDef:
                if not _same_header(node, side, index, before):
                    return None
                continue
            if kind in _STORES and _stores_attribute(node):
                return None
            if kind is cst.Call:
                site = sites.get(id(node))
                if site is None or site.qualname in TRACING_CALLS:
                    return None
            outermost = _outermost_function(side, node)
            if outermost is _CLASS_BODY:
                return None
            if outermost is None:
                top_level.append(node)
                continue
            edited.add(side.scope_of[outermost].qualpath)
    if top_level and _names_read_elsewhere(index, top_level, added):
        return None
    return edited, bool(top_level)


def _names_read_elsewhere(index: ModuleIndex, top_level: list, added: list) -> bool:
    """Whether a name of the changed top-level code (one it binds, unbinds or reads) is also a
    name anywhere else in the module: in a function, which reads module names through its
    scopes, or in other top-level code, through which a value can reach one (`B = A`)."""
    names = {node.value for node in top_level if type(node) is cst.Name}
    if not names:
        return False
    changed = set(map(id, added))
    return any(node.value in names and id(node) not in changed for node in index.nodes_of(cst.Name))


def _same_header(node, side, index: ModuleIndex, before: Walk) -> bool:
    """A function or class that is new only because its body changed: its counterpart in the
    other tree, by path, has every other field the same."""
    path = side.scope_of[node].qualpath
    tables = (index.functions, before.functions) if type(node) is cst.FunctionDef else (index.classes, before.classes)
    new, old = (table.get(path) for table in tables)
    if new is None or old is None or type(new) is not type(old) or node is not (new if side is index else old):
        return False
    for name in _child_fields(type(node)):
        if name == "body":
            continue
        a, b = getattr(new, name), getattr(old, name)
        if a is not b and not (isinstance(a, (tuple, list)) and len(a) == len(b) and all(x is y for x, y in zip(a, b))):
            return False
    return True


def _stores_attribute(node) -> bool:
    targets = [t.target for t in node.targets] if type(node) is cst.Assign else [node.target]
    return any(not isinstance(target, cst.Name) for target in targets)  # (tuples may hold attributes: refused too)


_CLASS_BODY = object()  # _outermost_function's answer for a node in a class body


def _outermost_function(side, node):
    """The outermost function holding `node`; None at the top level; _CLASS_BODY in a class
    body, outside its methods (what the class's methods may read)."""
    found = None
    parents = side.parents
    ancestor = parents.get(node)
    while ancestor is not None:
        if type(ancestor) is cst.FunctionDef:
            found = ancestor
        elif type(ancestor) is cst.ClassDef and found is None:
            return _CLASS_BODY
        ancestor = parents.get(ancestor)
    return found


def shifted(function: ir.FunctionIR, delta: int) -> ir.FunctionIR:
    """The function's IR with every node ref moved by `delta`."""
    if delta == 0:
        return function
    moved = ir.FunctionIR(
        function.path, function.ref + delta, function.params, function.defaults,
        shifted_statements(function.body, delta), function.is_method, function.returns,
    )
    if len(SHIFTED_FROM) >= SHIFTED_KEPT:
        SHIFTED_FROM.clear()
    SHIFTED_FROM[id(moved)] = (moved, unshifted(function))
    return moved


# id(a shifted function) -> (it, the function it was first shifted from): the same code without
# refs, whose digest a cached result's IR_CODE read compares (lowered_store.LoweredStore.ir_part_digest)
SHIFTED_FROM: dict[int, tuple] = {}
SHIFTED_KEPT = 4096


def unshifted(function: ir.FunctionIR) -> ir.FunctionIR:
    """The function `function` was shifted from (itself if none): their code is the same."""
    found = SHIFTED_FROM.get(id(function))
    return found[1] if found is not None and found[0] is function else function


def shifted_statements(statements, delta: int) -> tuple:
    """IR statements with every node ref moved by `delta` (a taken function's or statement's)."""
    out = []
    for statement in statements:
        kind = type(statement)
        if kind is ir.Branch:
            then, orelse = shifted_statements(statement.then, delta), shifted_statements(statement.orelse, delta)
            statement = ir.Branch(statement.cond, then, orelse)
        elif kind is ir.Try:
            statement = ir.Try(*(shifted_statements(block, delta) for block in ir.blocks_of(statement)))
        elif hasattr(statement, "ref"):
            statement = replace(statement, ref=statement.ref + delta)
        out.append(statement)
    return tuple(out)
