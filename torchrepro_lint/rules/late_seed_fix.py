"""TRP105's fix: the late seeding statement moved to just above the statement of the first draw.

Offered only where the move is mechanical and keeps the program's meaning apart from the seed's
place:

- the seeding statement is a bare call on a line of its own: a known seeding API
  (`torch.manual_seed`, Lightning's `seed_everything`, `transformers.set_seed`, a `seed-functions`
  helper) or a project function that only seeds (`seeding_only`), called with plain arguments
  (names, attributes, literals, arithmetic: nothing whose value depends on when it is computed,
  such as `dist.get_rank()` before `init_process_group`);
- the first draw runs in a statement of the same block before it: the draw itself, or a call of a
  function of the same module that reaches it (`model = build_model()`);
- no statement from that one to the seed binds or changes what the seed reads (`args = parse()`,
  `cfg.merge_from_file(f)`, `args.seed = 3`).

A seed inside a function of the entry module that only seeds is moved at its call, when exactly
one call of it can be moved so.
"""

from __future__ import annotations

import libcst as cst

from torchrepro_lint.analysis.names import LOCAL
from torchrepro_lint.analysis.syntax import arg, bool_value
from torchrepro_lint.project.known_apis import KNOWN_HELPERS
from torchrepro_lint.rules.edits import make_fix, statement_line
from torchrepro_lint.rules.statements import DEFERRED, block_of, changes, conflicts, module_imports, move_above, reads

SEEDING_CALLS = frozenset(
    {"torch.manual_seed", "torch.cuda.manual_seed", "torch.cuda.manual_seed_all", "random.seed", "numpy.random.seed",
     "torch.use_deterministic_algorithms"}
)  # fmt: skip
CUDNN_SWITCHES = frozenset({"torch.backends.cudnn.deterministic", "torch.backends.cudnn.benchmark"})
PLAIN_CALLS = frozenset({"builtins.int", "builtins.str", "builtins.abs"})
# Builtins whose value does not depend on when they are called, and the one call a seeding
# helper's condition may make.
CONDITION_CALLS = PLAIN_CALLS | {"torch.cuda.is_available"}


def seed_move_fix(context, module, ref, consumed):
    """The fix for a late seed at (module, ref) whose first draw was `consumed`, or None."""
    draw_module, draw_ref = consumed.anchor
    if draw_module is not module or draw_ref is None:
        return None
    seed, draw = module.nodes[ref], module.nodes[draw_ref]
    if not isinstance(seed, cst.Call):
        return None
    moves = []
    if _seeds_only(context, module, seed):
        moves.append(_move(module, seed, draw))
    helper = module.index.enclosing(seed, cst.FunctionDef)
    if helper is not None and seeding_only(module, helper):
        path = next((p for p, f in module.index.functions.items() if f is helper), None)
        calls = module.index.calls_to(LOCAL + path) if path is not None else []
        found = [m for m in (_move(module, site.node, draw) for site in calls if _plain_call(module, site.node)) if m]
        if len(found) == 1:
            moves.append(found[0])
    moves = [m for m in moves if m]
    if len(moves) != 1:
        return None
    return make_fix("unsafe", "Move the seeding call above the first draw", moves[0])


def _move(module, seed: cst.Call, draw: cst.CSTNode):
    """The edits moving the statement of `seed` above the first statement of its block that
    reaches `draw`, or None."""
    line = statement_line(module, seed)
    if line is None or not isinstance(line.body[0], cst.Expr) or line.body[0].value is not seed:
        return None  # not a bare call on a line of its own
    block = block_of(module, line)
    position = block.index(line)
    first = _first_reaching(module, block[:position], draw, _functions_reaching(module, draw))
    if first is None:
        return None
    if conflicts(changes(block[first:position], module_imports(module)), reads(seed)):
        return None
    if _reseeds(module, seed):
        return None
    return move_above(module, line, block[first])


def _reseeds(module, seed: cst.Call) -> bool:
    """Whether the function (or module body) of `seed` seeds torch again elsewhere: the two then
    often pair up (`manual_seed(0)` before each of two forward passes to compare them), and
    moving one would break the pair."""
    index = module.index
    owner = index.enclosing(seed, cst.FunctionDef)
    again = {"torch.manual_seed", index.call_site(seed).qualname, *_helpers(module)}
    for site in index.calls:
        if site.node is seed or site.qualname not in again:
            continue
        if index.enclosing(site.node, cst.FunctionDef) is owner:
            return True
    return False


def _first_reaching(module, statements: list, draw, reaching: set[str]) -> int | None:
    """The position of the first of `statements` that runs `draw`: holds it where it runs, or
    calls a function of this module (a class: its `__init__`) that reaches it. A definition
    runs nothing where it stands. Found upwards, from the draw and from the module's calls of
    those functions, through the parent map (walking each statement's children down was a
    fifth of an edit of timm's resnet.py, for the three scripts whose late seed it checks)."""
    position = {id(s): i for i, s in enumerate(statements) if not isinstance(s, DEFERRED)}
    holders = [draw]
    for site in module.index.calls:
        name = site.qualname[len(LOCAL) :] if site.qualname and site.qualname.startswith(LOCAL) else None
        if name is not None and (name in reaching or f"{name}.__init__" in reaching):
            holders.append(site.node)
    parents = module.index.parents
    first = None
    for node in holders:
        current = node
        while current is not None and id(current) not in position and not isinstance(current, DEFERRED):
            current = parents.get(current)
        if current is not None and id(current) in position and (first is None or position[id(current)] < first):
            first = position[id(current)]
    return first


