"""Imports whose top levels do nothing the interpreter tracks, taken without walking them.

Most of a library is definitions, assignments and calls of helpers that do nothing tracked:
importing such a module brings in modules and notes helpers, and nothing else happens on any
path. `inert_import` says so once per module (ProjectIndex.inert_imports), for every program;
the language server takes the answers of the analysis before where what decided them still
holds (ProjectIndex.inert_before). `imported_names` gives the module names an import statement
brings in (`import a.b` is `a` and `a.b`).
"""

from __future__ import annotations

from contextlib import nullcontext
from dataclasses import dataclass
from functools import lru_cache

from torchrepro_lint.project import ir
from torchrepro_lint.project.index import ProjectIndex
from torchrepro_lint.project.modules import ProjectModule
from torchrepro_lint.project.reads import note_reads, record


def inert_import(project: ProjectIndex, module: ProjectModule, effectful, scratch=nullcontext) -> Inert | None:
    """What importing `module` brings in, when running its top level (and that of every module
    it imports) does nothing the interpreter tracks: definitions, assignments, calls of helpers
    that do nothing tracked, branches between such. None when there is something to walk.
    Most of a library is inert: without this, each program walked every module it imports
    again (torch's 160 programs: 2M module imports walked). `effectful(symbol)` is the
    interpreter's test for functions.

    The answer is kept for every program of the run (ProjectIndex.inert_imports) with what
    finding it read (the top levels, the helpers' bodies), read again by each program that
    takes it: a program's cached facts depend on it. So that every such read is made, it is
    found within `scratch()`, where `effectful` starts from no memo of the program's."""
    memo = project.inert_imports
    found = _known(memo, module, project)
    if found is not _UNKNOWN:
        return found
    decided: list = []
    with record() as reads, scratch():
        result = _inert(project, module, memo, effectful, decided)
    reads = frozenset(reads)
    for key in decided:  # each read no more than this search did
        memo[key] = (memo[key][0], reads)
    note_reads(reads)
    return result


def _from_before(project, module):
    """The previous run's (answer, reads) for `module`, where its reads still hold and every
    module it brings in is this run's object."""
    before = project.inert_before.get(id(module))
    hold = project.recordings_hold
    if before is None or before[0] is not module or hold is None:
        return None
    _, answer, reads = before
    modules = project.modules
    if answer is not None and any(modules.get(m.path) is not m for m in answer.modules):
        return None
    return (answer, reads) if hold(reads) else None


@dataclass(frozen=True)
class Inert:
    modules: tuple  # every module the import brings in, itself included
    functions: frozenset  # (module path, function path) of the helpers its top levels call


def _known(memo, module, project):
    """The kept answer for `module` (its reads read again), or _UNKNOWN. The language server
    takes the previous run's where it still holds: an edit of one model file of timm decided
    again the answers for every module `import timm` brings in (half of that walk)."""
    found = memo.get(id(module))
    if found is None:
        found = _from_before(project, module)
        if found is None:
            return _UNKNOWN
        memo[id(module)] = found
    answer, reads = found
    if reads is not None:
        note_reads(reads)
    return answer


def _inert(project, root, memo, effectful, decided: list) -> Inert | None:
    """(The ids of the answers decided here go to `decided`: inert_import adds their reads.)"""
    modules: dict = {}
    functions: set = set()
    stack = [root]
    while stack:
        module = stack.pop()
        if id(module) in modules:
            continue
        known = _known(memo, module, project)
        if known is None:
            memo[id(root)] = (None, None)
            decided.append(id(root))
            return None
        if known is not _UNKNOWN:  # an inert module met before: its whole closure
            modules.update((id(m), m) for m in known.modules)
            functions |= known.functions
            continue
        modules[id(module)] = module
        top = module.top
        imports = _inert_top(project, module, top, _instances(top), functions, effectful)
        if imports is None:
            memo[id(module)] = memo[id(root)] = (None, None)
            decided += [id(module), id(root)]
            return None
        for name in imports:
            imported = project.module_named(name, module)
            if imported is not None and id(imported) not in modules:
                stack.append(imported)
    answer = Inert(tuple(modules.values()), frozenset(functions))
    memo[id(root)] = (answer, None)
    decided.append(id(root))
    return answer


def _inert_top(project, module, statements, instances, functions: set, effectful) -> list[str] | None:
    """The names a module's inert top level imports (adding the helpers it calls to
    `functions`), or None if it does anything tracked."""
    imports: list[str] = []
    for statement in statements:
        if isinstance(statement, ir.Assign):
            continue
        if isinstance(statement, ir.ImportModule):
            imports += imported_names(statement)
        elif isinstance(statement, (ir.Branch, ir.Try)):
            for arm in _arms_when_imported(statement) if isinstance(statement, ir.Branch) else ir.blocks_of(statement):
                inner = _inert_top(project, module, arm, instances, functions, effectful)
                if inner is None:
                    return None
                imports += inner
        elif isinstance(statement, ir.Call):
            if not _inert_call(project, module, statement, instances, functions, effectful):
                return None
        else:
            return None
    return imports


def _inert_call(project, module, call: ir.Call, instances, functions: set, effectful) -> bool:
    """A top-level call that does nothing tracked (Interpreter.call would only note the helper)."""
    if call.target is None:
        return call.receiver not in instances  # a method of a module-level object: walk it
    symbol = project.resolve(call.target, module)
    if symbol is not None and symbol.klass is not None:
        symbol = project.method(symbol, "__init__")
    elif symbol is not None and not symbol.is_function:
        symbol = None
    if symbol is None:
        return True  # nothing of the project's runs
    if effectful(symbol):
        return False
    functions.add((symbol.module.path, symbol.path))
    return True


def _arms_when_imported(branch: ir.Branch) -> tuple:
    """The arms an imported module may take: a `__main__` guard's body never runs there."""
    if isinstance(branch.cond, ir.IsMain):
        return (branch.orelse,)
    if isinstance(branch.cond, ir.Not) and isinstance(branch.cond.operand, ir.IsMain):
        return (branch.then,)
    return (branch.then, branch.orelse)


def _instances(statements) -> set[str]:
    """Names a module's top level binds to instances of project classes."""
    out: set[str] = set()
    for statement in statements:
        if isinstance(statement, ir.Assign) and isinstance(statement.value, ir.Instance):
            out.add(statement.name)
        elif isinstance(statement, ir.Branch):
            out |= _instances(statement.then) | _instances(statement.orelse)
        elif isinstance(statement, ir.Try):
            for block in ir.blocks_of(statement):
                out |= _instances(block)
    return out


_UNKNOWN = object()


def imported_names(statement: ir.ImportModule) -> tuple[str, ...]:
    return _names_imported(statement.module, statement.names)


@lru_cache(maxsize=65536)  # every program walks the same imports again
def _names_imported(module: str, names: tuple[str, ...]) -> tuple[str, ...]:
    parts = module.split(".")
    return tuple(".".join(parts[: i + 1]) for i in range(len(parts))) + tuple(f"{module}.{n}" for n in names)
