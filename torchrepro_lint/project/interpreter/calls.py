"""Where a run goes into other project code: calls of functions, methods and constructors, and
the top levels of imported modules.

A call of a project function is inlined (`invoke`) with its literal arguments bound, unless
the function can do nothing tracked (`effectful`); a project class built without an __init__ of
its own runs its framework base's (a Trainer that seeds). An imported module's top level runs
once per program; from a program's fresh start the walk is recorded and replayed in the next
(recordings.py), and the language server keeps calls and walks from one analysis to the next
(kept_calls.py).
"""

from __future__ import annotations

from contextlib import contextmanager

from torchrepro_lint.project import ir
from torchrepro_lint.project.interpreter.inert import imported_names, inert_import
from torchrepro_lint.project.interpreter.kept_calls import (
    call_key, kept_call, keeps_calls, keeps_entry_calls, keeps_walks, prefix_to_keep, walk_key,
)
from torchrepro_lint.project.interpreter.recordings import ImportWalk
from torchrepro_lint.project.interpreter.states import MAX_DEPTH, MAX_IMPORT_DEPTH, WALKS_KEPT, Frame, PathState, Site, bounded
from torchrepro_lint.project.known_apis import (
    ADAPTER_OF_TRAINER,
    ADAPTER_OF_TRAINER_WHEN_GIVEN,
    KNOWN_HELPERS,
    TRAINERS_DRAWING_ADAPTER_FIRST,
    Helper,
    Kind,
)
from torchrepro_lint.project.modules import ProjectModule, Symbol