def _functions_reaching(module, draw) -> set[str]:
    """The paths of this module's functions that run `draw`, directly or through calls of one
    another (a class's construction through its `__init__`)."""
    index = module.index
    path_of = {id(f): p for p, f in index.functions.items()}
    owner = index.enclosing(draw, cst.FunctionDef)
    reaching = {path_of[id(owner)]} if owner is not None and id(owner) in path_of else set()
    calls = []
    for site in index.calls:
        if site.qualname and site.qualname.startswith(LOCAL):
            caller = index.enclosing(site.node, cst.FunctionDef)
            if caller is not None and id(caller) in path_of:
                calls.append((path_of[id(caller)], site.qualname[len(LOCAL) :]))
    grew = True
    while grew:
        grew = False
        for caller, callee in calls:
            if caller not in reaching and (callee in reaching or f"{callee}.__init__" in reaching):
                reaching.add(caller)
                grew = True
    return reaching


def _seeds_only(context, module, call: cst.Call) -> bool:
    """A call that seeds and does nothing else: a known seeding API or helper, or a project
    function that only seeds, with plain arguments."""
    if not _plain_call(module, call):
        return False
    site = module.index.call_site(call)
    qualname = site.qualname if site is not None else None
    helpers = _helpers(module)
    if qualname in SEEDING_CALLS:
        return True
    if qualname in helpers:
        # a trainer seeds as it is built; accelerate's `device_specific=True` adds the process
        # index, which depends on what was set up before
        specific = arg(call, 1 if qualname.startswith("accelerate.") else None, "device_specific")
        return specific is None or bool_value(specific) is False
    if qualname is None and isinstance(call.func, cst.Attribute) and call.func.attr.value == "seed_everything":
        return True  # Lightning Fabric's method (as lowering reads it)
    symbol = context.project.resolve(qualname, module) if qualname else None
    if symbol is None or not symbol.is_function:
        return False
    definition = symbol.module.index.functions.get(symbol.path)
    return definition is not None and seeding_only(symbol.module, definition)


def seeding_only(module, function: cst.FunctionDef) -> bool:
    """Whether a function only seeds: its body is made of seeding calls with plain arguments,
    cuDNN's determinism switches, `os.environ[...] = ...`, `return`, and `if`s on plain
    conditions around those."""
    return isinstance(function.body, cst.IndentedBlock) and not function.asynchronous and _only_seeding(module, function.body.body)


def _only_seeding(module, statements) -> bool:
    for position, statement in enumerate(statements):
        if isinstance(statement, cst.If):
            if not _plain(module, statement.test, CONDITION_CALLS) or not isinstance(statement.body, cst.IndentedBlock):
                return False
            if not _only_seeding(module, statement.body.body):
                return False
            orelse = statement.orelse
            if orelse is not None:
                if isinstance(orelse, cst.If):
                    if not _only_seeding(module, [orelse]):
                        return False
                elif not isinstance(orelse.body, cst.IndentedBlock) or not _only_seeding(module, orelse.body.body):
                    return False
            continue
        if not isinstance(statement, cst.SimpleStatementLine):
            return False
        for small in statement.body:
            if isinstance(small, cst.Pass):
                continue
            if isinstance(small, cst.Expr) and isinstance(small.value, (cst.SimpleString, cst.ConcatenatedString)) and position == 0:
                continue  # the docstring
            if isinstance(small, cst.Return) and (small.value is None or _plain(module, small.value, PLAIN_CALLS)):
                continue
            if isinstance(small, cst.Expr) and isinstance(small.value, cst.Call):
                site = module.index.call_site(small.value)
                if site is not None and site.qualname in SEEDING_CALLS and _plain_call(module, small.value):
                    continue
                helper = _helpers(module).get(site.qualname) if site is not None else None
                if helper is not None and _plain_call(module, small.value):
                    continue
                return False
            if isinstance(small, cst.Assign) and len(small.targets) == 1 and _plain(module, small.value, PLAIN_CALLS):
                target = small.targets[0].target
                if isinstance(target, cst.Subscript) and module.index.resolve(target.value, target) == "os.environ":
                    continue
                if isinstance(target, cst.Attribute) and module.index.resolve(target, target) in CUDNN_SWITCHES:
                    continue
            return False
    return True


def _helpers(module) -> dict:
    """Helpers that seed where they are called: the frameworks' and the `seed-functions`
    setting's (not a trainer, which seeds as it is built, nor a `deterministic-functions` one)."""
    return {q: h for q, h in {**KNOWN_HELPERS, **module.helpers}.items() if h.seeds and h.seed_text is None}


def _plain_call(module, call: cst.Call) -> bool:
    return all(not a.star and _plain(module, a.value, PLAIN_CALLS) for a in call.args)


def _plain(module, expr: cst.CSTNode, calls: frozenset) -> bool:
    """An expression whose value does not depend on when it is computed: names, attributes,
    subscripts, literals, operators, and calls of `calls` only."""
    stack = [expr]
    while stack:
        current = stack.pop()
        if isinstance(current, cst.Call):
            if module.index.resolve(current.func, current) not in calls:
                return False
        elif isinstance(current, (cst.NamedExpr, cst.Await, cst.Yield, cst.Lambda, cst.ListComp, cst.SetComp,
                                  cst.DictComp, cst.GeneratorExp)):  # fmt: skip
            return False
        stack.extend(current.children)
    return True
