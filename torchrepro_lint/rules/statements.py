"""Statements, for the fixes that move one or add one (TRP105, TRP302, TRP304): the block a
statement stands in, what a stretch of statements binds or changes, what a statement reads, and
moving a statement's lines (with the comment lines attached above it) to another place.

Everything here answers from the CST of one module and is conservative: where a question cannot
be answered with certainty (`global`, a `match` statement), the answer is the one under which
no fix is offered.
"""

from __future__ import annotations

import libcst as cst

from torchrepro_lint.analysis.names import dotted
from torchrepro_lint.findings import Edit
from torchrepro_lint.parsing.lines import physical_lines
from torchrepro_lint.project.modules import ProjectModule

# Nodes whose body does not run where they stand (a function's body runs when it is called).
DEFERRED = (cst.FunctionDef, cst.Lambda)
_ANYTHING = "*"  # a change to every name (a `global` or `match` statement we do not follow)


def block_of(module: ProjectModule, statement: cst.CSTNode) -> list | None:
    """The statements of the indented block (or module body) that `statement` stands in."""
    parent = module.index.parents.get(statement)
    if isinstance(parent, (cst.IndentedBlock, cst.Module)):
        return list(parent.body)
    return None


def statement_in(module: ProjectModule, node: cst.CSTNode, block: list) -> cst.CSTNode | None:
    """The statement of `block` that holds `node` where it runs (not in a function or lambda
    defined there), or None."""
    members = {id(s) for s in block}
    current = node
    while current is not None:
        if id(current) in members:
            return current
        if isinstance(current, DEFERRED):
            return None
        current = module.index.parents.get(current)
    return None


def reads(node: cst.CSTNode) -> set[str]:
    """The dotted paths `node` reads: each longest attribute chain on a name (`args.seed`,
    `torch.manual_seed`), and each name read alone."""
    found: set[str] = set()
    stack = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, (cst.Attribute, cst.Name)):
            path = dotted(current)
            if path is not None:
                found.add(path)
            elif isinstance(current, cst.Attribute):
                stack.append(current.value)  # `f(x).seed`: what `f(x)` reads (`seed` is no name)
            continue
        if isinstance(current, cst.Arg):
            stack.append(current.value)  # not the keyword's name
            continue
        stack.extend(current.children)
    return found


def changes(statements, module_names: set[str] = frozenset()) -> set[str]:
    """The dotted paths a stretch of statements may change where they run: each name they bind
    (assignments, loops, `with ... as`, imports, definitions, walrus, `del`, `except ... as`),
    each attribute or subscript they store into (`args.seed = 3`: `args.seed`; `cfg["a"] = 1`:
    `cfg`), and each object they call a method of (`cfg.merge_from_file(f)`: `cfg`), except
    modules (`module_names`: `torch.randn(3)` changes nothing read through `torch`). Calls that
    are handed an object (`configure(args)`) are not followed."""
    found: set[str] = set()
    for statement in statements:
        _changes(statement, found, module_names)
    return found


def _changes(node: cst.CSTNode, found: set[str], module_names) -> None:
    if isinstance(node, (cst.Global, cst.Nonlocal, cst.Match)):
        found.add(_ANYTHING)
        return
    if isinstance(node, cst.Lambda):
        return
    if isinstance(node, (cst.FunctionDef, cst.ClassDef)):
        found.add(node.name.value)
        if isinstance(node, cst.FunctionDef):
            for part in (*node.decorators, node.params):
                _changes(part, found, module_names)
            return  # its body runs when it is called
    elif isinstance(node, (cst.AssignTarget, cst.AugAssign, cst.AnnAssign, cst.NamedExpr, cst.For, cst.Del)):
        _targets(node.target, found)
    elif isinstance(node, cst.AsName):  # import ... as, with ... as, except ... as
        _targets(node.name, found)
    elif isinstance(node, cst.Import):
        found.update(dotted(a.name).split(".")[0] for a in node.names if a.asname is None)
    elif isinstance(node, cst.ImportFrom):
        if isinstance(node.names, cst.ImportStar):
            found.add(_ANYTHING)
        else:
            found.update(dotted(a.name) or _ANYTHING for a in node.names if a.asname is None)
    elif isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
        receiver = dotted(node.func.value)
        if receiver is not None and receiver.split(".")[0] not in module_names:
            found.add(receiver)
    for child in node.children:
        _changes(child, found, module_names)


def _targets(target: cst.CSTNode, found: set[str]) -> None:
    if isinstance(target, (cst.Tuple, cst.List)):
        for element in target.elements:
            _targets(element.value, found)
    elif isinstance(target, cst.StarredElement):
        _targets(target.value, found)
    elif isinstance(target, cst.Subscript):
        path = dotted(target.value)
        found.add(path if path is not None else _ANYTHING)
    else:
        path = dotted(target)
        found.add(path if path is not None else _ANYTHING)


def conflicts(changed: set[str], read: set[str]) -> bool:
    """Whether a change may alter what is read: a path changed is a read path, lies under one,
    or holds one (`args` changed, `args.seed` read; `args.seed` changed, `args` read)."""
    if _ANYTHING in changed:
        return True
    for a in changed:
        for b in read:
            if a == b or b.startswith(a + ".") or a.startswith(b + "."):
                return True
    return False


