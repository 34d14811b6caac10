"""The abstract run of one program (`Interpreter`): statements, effects, calls, imports, spawns.

The package's __init__ says what the run tracks and how it stays precise; states.py holds what
it carries along each path, calls.py how the run goes into project functions and imported
modules, recordings.py how an import walk is replayed, inert.py the imports it takes without a
walk.
"""

from __future__ import annotations

from torchrepro_lint.project import ir
from torchrepro_lint.project.index import ProjectIndex
from torchrepro_lint.project.interpreter.calls import ProjectCalls
from torchrepro_lint.project.interpreter.devices import attribute_on_cuda
from torchrepro_lint.project.interpreter.kept_calls import kept_prefix, prefix_key
from torchrepro_lint.project.interpreter.recordings import CallbackRun
from torchrepro_lint.project.interpreter import resumes  # TRP108
from torchrepro_lint.project.interpreter import autotune  # TRP207
from torchrepro_lint.project.interpreter import empty_init
from torchrepro_lint.project.interpreter.states import (
    MAX_DEPTH,
    MAX_STEPS,
    WALKS_KEPT,
    Facts,
    Frame,
    Occurrence,
    PathState,
    assume_all,
    bounded,
    condition_key,
    same_states,
    split,
)
from torchrepro_lint.project.known_apis import MAKES_A_SEED, Kind, names_a_seed
from torchrepro_lint.project.modules import ProjectModule, Symbol