class ProjectCalls:
    """The Interpreter's calls and imports (run.Interpreter derives from this class): they walk
    the callee's IR with the Interpreter's statements (`block`, `caught`) and values
    (`evaluate`), on its stack, facts and bounds."""

    # -- calls -------------------------------------------------------------------------
    def call(self, call: ir.Call, states: list[PathState], frame: Frame) -> list[PathState]:
        target = self.callee(call, frame)
        if target is None:
            if call.receiver == "super" and call.method == "__init__" and frame.def_class is not None:
                # the project's part of the class defines no further __init__: a framework base's runs
                return self.framework_init(frame.def_class, call, states, frame)
            return states
        symbol, self_class, skip_first = target
        args = tuple(self.evaluate(a, frame) for a in call.args)
        kwargs = tuple((k, self.evaluate(v, frame)) for k, v in call.kwargs)
        if symbol.klass is not None:  # instantiation runs __init__
            init = self.project.method(symbol, "__init__")
            if init is None:
                return self.framework_init(symbol, call, states, frame)
            return self.invoke(init, args, kwargs, states, frame, call.ref, self_class=symbol, skip_first=True)
        stored = _stored_on(call.receiver, frame) if skip_first else {}
        return self.invoke(symbol, args, kwargs, states, frame, call.ref, self_class=self_class, skip_first=skip_first, stored=stored)

    def callee(self, call: ir.Call, frame: Frame):
        """(symbol, self class, whether the first parameter is bound) or None."""
        if call.target is not None:
            symbol = self.project.resolve(call.target, frame.module)
            if symbol is None or (not symbol.is_function and symbol.klass is None):
                return None
            bound = symbol.is_function and symbol.code.is_method and frame.self_class is not None
            return symbol, frame.self_class if bound else None, False
        if call.receiver == "self" and frame.self_class is not None:
            method = self.project.method(frame.self_class, call.method)
            return (method, frame.self_class, True) if method else None
        if call.receiver == "super" and frame.def_class is not None:
            method = self.project.method(frame.def_class, call.method, skip_self=True)
            return (method, frame.self_class, True) if method else None
        bound = frame.env.get(call.receiver)
        if isinstance(bound, ir.Instance):
            klass = self.instance_class(bound.qualname, bound.item, frame.module)
            if klass is not None:
                method = self.project.method(klass, call.method)
                return (method, klass, True) if method else None
        return None

    def instance_class(self, qualname: str, item: int | None, module, depth: int = 0) -> Symbol | None:
        """The project class of an Instance: the class itself, or the one a project function
        returns (every `return` giving an object that one class made, followed through
        factories a few levels down: `create_model_and_diffusion()` -> `create_gaussian_diffusion()`
        -> `SpacedDiffusion(...)`); `item`: of a returned tuple."""
        symbol = self.project.resolve(qualname, module)
        if symbol is None:
            return None
        if symbol.klass is not None:
            return symbol if item is None else None
        if not symbol.is_function or depth >= 3:
            return None
        makers = {made[item or 0] if (item is None) == (len(made) == 1) and (item or 0) < len(made) else None
                  for made in symbol.code.returns}  # (what it returns, not where: no refs)
        if len(makers) != 1 or None in makers:
            return None
        return self.instance_class(makers.pop(), None, symbol.module, depth + 1)

    def seeding_base(self, klass: Symbol) -> tuple[str, Helper] | None:
        """The framework class a project class derives from whose constructor seeds (Hugging
        Face's Trainer, TRL's trainers), with what it seeds; None if it has none."""
        helpers = self.project.helpers
        for name in self.project.external_bases(klass):
            helper = helpers.get(name) or KNOWN_HELPERS.get(name)
            if helper is not None and helper.seed_text is not None:
                return name, helper
        return None

    def framework_init(self, klass: Symbol, call: ir.Call, states: list[PathState], frame: Frame) -> list[PathState]:
        """A project subclass built without an __init__ of its own, or its __init__ calling
        `super().__init__(...)` into the framework: the base's constructor seeds as it would if
        called directly (lowering's helper_effects), and a TRL trainer given a `peft_config=`
        that draws initialises the adapter first."""
        found = self.seeding_base(klass)
        if found is None:
            return states
        base, helper = found
        statements: list[ir.Stmt] = []
        if base in TRAINERS_DRAWING_ADAPTER_FIRST and call.adapter_draws:
            given = self.evaluate(dict(call.kwargs).get("peft_config", ir.UNKNOWN), frame)
            if given != ir.Const(None):  # `peft_config=peft_config`, a parameter left at None
                detail = ADAPTER_OF_TRAINER if call.adapter_shown else ADAPTER_OF_TRAINER_WHEN_GIVEN
                statements.append(ir.Effect(Kind.MODULE_INIT, call.ref, ir.TRUE, detail))
        kinds = {"torch": Kind.SEED_TORCH, "random": Kind.SEED_RANDOM, "numpy": Kind.SEED_NUMPY}
        statements += [ir.Effect(kinds[rng], call.ref, ir.TRUE, (helper.seed_text, ())) for rng in helper.seeds]
        normal, returned = self.block(statements, states, frame)
        return normal + returned

    def invoke(self, symbol: Symbol, args, kwargs, states, frame: Frame, ref, self_class=None, skip_first=False, stored=None):
        """`stored`: what the program stored on the object a method runs for (`self.<name>`)."""
        key = (id(symbol.module), symbol.path)
        if not symbol.is_function or key in self.stack or self.depth + len(self.stack) >= MAX_DEPTH:
            return states
        self.facts.functions.add((symbol.module.path, symbol.path))
        if not self.effectful(symbol):
            return states
        function = symbol.function  # (walked: its refs may reach the facts)
        params = function.params[1:] if skip_first and function.params else function.params
        # `**`: every parameter given, none known (a command-line framework's call: cli_apps.py)
        given_all = any(name == "**" for name, _ in kwargs)
        env = {} if given_all else dict(function.defaults)
        env.update(stored or {})
        for name, value in zip(params, args):
            env[name] = value
        for name, value in kwargs:
            if name != "**":
                env[name] = value
        anchor = frame.anchor
        leaves_entry = anchor is None and ref is not None and symbol.module is not self.entry
        if leaves_entry:
            anchor = (frame.module, ref)  # the call in the entry program that leaves it
        def_class = self.project.resolve("@." + symbol.path.rpartition(".")[0], symbol.module) if function.is_method else None
        callee_frame = Frame(symbol.module, env, self_class or def_class, def_class, anchor)
        self.facts.modules.add(symbol.module.path)
        if leaves_entry and keeps_calls(self, frame):
            called = call_key(self, symbol, callee_frame, anchor, states)
            # (the callee's code read again inside: a kept run holds while it is the same)
            return kept_call(self, called, lambda: self.run_call(key, symbol.function, states, callee_frame))
        if ref is not None and symbol.module is self.entry and keeps_entry_calls(self, frame, symbol):
            # (`main()` under the guard; `train_one_epoch()` called from `main()`)
            called = call_key(self, symbol, callee_frame, (frame.module, ref), states)
            return kept_call(self, called, lambda: self.run_call(key, symbol.function, states, callee_frame))
        prefix = None
        if ref is not None and symbol.module is self.entry:
            length = prefix_to_keep(self, frame, symbol)
            if length:  # (`main()` being edited: its statements above the edit are kept)
                prefix = (symbol, length, (frame.module, ref))
        return self.run_call(key, function, states, callee_frame, prefix)

    def run_call(self, key, function: ir.FunctionIR, states, callee_frame: Frame, prefix=None):
        """Walk `function`'s body for a call `invoke` has bound (`key`: its place on the stack).
        `prefix`: (its symbol, how many first statements to keep, the call's site)."""
        self.stack.append(key)
        try:
            if prefix is None:
                normal, returned, raised = self.caught(function.body, states, callee_frame)
            else:
                normal, returned, raised = self.caught_after_prefix(function.body, states, callee_frame, *prefix)
        finally:
            self.stack.pop()
        if not normal and not returned:
            # No path returns (an abstract method's `raise NotImplementedError`, a stub, a main
            # that ends in `raise SystemExit`): the call is taken to return what it did before
            # raising, rather than end every path of every program that calls it.
            return raised
        self.raised += raised  # (they leave the caller too: Interpreter.raised)
        return bounded(normal + returned)

    def effectful(self, symbol: Symbol, depth: int = 0) -> bool:
        """Whether a function can do anything we track; pure helpers are not walked again."""
        key = (id(symbol.module), symbol.path)
        if key in self.effectful_memo:
            return self.effectful_memo[key]
        if depth >= MAX_DEPTH:
            return True  # a call chain too long to look down: walk it (invoke has the same bound)
        self.effectful_memo[key] = True  # optimistic while recursing
        self.effectful_memo[key] = any(self._stmt_effectful(s, symbol.module, depth + 1) for s in symbol.code.body)
        return self.effectful_memo[key]

    @contextmanager
    def fresh_effectful(self):
        """`effectful` from no memo (each answer found again, its reads made), for an answer kept
        beyond this program (inert_import); what it finds is added to the memo after."""
        kept, self.effectful_memo = self.effectful_memo, {}
        try:
            yield self.effectful_memo
        finally:
            found, self.effectful_memo = self.effectful_memo, kept
            for key, value in found.items():
                kept.setdefault(key, value)

    def _stmt_effectful(self, statement, module: ProjectModule, depth: int) -> bool:
        if isinstance(statement, ir.Branch):
            return any(self._stmt_effectful(s, module, depth) for s in (*statement.then, *statement.orelse))
        if isinstance(statement, ir.Try):
            return any(self._stmt_effectful(s, module, depth) for block in ir.blocks_of(statement) for s in block)
        if isinstance(statement, ir.Call):
            if statement.target is None:
                return True
            target = self.project.resolve(statement.target, module)
            if target is None:
                return False
            if target.klass is not None:
                init = self.project.method(target, "__init__")
                if init is None:
                    return self.seeding_base(target) is not None
                return self.effectful(init, depth)
            return target.is_function and self.effectful(target, depth)
        # (a function that only raises, a check such as `if x < 0: raise`, is not walked: its
        # callers' paths go on whole, as they would past a stub that always raises)
        return not isinstance(statement, (ir.Assign, ir.Return, ir.Raise))

    # -- imports -----------------------------------------------------------------------
    def import_module(self, statement: ir.ImportModule, states, frame: Frame):
        lookups = self.lookups
        for module in self.project.modules_imported(frame.module, statement.ref, imported_names(statement)):
            if lookups is not None:
                lookups.add(id(module))
            if id(module) in self.imported:
                continue
            inert = inert_import(self.project, module, self.effectful, self.fresh_effectful) if len(self.stack) < MAX_DEPTH else None
            if inert is not None:  # nothing to walk: only what it brings in and the helpers it calls
                for brought in inert.modules:  # (what deciding it read is recorded: inert_import)
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
            frame = Frame(module, anchor=anchor)
            if keeps_walks(self):  # (the language server: kept for its next analysis)
                walked = walk_key(self, module, anchor, states)
                return kept_call(self, walked, lambda: self.top_level(module, states, frame))
            return self.top_level(module, states, frame)
        walks = self.project.import_walks.setdefault(id(module), [])
        for walk in walks:
            if walk.replays_in(self):
                return walk.replay(self, anchor)
        walk = ImportWalk.record(self, module, states, anchor)
        if walk.replays_in(self, recorded=True) and len(walks) < WALKS_KEPT:
            walks.append(walk)
        return walk.replay(self, anchor)

    def top_level(self, module: ProjectModule, states: list[PathState], frame: Frame) -> list[PathState]:
        """Run an imported module's top level. A path that raised there goes on in the importer,
        as if it had caught the error (`try: import x` / `except ImportError:`, an optional
        dependency's check): an import is not where this model ends a program's paths."""
        walked, returned, raised = self.caught(module.top, states, frame)
        return bounded(walked + returned + raised)

    def _starts_fresh(self, states: list[PathState]) -> bool:
        """Whether an import walked now depends only on the project, on which modules are
        already imported and on which functions are known effectful (a replay compares both):
        at the entry's top level, nothing tracked has happened yet. (Callbacks registered before
        do not count: the walk only adds its own.)"""
        return (
            self.importing == 1 and not self.stack and not self.guards and not self.spawned and self.depth == 0
            and self.ordered
            and len(states) == 1 and states[0] == _FRESH
            and not self.facts.effects.get(Kind.MODULE_INIT)  # (read by a checkpoint load)
        )


def _stored_on(receiver: str | None, frame: Frame) -> dict:
    """`trainer.device = ...` stored before `trainer.fit()`: `self.device` inside the method (and
    what a method stored on `self` for the methods it calls)."""
    if receiver is None:
        return {}
    owner = "self" if receiver == "super" else receiver
    prefix = owner + "."
    return {"self." + name[len(prefix):]: value for name, value in frame.env.items() if name.startswith(prefix)}


_FRESH = PathState()