def module_imports(module: ProjectModule) -> set[str]:
    """Names bound by `import m` / `import m as n` anywhere in the module: modules, which a call
    through them does not change (`torch.randn(3)`)."""
    names = set()
    for record in module.index.imports:
        node = record.node
        if isinstance(node, cst.Import):
            for alias in node.names:
                names.add(alias.asname.name.value if alias.asname is not None else dotted(alias.name).split(".")[0])
    return names


def attached_rows(module: ProjectModule, statement: cst.CSTNode) -> tuple[int, int]:
    """(first row, last row) of a statement with the comment lines right above it (no blank line
    between), which belong to it."""
    row, _, end_row, _ = module.source.span(statement)
    lines = module.source.lines
    first = row
    while first > 1 and lines[first - 2].strip().startswith("#"):
        first -= 1
    return first, end_row


def insert_above(module: ProjectModule, statement: cst.CSTNode, code: str) -> Edit:
    """A new line `code` above `statement` and the comments attached to it, at its indentation
    and with its line ending."""
    at, _ = attached_rows(module, statement)
    raw = physical_lines(module.source.text)[module.source.span(statement)[0] - 1]
    line = raw.rstrip("\r\n")
    return Edit(line[: len(line) - len(line.lstrip())] + code + (raw[len(line) :] or "\n"), (at, 1), (at, 1))


def move_above(module: ProjectModule, statement: cst.CSTNode, target: cst.CSTNode) -> list[Edit]:
    """Edits that move `statement` (a line of its own, with its attached comments and its trailing
    comment) to just above `target` (and the comments attached to it), in the same block."""
    first, last = attached_rows(module, statement)
    at, _ = attached_rows(module, target)
    lines, raw = module.source.lines, physical_lines(module.source.text)
    moved = "".join(raw[first - 1 : last])
    if moved == moved.rstrip("\r\n"):  # the file's last line, without a line break
        moved += raw[first - 2][len(lines[first - 2]) :] if first > 1 else "\n"
    # between two blank lines, one of them goes with it
    blank_around = first > 1 and not lines[first - 2].strip() and last < len(lines) and not lines[last].strip()
    return [Edit(moved, (at, 1), (at, 1)), Edit("", (first, 1), (last + 1 + blank_around, 1))]


def bindings_of(node: cst.CSTNode, name: str) -> int:
    """How many times `name` is bound in `node` where it runs (not in the functions defined there,
    though a definition named so counts); a `global` or `match` statement counts as many."""
    found: set[str] = set()
    count = 0
    stack = [node]
    while stack:
        current = stack.pop()
        if current is not node and isinstance(current, DEFERRED):
            if isinstance(current, cst.FunctionDef) and current.name.value == name:
                count += 1
            continue
        if isinstance(current, (cst.Global, cst.Nonlocal, cst.Match)):
            return 1 << 20
        found.clear()
        if isinstance(current, (cst.AssignTarget, cst.AugAssign, cst.AnnAssign, cst.NamedExpr, cst.For, cst.Del)):
            _targets(current.target, found)
        elif isinstance(current, cst.AsName):
            _targets(current.name, found)
        elif isinstance(current, (cst.ClassDef, cst.Param)):
            found.add(current.name.value)
        elif isinstance(current, (cst.Import, cst.ImportFrom)):
            if isinstance(current.names, cst.ImportStar):
                return 1 << 20
            found.update(dotted(a.name).split(".")[0] for a in current.names if a.asname is None)
        if name in found or _ANYTHING in found:
            count += 1
        stack.extend(current.children)
    return count


def bound_before(module: ProjectModule, owner: cst.CSTNode, name: str, node: cst.CSTNode) -> bool:
    """Whether `name`, bound exactly once in `owner` (a function or the module) where it runs,
    holds that one value where `node` runs: a parameter of `owner`, or bound by a statement of a
    block that holds `node` in a later statement of the same block."""
    if bindings_of(owner, name) != 1:
        return False
    if isinstance(owner, cst.FunctionDef) and any(
        p.name.value == name
        for p in (*owner.params.posonly_params, *owner.params.params, *owner.params.kwonly_params)
    ):
        return True
    for statement in _statements_binding(owner, name):
        block = block_of(module, statement)
        held = statement_in(module, node, block) if block is not None else None
        return held is not None and block.index(statement) < block.index(held)
    return False


def _statements_binding(owner: cst.CSTNode, name: str):
    """The innermost statements in `owner` (where it runs) that bind `name`."""
    stack = [owner]
    while stack:
        current = stack.pop()
        if current is not owner and isinstance(current, DEFERRED):
            continue
        if isinstance(current, (cst.SimpleStatementLine, cst.BaseCompoundStatement)) and current is not owner:
            # its own part, not the blocks and clauses it holds (`for x in ...:`, `x = 1`)
            head = [c for c in current.children if not isinstance(c, _CLAUSES)]
            if any(bindings_of(part, name) for part in head):
                yield current
                continue
        stack.extend(current.children)


_CLAUSES = (cst.IndentedBlock, cst.SimpleStatementSuite, cst.Else, cst.ExceptHandler, cst.Finally, cst.If)
