"""A small intermediate representation of what a module does, for the program model.

Each module is lowered once (extract/) into statements that keep only what seeding and
determinism depend on: effects (a seed, a claim, a draw...), calls that may reach project
code, simple assignments, and branches. It holds no CST nodes (only integer refs into the
module's node table), so it can be cached and shipped between processes.

Every class is compact (`_compact`): a whole project's IR is held by every process of a run.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field, fields, replace
from operator import attrgetter
from typing import Union


_SLOTS = {"slots": True} if sys.version_info >= (3, 10) else {}  # (dataclass's `slots` is 3.10's: 3.9 goes without)


def _compact(cls=None, *, frozen: bool = True):
    """A dataclass with __slots__, pickled as its constructor's arguments.

    Without slots, each of the ~1 M IR objects of torch's source carried an instance dict,
    built by unpickling (IR from the cache or from another process): 227 MB for its IR.
    Pickled as (class, field values), unpickling calls the constructor, as plain dataclasses'
    state-dict restore did not; the values are read by one C-level attrgetter."""

    def make(cls):
        cls = dataclass(frozen=frozen, **_SLOTS)(cls)
        names = [f.name for f in fields(cls)]
        if not names:
            cls.__reduce__ = lambda self: (type(self), ())
        elif len(names) == 1:
            get_one = attrgetter(names[0])
            cls.__reduce__ = lambda self: (type(self), (get_one(self),))
        else:
            get_all = attrgetter(*names)
            cls.__reduce__ = lambda self: (type(self), get_all(self))
        return cls

    return make if cls is None else make(cls)


# -- values: conditions and switch arguments, evaluated under the caller's bindings --------
@_compact
class Const:
    value: object


@_compact
class Var:
    name: str


@_compact
class Not:
    operand: "Value"


@_compact
class IsNone:
    operand: "Value"
    negated: bool  # `x is not None`


@_compact
class Equals:
    """`a == b` / `a != b`: decided when both sides are known (a literal argument compared with a
    literal, `name == "gpu"` called with "cpu"), else opaque as `text`, as any comparison was."""

    left: "Value"
    right: "Value"
    negated: bool  # `!=`
    text: str


@_compact
class BoolOp:
    """`a and b` / `a or b`: decided when the operands are, else opaque as `text`."""

    op: str  # "and" | "or"
    operands: tuple["Value", ...]
    text: str


@_compact
class Opaque:
    """A runtime value. Equal keys (the same source text) are taken to be the same value."""

    key: str


@_compact
class IsMain:
    """`__name__ == "__main__"`: true only in the module a program runs as `__main__`; false where
    it is imported, and in a spawned child, which imports the main module as `__mp_main__`."""


@_compact
class AttributeOnCuda:
    """Whether `<owner>.<attribute>` names a CUDA device, where only the program can tell: the
    object's class is in another module (`klass`, with what its construction gives), a base class
    elsewhere sets it on `self`, or a store outside the class (`trainer.device = "cuda"`) may have
    set it. Evaluates to a Const bool.

    `owner`: "self", a variable whose stores the run tracks, or None. `klass`: the class's
    qualified name as the module sees it (None for `self`: the class the method runs for).
    `given`: the construction's arguments, each (keyword or position, names CUDA, a plain
    literal); None where the object was not built in view (a class attribute, `self`).
    `instance`: False for a class attribute read on the class. `known`: what the lowering found
    in its own module (True: it names CUDA there already)."""

    owner: str | None
    klass: str | None
    attribute: str
    given: tuple[tuple[str | int, bool, bool], ...] | None = None
    instance: bool = True
    known: bool = False


Value = Union[Const, Var, Not, IsNone, Equals, BoolOp, Opaque, IsMain, AttributeOnCuda]
UNKNOWN = Opaque("")  # a runtime value that correlates with nothing
TRUE = Const(True)
IS_MAIN = IsMain()


# -- statements ----------------------------------------------------------------------------
@_compact
class Effect:
    kind: str  # one of effects.Kind
    ref: int  # node in the module's table, where a finding would be reported
    value: Value = TRUE  # for switches: the value assigned; effect happens when truthy
    detail: tuple = ()  # kind-specific data (a seed's text, an env var's name, ...)


@_compact
class Call:
    """A call that may reach project code: by qualified name, or a method on a variable."""

    ref: int
    target: str | None  # qualified name ("@.main", "utils.set_seed") or None for receiver.method
    receiver: str | None = None  # "self", "super", or a local variable name
    method: str | None = None
    args: tuple[Value, ...] = ()
    kwargs: tuple[tuple[str, Value], ...] = ()
    # `peft_config=` given and not None: whether the adapter it configures is initialised at
    # random (for a project subclass of a TRL trainer, which draws it before it seeds)
    adapter_draws: bool | None = None
    adapter_shown: bool = False  # the code shows the config itself, not a value the run decides


@_compact
class Instance:
    """`x = Foo(...)`: x is an instance of Foo (if Foo is a project class), or what the project
    function Foo returns (FunctionIR.returns); `item`: `a, b = foo()` makes b its item 1."""

    qualname: str
    item: int | None = None


@_compact
class Assign:
    """`name = value`. A dotted name (`trainer.device`) is a device stored on an object from
    outside its class: the value says whether it names CUDA (see AttributeOnCuda)."""

    name: str
    value: Union[Value, Instance]


@_compact
class Branch:
    cond: Value
    then: tuple["Stmt", ...]
    orelse: tuple["Stmt", ...]


@_compact
class Return:
    pass


@_compact
class Raise:
    """`raise`: the path leaves the function by an exception, which propagates through its
    callers (run.py) until a `try` takes it; it never goes on as if the call had returned."""


@_compact
class Try:
    """`try`: its `body`, then `handlers` (one Branch on an unknown condition per `except`
    clause: which exception comes, and which clause takes it, is a runtime matter), its `else`,
    and `finalbody`, which every path runs: one that ends normally, returns or raises."""

    body: tuple["Stmt", ...]
    handlers: tuple["Stmt", ...]
    orelse: tuple["Stmt", ...]
    finalbody: tuple["Stmt", ...]


@_compact
class ImportModule:
    ref: int
    module: str  # absolute dotted name; its top level runs once per program
    names: tuple[str, ...] = ()


@_compact
class Spawn:
    """A call that starts processes running `target` in a fresh interpreter."""

    ref: int
    target: str
    needs_spawn_method: bool = False  # plain multiprocessing.Process: spawn only if set globally


@_compact
class FunctionRef:
    """A function passed as a value (a callback): reachable, at an unknown time."""

    target: str


Stmt = Union[Effect, Call, Assign, Branch, Return, Raise, Try, ImportModule, Spawn, FunctionRef]


@_compact(frozen=False)
class FunctionIR:
    path: str  # "main", "Trainer.fit", "outer.inner"
    ref: int
    params: tuple[str, ...]
    defaults: dict[str, Value]
    body: tuple[Stmt, ...]
    is_method: bool = False
    # What its `return` statements give, one entry each: the callee that made each value (a
    # tuple's per position), None where that is not a call of a project name
    returns: tuple[tuple[str | None, ...], ...] = ()


@_compact
class DeviceSource:
    """One value an attribute of a class may hold, as far as the device goes, in the order the
    class gives them (the class body's default first, then what its methods store on `self`)."""

    on_cuda: bool  # the value, or the default of the constructor argument it comes from, names CUDA
    replaces: bool  # a plain literal that always runs: values before it are gone
    unconditional: bool  # it always runs (a value given at construction replaces when literal)
    keyword: str | None = None  # given at construction by this keyword (a field, an __init__ parameter) ...
    position: int | None = None  # ... or at this position (after self), instead of the default
    on_class: bool = False  # the class body's default: also what the attribute read on the class holds


@_compact(frozen=False)
class ClassIR:
    path: str
    bases: tuple[str, ...]  # qualified names as the module sees them
    methods: tuple[str, ...]  # in source order
    # attributes that may name a CUDA device (a value that does, or one a constructor argument
    # gives): for reads of the attribute in other modules (interpreter.devices)
    devices: tuple[tuple[str, tuple[DeviceSource, ...]], ...] = ()


@_compact(frozen=False)
class ModuleIR:
    top: tuple[Stmt, ...]  # module-level statements in order; `__main__` guards branch on IS_MAIN
    main_guard: int | None  # ref of the first top-level `if __name__ == "__main__":`
    functions: dict[str, FunctionIR] = field(default_factory=dict)
    classes: dict[str, ClassIR] = field(default_factory=dict)
    aliases: dict[str, str] = field(default_factory=dict)  # module-level name -> qualified name
    imported_modules: tuple[tuple[str, tuple[str, ...]], ...] = ()  # every import, any depth
    has_top_level_work: bool = False


def without_refs(function: FunctionIR) -> tuple:
    """What a function does, without where: its IR with every node ref left out (an edit above
    it shifts them all)."""
    return (function.path, function.params, function.defaults, _statements_without_refs(function.body), function.is_method, function.returns)


def blocks_of(statement: Try) -> tuple[tuple[Stmt, ...], ...]:
    """A `try`'s blocks, in source order."""
    return (statement.body, statement.handlers, statement.orelse, statement.finalbody)


def _statements_without_refs(statements) -> tuple:
    out = []
    for statement in statements:
        if isinstance(statement, Branch):
            statement = (statement.cond, _statements_without_refs(statement.then), _statements_without_refs(statement.orelse))
        elif isinstance(statement, Try):
            statement = ("try", *(_statements_without_refs(block) for block in blocks_of(statement)))
        elif hasattr(statement, "ref"):
            statement = replace(statement, ref=0)
        out.append(statement)
    return tuple(out)


@_compact
class ModuleTable:
    """What a module's IR names, without the statements that run: the names of its functions,
    its classes, what its names alias, its imports, its `__main__` guard. Read apart from the
    rest (ProjectModule.table): resolving a name in a module does not depend on its bodies."""

    functions: object  # the names of the module's functions (a view of ModuleIR.functions)
    classes: dict[str, ClassIR]
    aliases: dict[str, str]
    imported_modules: tuple[tuple[str, tuple[str, ...]], ...]
    main_guard: int | None
    has_top_level_work: bool

    @classmethod
    def of(cls, module: ModuleIR) -> ModuleTable:
        return cls(module.functions.keys(), module.classes, module.aliases, module.imported_modules, module.main_guard, module.has_top_level_work)

    def parts(self) -> tuple:
        """Its content, for a digest (no views, no sets)."""
        return (tuple(self.functions), self.classes, self.aliases, self.imported_modules, self.main_guard, self.has_top_level_work)