class Interpreter(ProjectCalls):
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
        self.effectful_memo: dict[tuple[int, str], bool] = {}
        self.binds_only_memo: dict[int, bool] = {}  # id(ir.Branch) -> binds_only
        self.lookups: set[int] | None = None  # while a recording (recordings.py) runs: modules tested for imported-ness
        self.keeping = False  # while the innermost recording is a kept call's (kept_calls.py)
        # Paths an exception is taking out of what runs now (see `caught`): they skip the rest of
        # each block and call until a `try` takes them, or the program ends on them.
        self.raised: list[PathState] = []
        # While a kept call is recorded (kept_calls.py), the program's module initialisations
        # before it: its facts start empty, and a checkpoint load asks about earlier inits.
        self.inits_before: dict = {}

    # -- entry points ------------------------------------------------------------------
    def run_module(self, *, as_main: bool, function: str | None = None) -> Facts:
        """`as_main`: the entry runs as a script; False where a console script imports it to call `function`."""
        frame = Frame(self.entry)
        self.as_main = as_main
        self.imported.add(id(self.entry))
        self.facts.modules.add(self.entry.path)
        states, returned = self.block(self.entry.top, [PathState()], frame)
        states += returned
        if function is not None:
            symbol = self.project.resolve("@." + function, self.entry)
            if symbol is not None and symbol.is_function:
                states = self.invoke(symbol, (), (), states, frame, ref=symbol.function.ref)
        # A path that raised out of the program ends there; what it did before stays.
        self.facts.end_paths(bounded(states + self.raised))
        self.raised = []
        self.run_callbacks()
        return self.facts

    def run_callbacks(self) -> None:
        """Callbacks run at a time we cannot place: their effects count, their order does not.
        Importing a library registers the same callbacks in each of its scripts (torch: most of
        a program's time): their run is recorded once and replayed (CallbackRun)."""
        self.ordered = False
        if self.depth or self.spawned or self.stack or self.guards or not self.callbacks:
            self.invoke_callbacks()
            return
        runs = self.project.callback_runs.setdefault(tuple(self.callbacks), [])
        for run in runs:
            if run.replays_in(self):
                run.replay(self)
                return
        run = CallbackRun.record(self)
        if run.replays_in(self, recorded=True) and len(runs) < WALKS_KEPT:
            runs.append(run)
        run.replay(self)

    def invoke_callbacks(self) -> None:
        done: set[tuple[int, str]] = set()
        outer, self.raised = self.raised, []  # (what a callback raises is its caller's, out of view)
        try:
            while len(done) < len(self.callbacks):
                for key, symbol in list(self.callbacks.items()):
                    if key not in done:
                        done.add(key)
                        self.invoke(symbol, (), (), [PathState(torch_seeded=True)], Frame(symbol.module), ref=None)
        finally:
            self.raised = outer

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
        if isinstance(statement, ir.Raise):
            self.raised += states
            return [], []
        if isinstance(statement, ir.Try):
            return self.try_statement(statement, states, frame)
        if isinstance(statement, ir.ImportModule):
            return self.import_module(statement, states, frame), []
        if isinstance(statement, ir.Spawn):
            self.spawn(statement, states, frame)
            return states, []
        if isinstance(statement, ir.FunctionRef):
            symbol = self.project.resolve(statement.target, frame.module)
            if symbol is not None and symbol.is_function:
                self.callbacks.setdefault((id(symbol.module), symbol.path), symbol)
            return states, []
        return states, []

    def caught(self, statements, states: list[PathState], frame: Frame):
        """Run `statements` with the paths an exception takes out of them held apart:
        (normal, returned, raised)."""
        outer, self.raised = self.raised, []
        try:
            normal, returned = self.block(statements, states, frame)
            raised = self.raised
        finally:
            self.raised = outer
        return normal, returned, bounded(raised)

    def caught_after_prefix(self, statements, states: list[PathState], frame: Frame, symbol: Symbol, length: int, site):
        """`caught(statements, ...)`, with up to the first `length` statements run as a kept
        prefix (kept_calls.kept_prefix): replayed, with the bindings they leave, where the last
        run of the same first statements from the same bindings and paths still holds. The two
        blocks walk the statements one after the other as one block would (its early end when
        no path is left, or when the step bound is reached, carries over to the second)."""
        outer, self.raised = self.raised, []
        try:
            first = statements[:length]
            key = prefix_key(self, symbol, frame, site, states, first)

            def run():
                walked, returned = self.block(first, states, frame)
                return walked, returned, tuple(frame.env.items())

            kept, covered = kept_prefix(self, key, run)
            frame.env.clear()
            frame.env.update(kept.env_after)
            normal, returned = self.block(statements[covered:], list(kept.states), frame)
            returned = [*kept.returned, *returned]
            raised = self.raised
        finally:
            self.raised = outer
        return normal, returned, bounded(raised)

    def try_statement(self, statement: ir.Try, states: list[PathState], frame: Frame):
        """Where a `try` has handlers, a path the body raised on is taken to be caught: it goes on
        to the handlers (each a branch on an unknown condition, as for a path that ended the body
        normally) and after the `try`. The clauses' exception types are not read, so a path no
        handler would take goes on too: too many paths, never too few. Without handlers (`try:
        ... finally:`), it runs the `finally` and goes on raising. The `finally` runs on every
        path: one that ends normally, returns or raises."""
        normal, returned, raised = self.caught(statement.body, states, frame)
        if statement.handlers:
            normal, more, raised = self.caught((*statement.handlers, *statement.orelse), bounded(normal + raised), frame)
            returned += more
        if not statement.finalbody:
            self.raised += raised
            return normal, returned
        normal, more = self.block(statement.finalbody, normal, frame)  # (what it raises goes on raising)
        if returned:
            finished, more_returned = self.block(statement.finalbody, returned, frame)
            more += finished + more_returned
        if raised:
            still, more_returned = self.block(statement.finalbody, raised, frame)  # (a `return` there ends the exception)
            self.raised += still
            more += more_returned
        return normal, more

    def branch(self, branch: ir.Branch, states: list[PathState], frame: Frame):
        value = self.evaluate(branch.cond, frame)
        if isinstance(value, ir.Const):
            return self.block(branch.then if value.value else branch.orelse, states, frame)
        if self.binds_only(branch):
            self.binding_branch(branch, value, states, frame)
            return states, []
        key, polarity = condition_key(value)
        out: list[PathState] = []
        returned: list[PathState] = []
        untouched = True
        for truth, body in ((True, branch.then), (False, branch.orelse)):
            wanted = truth == polarity  # truth of the key itself on this arm
            arm = assume_all(states, key, wanted)
            if not arm:
                continue
            if names_a_seed(key) and self.declines_a_seed(body, branch.orelse if truth else branch.then, frame):
                arm = [s if s.torch_seeded or s.declined_seed else s.evolve(declined_seed=True) for s in arm]
            if key:
                self.guards.append((key, wanted))
            try:
                arm_states, arm_returned = self.block(body, arm, frame)
            finally:
                if key:
                    self.guards.pop()
            untouched = untouched and not arm_returned and same_states(arm_states, arm)
            out += arm_states
            returned += arm_returned
        if untouched:
            # Neither arm changed a path: splitting them on the condition would only record a
            # truth value that a later test of it records again, and double the paths to walk
            # (most branches of a library's top level). Effects and guards are kept in the facts.
            return states, []
        return bounded(out), returned

    def binding_branch(self, branch: ir.Branch, value, states: list[PathState], frame: Frame, assumed: tuple = ()) -> None:
        """Run a branch whose arms only bind names (`binds_only`) for those bindings. No arm can
        change a path, so `branch` would give the paths back as they came, after a new state per
        path and arm; here an arm's paths are `states` as they are, with the literals of the arms
        around it (`assumed`) held apart. An arm runs where some path can take it, as in `branch`:
        one whose state, with `assumed`, does not contradict the arm's condition. `value`: the
        condition's, evaluated."""
        if isinstance(value, ir.Const):
            self._binding_block(branch.then if value.value else branch.orelse, states, frame, assumed)
            return
        key, polarity = condition_key(value)
        for truth, body in ((True, branch.then), (False, branch.orelse)):
            if not key:
                self._binding_block(body, states, frame, assumed)
                continue
            wanted = truth == polarity
            if (key, not wanted) in assumed:
                continue
            taken = [*assumed, (key, wanted)]
            if any(all((k, not t) not in state.assumptions for k, t in taken) for state in states):
                self._binding_block(body, states, frame, tuple(taken))

    def _binding_block(self, statements, states: list[PathState], frame: Frame, assumed: tuple) -> None:
        """`block` for the statements `binds_only` allows (the same steps counted)."""
        for statement in statements:
            self.steps += 1
            if self.steps > MAX_STEPS:
                self.facts.truncated = True
                break
            if isinstance(statement, ir.Branch):
                self.binding_branch(statement, self.evaluate(statement.cond, frame), states, frame, assumed)
            else:
                self.statement(statement, states, frame)

    def binds_only(self, branch: ir.Branch) -> bool:
        """Both arms hold nothing but assignments, function references and branches like this one:
        nothing that reads or changes a path's state (no effect, call, import, return or raise)."""
        found = self.binds_only_memo.get(id(branch))  # (the run's IR outlives the run)
        if found is None:
            found = self.binds_only_memo[id(branch)] = all(
                isinstance(s, (ir.Assign, ir.FunctionRef)) or (isinstance(s, ir.Branch) and self.binds_only(s))
                for s in (*branch.then, *branch.orelse)
            )
        return found

    def declines_a_seed(self, taken, other, frame: Frame) -> bool:
        """Taking `taken` skips an optional seed: the other arm seeds torch and this one does not
        (`if args.seed is not None: set_seed(args.seed)`, on a condition that names a seed)."""
        return self.seeds_torch(other, frame) and not self.seeds_torch(taken, frame)

    def seeds_torch(self, statements, frame: Frame, depth: int = 0) -> bool:
        """Whether a block seeds torch: an effect of its own, in a branch of it, or in a
        project function it calls (one level down)."""
        for statement in statements:
            if isinstance(statement, ir.Effect) and statement.kind == Kind.SEED_TORCH:
                return True
            if isinstance(statement, ir.Branch) and (
                self.seeds_torch(statement.then, frame, depth) or self.seeds_torch(statement.orelse, frame, depth)
            ):
                return True
            if isinstance(statement, ir.Try) and any(self.seeds_torch(block, frame, depth) for block in ir.blocks_of(statement)):
                return True
            if isinstance(statement, ir.Call) and statement.target is not None and depth == 0:
                symbol = self.project.resolve(statement.target, frame.module)
                code = symbol.code if symbol is not None and symbol.is_function else None
                if code is not None and self.seeds_torch(code.body, frame, 1):
                    return True
        return False

    # -- effects -----------------------------------------------------------------------
    def occurrence(self, frame: Frame, ref: int, detail: tuple = (), extra_guard=None) -> Occurrence:
        site = (frame.module, ref)
        guards = frozenset(self.guards) | (frozenset([extra_guard]) if extra_guard else frozenset())
        return Occurrence(site, frame.anchor or site, detail, guards, self.ordered)

    def is_module_init(self, consumed: Occurrence) -> bool:
        site = consumed.site
        return site in self.facts.effects.get(Kind.MODULE_INIT, {}) or site in self.inits_before

    def effect(self, effect: ir.Effect, states: list[PathState], frame: Frame) -> list[PathState]:
        value = self.evaluate(effect.value, frame)
        if effect.kind == Kind.AUTOTUNE:
            effect, value = autotune.decided(effect, value)  # TRP207: a compile mode decides, an unknown one is off
        out: list[PathState] = []
        for state in states:
            for truth, split_state, guard in split(value, state):
                out.append(self.apply(effect, truth, split_state, frame, guard))
        return bounded(out)

    def apply(self, effect: ir.Effect, truth: bool, state: PathState, frame: Frame, guard) -> PathState:
        kind = effect.kind
        if kind == Kind.AUTOTUNE:
            return autotune.after(self, effect, truth, state, frame, guard)  # TRP207
        if kind == Kind.EMPTY_INIT:
            return empty_init.after(effect.detail, truth, state)
        if kind == Kind.BENCHMARK:
            if not truth:
                return state.evolve(benchmark=None)
            occurrence = self.occurrence(frame, effect.ref, extra_guard=guard)
            self.facts.add(kind, occurrence)
            return state.evolve(benchmark=occurrence)
        if not truth:
            return state
        if state.empty_init and kind in (Kind.DRAW, Kind.MODULE_INIT) and empty_init.spares(state, kind, effect.detail):
            return state  # built on the meta device or with init turned off: nothing drawn
        occurrence = self.occurrence(frame, effect.ref, effect.detail, guard)
        self.facts.add(kind, occurrence)
        if kind in resumes.KINDS or kind == Kind.SEED_TORCH and state.resumed is not None:
            state = resumes.after(kind, occurrence, state, self.facts)  # TRP108
        if kind == Kind.SEED_TORCH:
            if self.ordered and not state.torch_seeded and state.consumed is not None and not state.declined_seed:
                seed_names = set(effect.detail[1]) if len(effect.detail) > 1 else set()
                if not seed_names & set(state.consumed.detail):
                    if self.is_module_init(state.consumed) and state.pending_late is None:
                        return state.evolve(torch_seeded=True, consumed=None, pending_late=(occurrence, state.consumed))
                    self.facts.late_seeds.setdefault(occurrence.anchor, state.consumed)
            return state.evolve(torch_seeded=True, consumed=None)
        if kind in (Kind.DRAW, Kind.MODULE_INIT):
            if not state.torch_seeded and state.consumed is None and self.ordered and MAKES_A_SEED not in effect.detail:
                return state.evolve(consumed=occurrence)
            return state
        if kind == Kind.CHECKPOINT:
            # Weights loaded over a random init, before the seed or after it: that init no longer matters.
            if state.consumed is not None and self.is_module_init(state.consumed):
                return state.evolve(consumed=None)
            if state.pending_late is not None:
                return state.evolve(pending_late=None)
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

    def spawn(self, statement: ir.Spawn, states, frame: Frame) -> None:
        if statement.needs_spawn_method and not any(s.spawn_method for s in states):
            return
        symbol = self.project.resolve(statement.target, frame.module)
        if symbol is None or not symbol.is_function:
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
        start, _, raised = child.caught(symbol.module.top, [PathState()], child_frame)
        final = child.invoke(symbol, (), (), start, child_frame, ref=None)
        child.facts.end_paths(bounded(final + raised + child.raised))  # (paths that raised end there)
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
        if isinstance(value, ir.Equals):
            left, right = self.evaluate(value.left, frame), self.evaluate(value.right, frame)
            if isinstance(left, ir.Const) and isinstance(right, ir.Const) and _comparable(left.value, right.value):
                return ir.Const((left.value == right.value) != value.negated)
            return ir.Opaque(value.text)  # (the same key as before: equal texts correlate)
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
        if isinstance(value, ir.AttributeOnCuda):
            return ir.Const(attribute_on_cuda(self.project, value, frame))
        return value


def _comparable(a, b) -> bool:
    """Literals whose `==` Python answers the way the program would: strings, numbers, bools, None."""
    return all(v is None or isinstance(v, (str, int, float, bool)) for v in (a, b))
