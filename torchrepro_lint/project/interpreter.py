"""Run a program's IR abstractly: what it seeds, claims and draws, on which paths, in what order.

A program is an entry point plus everything reachable from it. The interpreter walks the entry's
statements, inlining calls to project functions with their literal arguments bound (so
`init_seeds(0, deterministic=True)` turns on the branch inside), running imported project
modules' top levels once, and splitting the path state at branches whose condition it cannot
decide. Two mechanisms keep it precise on real code:

- assumptions: a runtime condition (`args.deterministic`) gets one truth value per path, so
  `if args.deterministic: ... else: cudnn.benchmark = True` never puts both on one path, and
  `benchmark = not args.deterministic` is False wherever the claim was made;
- guards: each switch remembers the runtime conditions it was set under, so two switches under
  independent flags (`if cfg.benchmark:` / `if args.deterministic:`) are not reported together.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from functools import lru_cache
from operator import attrgetter

from torchrepro_lint.project import ir
from torchrepro_lint.project.index import ProjectIndex, ProjectModule, Symbol, note_read, record
from torchrepro_lint.project.known_apis import Kind

MAX_DEPTH = 40  # open calls (and spawns) along one path
MAX_IMPORT_DEPTH = 100  # imports running inside imports: each holds a few Python frames
MAX_STEPS = 200_000
MAX_STATES = 64
WALKS_KEPT = 4  # recordings of one import (or callback set), for programs that imported other modules before

Site = tuple  # (ProjectModule, ref): a node in some module


class _HashedOnce:
    """A frozen dataclass whose hash is computed once per object: path states are deduplicated
    millions of times a run on a large project, and each hash walked every field, occurrences
    included. The hash is not pickled (string hashes differ between processes)."""

    _key = None  # every field of the class, read at C speed (set by _hashed_once)

    def __hash__(self) -> int:
        found = self.__dict__.get("_hash")
        if found is None:
            found = self.__dict__["_hash"] = hash(type(self)._key(self))
        return found

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state.pop("_hash", None)
        return state


def _hashed_once(cls):
    """Decorates a frozen dataclass (above @dataclass, which sets a __hash__ of its own)."""
    cls._key = attrgetter(*(f.name for f in fields(cls)))
    cls.__hash__ = _HashedOnce.__hash__
    return cls


@_hashed_once
@dataclass(frozen=True)
class Occurrence(_HashedOnce):
    """An effect as it happened in a program: where it is, and where to report it."""

    site: Site  # the statement itself
    anchor: Site  # in the entry program's own code: the statement, or the call that led to it
    detail: tuple = ()
    guards: frozenset = frozenset()  # runtime conditions it happened under
    ordered: bool = True  # False inside callbacks (worker_init_fn, hooks): run at an unknown time


@_hashed_once
@dataclass(frozen=True)
class PathState(_HashedOnce):
    torch_seeded: bool = False
    consumed: Occurrence | None = None  # first torch draw before any seed on this path
    claim: Occurrence | None = None
    det_mode: bool = False
    benchmark: Occurrence | None = None  # benchmark = True in force
    cublas: bool = False
    spawn_method: bool = False
    assumptions: frozenset = frozenset()  # {(condition key, truth)}

    def evolve(self, **changes) -> PathState:
        """dataclasses.replace without its per-call field checks: called ~500k times a run."""
        new = object.__new__(PathState)
        new.__dict__.update(self.__dict__, **changes)
        new.__dict__.pop("_hash", None)  # another state: its own hash
        return new


@dataclass
class Facts:
    """What a run saw, whatever the path: effects by kind, in first-seen order."""

    effects: dict[str, dict[Site, Occurrence]] = field(default_factory=dict)
    late_seeds: dict[Site, Occurrence] = field(default_factory=dict)  # anchor -> consumption
    final_states: list[PathState] = field(default_factory=list)
    spawns: list[tuple[Occurrence, bool, "Facts"]] = field(default_factory=list)
    truncated: bool = False
    modules: set = field(default_factory=set)  # paths of the modules whose code ran
    functions: set = field(default_factory=set)  # (module path, function path) of the functions called

    def add(self, kind: str, occurrence: Occurrence) -> None:
        self.effects.setdefault(kind, {}).setdefault(occurrence.site, occurrence)

    def of(self, *kinds: str) -> list[Occurrence]:
        return [o for kind in kinds for o in self.effects.get(kind, {}).values()]

    def has(self, *kinds: str) -> bool:
        return any(self.effects.get(kind) for kind in kinds)

    def merge(self, other: Facts) -> None:
        for kind, occurrences in other.effects.items():
            for occurrence in occurrences.values():
                self.add(kind, occurrence)
        for anchor, consumed in other.late_seeds.items():
            self.late_seeds.setdefault(anchor, consumed)
        self.truncated = self.truncated or other.truncated
        self.modules |= other.modules
        self.functions |= other.functions


@dataclass
class Frame:
    module: ProjectModule
    env: dict = field(default_factory=dict)
    self_class: Symbol | None = None
    def_class: Symbol | None = None
    anchor: Site | None = None  # set once the call chain has left the entry module


class Interpreter:
    def __init__(self, project: ProjectIndex, entry: ProjectModule) -> None:
        self.project = project
        self.entry = entry
        self.as_main = False  # whether `entry` runs as `__main__` (its guards run)
        # Carried into spawned processes, whose walk nests inside this one's:
        self.spawned: frozenset = frozenset()  # spawn targets of the processes that started this one
        self.depth = 0  # calls and spawns open in those processes
        self.importing = 0  # imports running inside one another
        self.facts = Facts()
        self.steps = 0
        self.stack: list[tuple[int, str]] = []
        self.guards: list[tuple[str, bool]] = []
        self.ordered = True
        self.imported: set[int] = set()
        self.callbacks: dict[tuple[int, str], Symbol] = {}
        self._effectful: dict[tuple[int, str], bool] = {}
        self._lookups: set[int] | None = None  # while a _Recording runs: modules tested for imported-ness

    # -- entry points ------------------------------------------------------------------
    def run_module(self, *, as_main: bool, function: str | None = None) -> Facts:
        """`as_main`: the entry runs as a script; False where a console script imports it to call `function`."""
        frame = Frame(self.entry)
        self.as_main = as_main
        self.imported.add(id(self.entry))
        self.facts.modules.add(self.entry.path)
        states, returned = self.block(self.entry.ir.top, [PathState()], frame)
        states += returned
        if function is not None:
            symbol = self.project.resolve("@." + function, self.entry)
            if symbol is not None and symbol.function is not None:
                states = self.invoke(symbol, (), (), states, frame, ref=symbol.function.ref)
        self.facts.final_states.extend(states)
        self.run_callbacks()
        return self.facts

    def run_callbacks(self) -> None:
        """Callbacks run at a time we cannot place: their effects count, their order does not.
        Importing a library registers the same callbacks in each of its scripts (torch: most of
        a program's time): their run is recorded once and replayed (_CallbackRun)."""
        self.ordered = False
        if self.depth or self.spawned or self.stack or self.guards or not self.callbacks:
            self._run_callbacks()
            return
        runs = self.project.callback_runs.setdefault(tuple(self.callbacks), [])
        for run in runs:
            if run.replays_in(self):
                run.replay(self)
                return
        run = _CallbackRun.record(self)
        if run.replays_in(self, recorded=True) and len(runs) < WALKS_KEPT:
            runs.append(run)
        run.replay(self)

    def _run_callbacks(self) -> None:
        done: set[tuple[int, str]] = set()
        while len(done) < len(self.callbacks):
            for key, symbol in list(self.callbacks.items()):
                if key not in done:
                    done.add(key)
                    self.invoke(symbol, (), (), [PathState(torch_seeded=True)], Frame(symbol.module), ref=None)

    # -- statements --------------------------------------------------------------------
    def block(self, statements, states: list[PathState], frame: Frame):
        returned: list[PathState] = []
        for statement in statements:
            if not states:
                break
            self.steps += 1
            if self.steps > MAX_STEPS:
                self.facts.truncated = True
                break
            states, more = self.statement(statement, states, frame)
            returned += more
        return states, returned

    def statement(self, statement, states: list[PathState], frame: Frame):
        if isinstance(statement, ir.Effect):
            return self.effect(statement, states, frame), []
        if isinstance(statement, ir.Call):
            return self.call(statement, states, frame), []
        if isinstance(statement, ir.Assign):
            frame.env[statement.name] = (
                statement.value if isinstance(statement.value, ir.Instance) else self.evaluate(statement.value, frame)
            )
            return states, []
        if isinstance(statement, ir.Branch):
            return self.branch(statement, states, frame)
        if isinstance(statement, ir.Return):
            return [], states
        if isinstance(statement, ir.ImportModule):
            return self.import_module(statement, states, frame), []
        if isinstance(statement, ir.Spawn):
            self.spawn(statement, states, frame)
            return states, []
        if isinstance(statement, ir.FunctionRef):
            symbol = self.project.resolve(statement.target, frame.module)
            if symbol is not None and symbol.function is not None:
                self.callbacks.setdefault((id(symbol.module), symbol.path), symbol)
            return states, []
        return states, []

    def branch(self, branch: ir.Branch, states: list[PathState], frame: Frame):
        value = self.evaluate(branch.cond, frame)
        if isinstance(value, ir.Const):
            return self.block(branch.then if value.value else branch.orelse, states, frame)
        key, polarity = _condition_key(value)
        out: list[PathState] = []
        returned: list[PathState] = []
        untouched = True
        for truth, body in ((True, branch.then), (False, branch.orelse)):
            wanted = truth == polarity  # truth of the key itself on this arm
            arm = _assume_all(states, key, wanted)
            if not arm:
                continue
            if key:
                self.guards.append((key, wanted))
            try:
                arm_states, arm_returned = self.block(body, arm, frame)
            finally:
                if key:
                    self.guards.pop()
            untouched = untouched and not arm_returned and _same_states(arm_states, arm)
            out += arm_states
            returned += arm_returned
        if untouched:
            # Neither arm changed a path: splitting them on the condition would only record a
            # truth value that a later test of it records again, and double the paths to walk
            # (most branches of a library's top level). Effects and guards are kept in the facts.
            return states, []
        return _bounded(out), returned

    # -- effects -----------------------------------------------------------------------
    def occurrence(self, frame: Frame, ref: int, detail: tuple = (), extra_guard=None) -> Occurrence:
        site = (frame.module, ref)
        guards = frozenset(self.guards) | (frozenset([extra_guard]) if extra_guard else frozenset())
        return Occurrence(site, frame.anchor or site, detail, guards, self.ordered)

    def effect(self, effect: ir.Effect, states: list[PathState], frame: Frame) -> list[PathState]:
        value = self.evaluate(effect.value, frame)
        out: list[PathState] = []
        for state in states:
            for truth, split_state, guard in _split(value, state):
                out.append(self.apply(effect, truth, split_state, frame, guard))
        return _bounded(out)

    def apply(self, effect: ir.Effect, truth: bool, state: PathState, frame: Frame, guard) -> PathState:
        kind = effect.kind
        if kind == Kind.BENCHMARK:
            if not truth:
                return state.evolve(benchmark=None)
            occurrence = self.occurrence(frame, effect.ref, extra_guard=guard)
            self.facts.add(kind, occurrence)
            return state.evolve(benchmark=occurrence)
        if not truth:
            return state
        occurrence = self.occurrence(frame, effect.ref, effect.detail, guard)
        self.facts.add(kind, occurrence)
        if kind == Kind.SEED_TORCH:
            if self.ordered and not state.torch_seeded and state.consumed is not None:
                seed_names = set(effect.detail[1]) if len(effect.detail) > 1 else set()
                if not seed_names & set(state.consumed.detail):
                    self.facts.late_seeds.setdefault(occurrence.anchor, state.consumed)
            return state.evolve(torch_seeded=True, consumed=None)
        if kind in (Kind.DRAW, Kind.MODULE_INIT):
            if not state.torch_seeded and state.consumed is None and self.ordered:
                return state.evolve(consumed=occurrence)
            return state
        if kind == Kind.CHECKPOINT:
            # Weights loaded over a random init: that init no longer matters.
            if state.consumed is not None and state.consumed.site in self.facts.effects.get(Kind.MODULE_INIT, {}):
                return state.evolve(consumed=None)
            return state
        if kind in (Kind.CLAIM, Kind.CUDNN_DETERMINISTIC, Kind.DET_MODE, Kind.DET_MODE_WARN):
            claim = state.claim or occurrence
            det_mode = state.det_mode or kind in (Kind.DET_MODE, Kind.DET_MODE_WARN)
            return state.evolve(claim=claim, det_mode=det_mode)
        if kind == Kind.ENV_SET and effect.detail[:1] == ("CUBLAS_WORKSPACE_CONFIG",):
            return state.evolve(cublas=True)
        if kind == Kind.SPAWN_METHOD:
            return state.evolve(spawn_method=True)
        return state

    # -- calls -------------------------------------------------------------------------
    def call(self, call: ir.Call, states: list[PathState], frame: Frame) -> list[PathState]:
        target = self.callee(call, frame)
        if target is None:
            return states
        symbol, self_class, skip_first = target
        args = tuple(self.evaluate(a, frame) for a in call.args)
        kwargs = tuple((k, self.evaluate(v, frame)) for k, v in call.kwargs)
        if symbol.klass is not None:  # instantiation runs __init__
            init = self.project.method(symbol, "__init__")
            if init is None:
                return states
            return self.invoke(init, args, kwargs, states, frame, call.ref, self_class=symbol, skip_first=True)
        return self.invoke(symbol, args, kwargs, states, frame, call.ref, self_class=self_class, skip_first=skip_first)

    def callee(self, call: ir.Call, frame: Frame):
        """(symbol, self class, whether the first parameter is bound) or None."""
        if call.target is not None:
            symbol = self.project.resolve(call.target, frame.module)
            if symbol is None or (symbol.function is None and symbol.klass is None):
                return None
            bound = symbol.function is not None and symbol.function.is_method and frame.self_class is not None
            return symbol, frame.self_class if bound else None, False
        if call.receiver == "self" and frame.self_class is not None:
            method = self.project.method(frame.self_class, call.method)
            return (method, frame.self_class, True) if method else None
        if call.receiver == "super" and frame.def_class is not None:
            method = self.project.method(frame.def_class, call.method, skip_self=True)
            return (method, frame.self_class, True) if method else None
        bound = frame.env.get(call.receiver)
        if isinstance(bound, ir.Instance):
            klass = self.project.resolve(bound.qualname, frame.module)
            if klass is not None and klass.klass is not None:
                method = self.project.method(klass, call.method)
                return (method, klass, True) if method else None
        return None

    def invoke(self, symbol: Symbol, args, kwargs, states, frame: Frame, ref, self_class=None, skip_first=False):
        function = symbol.function
        key = (id(symbol.module), symbol.path)
        if function is None or key in self.stack or self.depth + len(self.stack) >= MAX_DEPTH:
            return states
        self.facts.functions.add((symbol.module.path, symbol.path))
        if not self.effectful(symbol):
            return states
        params = function.params[1:] if skip_first and function.params else function.params
        env = dict(function.defaults)
        for name, value in zip(params, args):
            env[name] = value
        for name, value in kwargs:
            env[name] = value
        anchor = frame.anchor
        if anchor is None and ref is not None and symbol.module is not self.entry:
            anchor = (frame.module, ref)  # the call in the entry program that leaves it
        def_class = self.project.resolve("@." + symbol.path.rpartition(".")[0], symbol.module) if function.is_method else None
        callee_frame = Frame(symbol.module, env, self_class or def_class, def_class, anchor)
        self.facts.modules.add(symbol.module.path)
        self.stack.append(key)
        try:
            normal, returned = self.block(function.body, states, callee_frame)
        finally:
            self.stack.pop()
        return _bounded(normal + returned)

    def effectful(self, symbol: Symbol, depth: int = 0) -> bool:
        """Whether a function can do anything we track; pure helpers are not walked again."""
        key = (id(symbol.module), symbol.path)
        if key in self._effectful:
            return self._effectful[key]
        if depth >= MAX_DEPTH:
            return True  # a call chain too long to look down: walk it (invoke has the same bound)
        self._effectful[key] = True  # optimistic while recursing
        self._effectful[key] = any(self._stmt_effectful(s, symbol.module, depth + 1) for s in symbol.function.body)
        return self._effectful[key]

    def _stmt_effectful(self, statement, module: ProjectModule, depth: int) -> bool:
        if isinstance(statement, ir.Branch):
            return any(self._stmt_effectful(s, module, depth) for s in (*statement.then, *statement.orelse))
        if isinstance(statement, ir.Call):
            if statement.target is None:
                return True
            target = self.project.resolve(statement.target, module)
            if target is None:
                return False
            if target.klass is not None:
                init = self.project.method(target, "__init__")
                return init is not None and self.effectful(init, depth)
            return target.function is not None and self.effectful(target, depth)
        return not isinstance(statement, (ir.Assign, ir.Return))

    def import_module(self, statement: ir.ImportModule, states, frame: Frame):
        lookups = self._lookups
        for module in self.project.modules_imported(frame.module, statement.ref, _imported_names(statement)):
            if lookups is not None:
                lookups.add(id(module))
            if id(module) in self.imported:
                continue
            inert = inert_import(self.project, module, self.effectful) if len(self.stack) < MAX_DEPTH else None
            if inert is not None:  # nothing to walk: only what it brings in and the helpers it calls
                for brought in inert.modules:
                    brought.ir  # recorded as read: the cached program depends on it staying inert
                    if lookups is not None:
                        lookups.add(id(brought))
                    if id(brought) not in self.imported:
                        self.imported.add(id(brought))
                        self.facts.modules.add(brought.path)
                self.facts.functions |= inert.functions
                continue
            if self.importing >= MAX_IMPORT_DEPTH:
                self.facts.truncated = True  # its effects are missing: rules that need them all stay quiet
                continue
            self.imported.add(id(module))  # its `__main__` guards do not run: IS_MAIN holds only in the entry
            self.facts.modules.add(module.path)
            anchor = frame.anchor or (frame.module, statement.ref)
            self.importing += 1
            try:
                states = self.walk_import(module, states, anchor)
            finally:
                self.importing -= 1
        return states

    def walk_import(self, module: ProjectModule, states: list[PathState], anchor: Site) -> list[PathState]:
        """Run an imported module's top level. A program's first imports (`import torch` in each
        of a library's 100 scripts) walk the same modules from the same fresh start: such a walk
        is recorded once and replayed, re-anchored at this program's import statement."""
        if not self._starts_fresh(states):
            walked, returned = self.block(module.ir.top, states, Frame(module, anchor=anchor))
            return walked + returned
        walks = self.project.import_walks.setdefault(id(module), [])
        for walk in walks:
            if walk.replays_in(self):
                return walk.replay(self, anchor)
        walk = _ImportWalk.record(self, module, states, anchor)
        if walk.replays_in(self, recorded=True) and len(walks) < WALKS_KEPT:
            walks.append(walk)
        return walk.replay(self, anchor)

    def _starts_fresh(self, states: list[PathState]) -> bool:
        """Whether an import walked now depends only on the project and on which modules are
        already imported: at the entry's top level, nothing tracked has happened yet."""
        return (
            self.importing == 1 and not self.stack and not self.guards and not self.spawned and self.depth == 0
            and self.ordered and not self._effectful and not self.callbacks
            and len(states) == 1 and states[0] == _FRESH
            and not self.facts.effects.get(Kind.MODULE_INIT)  # (read by a checkpoint load)
        )

    def spawn(self, statement: ir.Spawn, states, frame: Frame) -> None:
        if statement.needs_spawn_method and not any(s.spawn_method for s in states):
            return
        symbol = self.project.resolve(statement.target, frame.module)
        if symbol is None or symbol.function is None:
            return
        key = (id(symbol.module), symbol.path)
        if key in self.spawned:
            return  # this process (or one that started it) already runs `target`: a child would repeat it
        if self.depth + len(self.stack) >= MAX_DEPTH:
            return
        occurrence = self.occurrence(frame, statement.ref)
        parent_set_up = any(s.torch_seeded or s.claim is not None for s in states)
        child = self.child(symbol.module, key)
        child_frame = Frame(symbol.module, anchor=frame.anchor or occurrence.site)
        child.imported.add(id(symbol.module))
        # The child re-imports the target's module, not as `__main__` (as_main stays False: its
        # guards do not run), then calls the target.
        start, _ = child.block(symbol.module.ir.top, [PathState()], child_frame)
        final = child.invoke(symbol, (), (), start, child_frame, ref=None)
        child.facts.final_states.extend(final)
        child.run_callbacks()
        self.steps = child.steps
        self.facts.spawns.append((occurrence, parent_set_up, child.facts))
        self.facts.merge(child.facts)

    def child(self, module: ProjectModule, key) -> Interpreter:
        """A spawned process starts from a fresh interpreter: fresh RNG state, default flags. Its
        walk nests inside ours, so the bounds on steps and nesting carry over."""
        child = Interpreter(self.project, module)
        child.steps = self.steps
        child.spawned = self.spawned | {key}
        child.depth = self.depth + len(self.stack) + 1
        child.importing = self.importing
        return child

    # -- values ------------------------------------------------------------------------
    def evaluate(self, value: ir.Value, frame: Frame):
        if isinstance(value, ir.IsMain):
            return ir.Const(self.as_main and frame.module is self.entry)
        if isinstance(value, ir.Var):
            bound = frame.env.get(value.name)
            if bound is None:
                return ir.Opaque(value.name)
            return bound if not isinstance(bound, ir.Instance) else ir.Opaque(value.name)
        if isinstance(value, ir.Not):
            inner = self.evaluate(value.operand, frame)
            if isinstance(inner, ir.Const):
                return ir.Const(not inner.value)
            return ir.Not(inner)
        if isinstance(value, ir.IsNone):
            inner = self.evaluate(value.operand, frame)
            if isinstance(inner, ir.Const):
                return ir.Const((inner.value is None) != value.negated)
            return ir.IsNone(inner, value.negated)
        if isinstance(value, ir.BoolOp):
            # `deterministic and check_version(...)`: decided by a literal operand, else the rest.
            deciding = value.op == "or"  # the truth value that decides the whole expression
            rest = []
            for operand in (self.evaluate(o, frame) for o in value.operands):
                if isinstance(operand, ir.Const):
                    if bool(operand.value) == deciding:
                        return ir.Const(deciding)
                    continue
                rest.append(operand)
            if not rest:
                return ir.Const(not deciding)
            return rest[0] if len(rest) == 1 else ir.Opaque(value.text)
        return value


_FRESH = PathState()


@dataclass
class _Recording:
    """What part of one program's run did, to be replayed in another program. The part reads
    nothing of the program but which modules are already imported (`looked_up`, and of those
    `imported_then`) and which functions it knows to be effectful, so it replays wherever those
    are the same and the program's entry module was never run or looked up by it."""

    looked_up: frozenset  # ids of the modules whose imported-ness it tested
    imported_then: frozenset  # those that were imported already
    imported: frozenset  # ids it imported
    facts: Facts
    steps: int
    effectful_before: dict
    effectful: dict  # the interpreter's memo after it
    callbacks: dict  # the callbacks registered after it
    reads: frozenset  # what it read (project.index.record), for the cached program's validity

    @staticmethod
    def capture(interpreter: Interpreter, run) -> tuple[dict, object]:
        """Call run() with the interpreter's facts and lookups captured, then undo what it did to
        the interpreter (replay redoes it). (The recording's fields, run's result.)"""
        effectful_before, callbacks_before = dict(interpreter._effectful), dict(interpreter.callbacks)
        imported_before, steps_before = frozenset(interpreter.imported), interpreter.steps
        outer_facts = interpreter.facts
        interpreter.facts, interpreter._lookups = Facts(), set()
        try:
            with record() as reads:
                result = run()
            facts, looked_up = interpreter.facts, frozenset(interpreter._lookups)
        finally:
            interpreter.facts, interpreter._lookups = outer_facts, None
        imported = frozenset(interpreter.imported - imported_before)
        fields = dict(
            looked_up=looked_up, imported_then=looked_up & imported_before, imported=imported, facts=facts,
            steps=interpreter.steps - steps_before, effectful_before=effectful_before,
            effectful=dict(interpreter._effectful), callbacks=dict(interpreter.callbacks), reads=frozenset(reads),
        )
        interpreter.imported -= imported
        interpreter.steps = steps_before
        interpreter._effectful.clear()
        interpreter._effectful.update(effectful_before)
        interpreter.callbacks.clear()
        interpreter.callbacks.update(callbacks_before)
        return fields, result

    def replays_in(self, interpreter: Interpreter, recorded: bool = False) -> bool:
        """`recorded`: asked right after recording, in the program that recorded it. (A module
        added to the project clears the recordings: ProjectIndex._forget_resolution.)"""
        entry = interpreter.entry
        return (
            id(entry) not in self.looked_up
            and entry.path not in self.facts.modules  # its `__main__` guards, its anchors would differ
            and interpreter.steps + self.steps <= MAX_STEPS  # (nothing cut short by the bound)
            and (
                recorded
                or self.looked_up & interpreter.imported == self.imported_then
                and interpreter._effectful == self.effectful_before
            )
        )

    def _redo(self, interpreter: Interpreter, facts: Facts) -> None:
        for read in self.reads:
            note_read(*read)
        interpreter.imported |= self.imported
        interpreter.steps += self.steps
        interpreter._effectful.update(self.effectful)
        interpreter.callbacks.update(self.callbacks)
        interpreter.facts.merge(facts)
        interpreter.facts.spawns += facts.spawns


@dataclass
class _ImportWalk(_Recording):
    """Walking one import from a program's fresh start (`_starts_fresh`: no effectful function
    known yet, no callback); its occurrences are anchored at the import statement that ran it."""

    anchor: Site
    states: list

    @classmethod
    def record(cls, interpreter: Interpreter, module: ProjectModule, states, anchor: Site) -> _ImportWalk:
        def walk():
            walked, returned = interpreter.block(module.ir.top, states, Frame(module, anchor=anchor))
            return walked + returned

        fields, walked = cls.capture(interpreter, walk)
        return cls(**fields, anchor=anchor, states=walked)

    def replay(self, interpreter: Interpreter, anchor: Site) -> list[PathState]:
        moved = _Reanchored(self.anchor, anchor)
        self._redo(interpreter, moved.facts(self.facts))
        return [moved.state(state) for state in self.states]


@dataclass
class _CallbackRun(_Recording):
    """Running a program's callbacks: from a seeded state, out of order, anchored where they are.
    Kept under the callbacks it ran (Interpreter.run_callbacks)."""

    @classmethod
    def record(cls, interpreter: Interpreter) -> _CallbackRun:
        fields, _ = cls.capture(interpreter, interpreter._run_callbacks)
        return cls(**fields)

    def replay(self, interpreter: Interpreter) -> None:
        self._redo(interpreter, self.facts)


class _Reanchored:
    """Occurrences, states and facts with one anchor replaced (shared objects stay shared)."""

    def __init__(self, old: Site, new: Site) -> None:
        self.old, self.new = old, new
        self._done: dict[int, Occurrence] = {}

    def occurrence(self, occurrence: Occurrence | None) -> Occurrence | None:
        if occurrence is None or self.old == self.new or occurrence.anchor != self.old:
            return occurrence
        found = self._done.get(id(occurrence))
        if found is None:
            found = self._done[id(occurrence)] = Occurrence(
                occurrence.site, self.new, occurrence.detail, occurrence.guards, occurrence.ordered
            )
        return found

    def state(self, state: PathState) -> PathState:
        consumed, claim, benchmark = state.consumed, state.claim, state.benchmark
        if consumed is None and claim is None and benchmark is None:
            return state
        return state.evolve(
            consumed=self.occurrence(consumed), claim=self.occurrence(claim), benchmark=self.occurrence(benchmark)
        )

    def facts(self, facts: Facts) -> Facts:
        return Facts(
            {kind: {site: self.occurrence(o) for site, o in found.items()} for kind, found in facts.effects.items()},
            {(self.new if a == self.old else a): self.occurrence(o) for a, o in facts.late_seeds.items()},
            [self.state(s) for s in facts.final_states],
            [(self.occurrence(o), set_up, self.facts(child)) for o, set_up, child in facts.spawns],
            facts.truncated,
            set(facts.modules),
            set(facts.functions),
        )


def inert_import(project: ProjectIndex, module: ProjectModule, effectful) -> Inert | None:
    """What importing `module` brings in, when running its top level (and that of every module
    it imports) does nothing the interpreter tracks: definitions, assignments, calls of helpers
    that do nothing tracked, branches between such. None when there is something to walk.
    Most of a library is inert: without this, each program walked every module it imports
    again (torch's 160 programs: 2M module imports walked). `effectful(symbol)` is the
    interpreter's test for functions."""
    return _inert(project, module, project.inert_imports, effectful)


@dataclass(frozen=True)
class Inert:
    modules: tuple  # every module the import brings in, itself included
    functions: frozenset  # (module path, function path) of the helpers its top levels call


def _inert(project, root, memo, effectful) -> Inert | None:
    if id(root) in memo:
        return memo[id(root)]
    modules: dict = {}
    functions: set = set()
    stack = [root]
    while stack:
        module = stack.pop()
        if id(module) in modules:
            continue
        known = memo.get(id(module), _UNKNOWN)
        if known is None:
            memo[id(root)] = None
            return None
        if known is not _UNKNOWN:  # an inert module met before: its whole closure
            modules.update((id(m), m) for m in known.modules)
            functions |= known.functions
            continue
        modules[id(module)] = module
        imports = _inert_top(project, module, module.ir.top, _instances(module.ir.top), functions, effectful)
        if imports is None:
            memo[id(module)] = memo[id(root)] = None
            return None
        for name in imports:
            imported = project.module_named(name, module)
            if imported is not None and id(imported) not in modules:
                stack.append(imported)
    memo[id(root)] = Inert(tuple(modules.values()), frozenset(functions))
    return memo[id(root)]


def _inert_top(project, module, statements, instances, functions: set, effectful) -> list[str] | None:
    """The names a module's inert top level imports (adding the helpers it calls to
    `functions`), or None if it does anything tracked."""
    imports: list[str] = []
    for statement in statements:
        if isinstance(statement, ir.Assign):
            continue
        if isinstance(statement, ir.ImportModule):
            imports += _imported_names(statement)
        elif isinstance(statement, ir.Branch):
            for arm in _arms_when_imported(statement):
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
    elif symbol is not None and symbol.function is None:
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
    return out


_UNKNOWN = object()


def _imported_names(statement: ir.ImportModule) -> tuple[str, ...]:
    return _names_imported(statement.module, statement.names)


@lru_cache(maxsize=65536)  # every program walks the same imports again
def _names_imported(module: str, names: tuple[str, ...]) -> tuple[str, ...]:
    parts = module.split(".")
    return tuple(".".join(parts[: i + 1]) for i in range(len(parts))) + tuple(f"{module}.{n}" for n in names)


def _condition_key(value) -> tuple[str, bool]:
    """A runtime condition as (key, polarity): `not args.det` is ("args.det", False)."""
    polarity = True
    while isinstance(value, ir.Not):
        value = value.operand
        polarity = not polarity
    if isinstance(value, ir.IsNone):
        inner_key, inner_polarity = _condition_key(value.operand)
        return (f"{inner_key} is None", polarity != value.negated) if inner_key else ("", True)
    if isinstance(value, ir.Opaque):
        return value.key, polarity
    return "", True


def _assume(state: PathState, key: str, truth: bool) -> PathState | None:
    if not key:
        return state
    if (key, not truth) in state.assumptions:
        return None  # this arm contradicts what the path already took
    if (key, truth) in state.assumptions:
        return state  # (the same state: a copy would cost an allocation and a hash later)
    return state.evolve(assumptions=state.assumptions | {(key, truth)})


def _assume_all(states: list[PathState], key: str, truth: bool) -> list[PathState]:
    """`_assume` over many states (the hot loop of every branch)."""
    if not key:
        return list(states)
    held, contradicted = (key, truth), (key, not truth)
    out = []
    for state in states:
        assumptions = state.assumptions
        if contradicted in assumptions:
            continue
        out.append(state if held in assumptions else state.evolve(assumptions=assumptions | {held}))
    return out


def _same_states(after: list[PathState], before: list[PathState]) -> bool:
    return len(after) == len(before) and all(a is b or a == b for a, b in zip(after, before))


def _split(value, state: PathState):
    """[(truth, state, guard)]: a runtime value is true on some paths and false on others."""
    if isinstance(value, ir.Const):
        return [(bool(value.value), state, None)]
    key, polarity = _condition_key(value)
    if not key:
        return [(True, state, None), (False, state, None)]
    out = []
    for truth in (True, False):
        assumed = _assume(state, key, truth)
        if assumed is not None:
            out.append((truth == polarity, assumed, (key, truth)))
    return out


def _bounded(states: list[PathState]) -> list[PathState]:
    if len(states) < 2:
        return states  # most paths never split: no hashing
    unique = list(dict.fromkeys(states))
    if len(unique) > 1:
        unique = _joined(unique)
    if len(unique) > MAX_STATES:
        # Forget path assumptions before forgetting facts.
        unique = list(dict.fromkeys(s.evolve(assumptions=frozenset()) for s in unique))
    return unique


_SWITCHES = attrgetter(*(f.name for f in fields(PathState) if f.name != "assumptions"))


def _joined(states: list[PathState]) -> list[PathState]:
    """The same paths in fewer states. A state stands for every run whose runtime conditions agree
    with its assumptions, so two states with the same switches whose assumptions differ only in
    one condition's truth are one state without it (`if not ok: return` splits a function's paths,
    its end joins them), and a state whose assumptions include another's adds no run. Without
    this, paths double at every such branch until MAX_STATES forgets every assumption."""
    groups: dict[tuple, list[PathState]] = {}
    for state in states:
        groups.setdefault(_SWITCHES(state), []).append(state)
    if len(groups) == len(states):
        return states
    out: list[PathState] = []
    for group in groups.values():
        if len(group) == 1:
            out += group
            continue
        common = frozenset.intersection(*(s.assumptions for s in group))
        cubes = _merged_cubes([s.assumptions - common for s in group])
        if len(cubes) == len(group):
            out += group
        else:
            out += [group[0].evolve(assumptions=common | cube) for cube in cubes]
    return out


def _merged_cubes(cubes: list[frozenset]) -> list[frozenset]:
    """Conjunctions of (condition, truth) whose union is the same set of runs, in fewer parts:
    `A and c` with `A and not c` is `A`; `A and B` next to `A` adds nothing."""
    merged = True
    while merged:
        merged = False
        cubes = list(dict.fromkeys(cubes))
        position = {cube: i for i, cube in enumerate(cubes)}
        for i, cube in enumerate(cubes):
            if cube is None:
                continue
            for condition, truth in cube:
                rest = cube - {(condition, truth)}
                partner = rest | {(condition, not truth)}
                j = position.get(partner)
                if j is not None and cubes[j] == partner:  # (not merged away this round)
                    cubes[i], cubes[j] = rest, None
                    merged = True
                    break
        cubes = [cube for cube in cubes if cube is not None]
    return [cube for cube in cubes if not any(other < cube for other in cubes)]
