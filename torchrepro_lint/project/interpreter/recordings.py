"""Parts of a run recorded in one program and replayed in another.

A library's scripts each start with the same imports (`import torch`) and register the same
callbacks: walking them again for each program would repeat the same work. An import
walked from a program's fresh start (`ImportWalk`), or the run of a program's callbacks
(`CallbackRun`), is recorded once with what it read of the program, and replayed wherever that
is the same; an import walk's occurrences are re-anchored at the importing program's own import
statement (`_Reanchored`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from torchrepro_lint.project.modules import ProjectModule
from torchrepro_lint.project.reads import note_reads, record
from torchrepro_lint.project.interpreter.states import MAX_STEPS, Facts, Frame, Occurrence, PathState, Site

if TYPE_CHECKING:
    from torchrepro_lint.project.interpreter.run import Interpreter


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
    callbacks: dict  # the callbacks it registered
    reads: frozenset  # what it read (project.reads.record), for the cached program's validity

    @staticmethod
    def capture(interpreter: Interpreter, run, *, own_callbacks: bool = False) -> tuple[dict, object]:
        """Call run() with the interpreter's facts and lookups captured, then undo what it did to
        the interpreter (replay redoes it). (The recording's fields, run's result.)
        `own_callbacks`: run() starts from no callbacks, so every one it registers is recorded,
        also one the recording program had registered before (a program it is replayed in may
        not have); for a run that reads the callbacks (CallbackRun), only the new ones are."""
        effectful_before, callbacks_before = dict(interpreter.effectful_memo), interpreter.callbacks
        if own_callbacks:
            interpreter.callbacks = {}
        else:
            callbacks_before = dict(callbacks_before)
        imported_before, steps_before = frozenset(interpreter.imported), interpreter.steps
        outer_facts, keeping = interpreter.facts, interpreter.keeping
        interpreter.facts, interpreter.lookups, interpreter.keeping = Facts(), set(), False
        try:
            with record() as reads:
                result = run()
            facts, looked_up = interpreter.facts, frozenset(interpreter.lookups)
        finally:
            interpreter.facts, interpreter.lookups, interpreter.keeping = outer_facts, None, keeping
            registered, interpreter.callbacks = interpreter.callbacks, callbacks_before
        imported = frozenset(interpreter.imported - imported_before)
        fields = dict(
            looked_up=looked_up, imported_then=looked_up & imported_before, imported=imported, facts=facts,
            steps=interpreter.steps - steps_before, effectful_before=effectful_before,
            effectful=dict(interpreter.effectful_memo), reads=frozenset(reads),
            callbacks=registered if own_callbacks else {
                key: found for key, found in registered.items() if key not in callbacks_before
            },
        )
        interpreter.imported -= imported
        interpreter.steps = steps_before
        interpreter.effectful_memo.clear()
        interpreter.effectful_memo.update(effectful_before)
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
                and interpreter.effectful_memo == self.effectful_before
            )
        )

    def _redo(self, interpreter: Interpreter, facts: Facts) -> None:
        note_reads(self.reads)  # (merged whole: a set keeps its members' hashes)
        interpreter.imported |= self.imported
        interpreter.steps += self.steps
        interpreter.effectful_memo.update(self.effectful)
        interpreter.callbacks.update(self.callbacks)
        interpreter.facts.merge(facts)
        interpreter.facts.spawns += facts.spawns


@dataclass
class ImportWalk(_Recording):
    """Walking one import from a program's fresh start (`Interpreter._starts_fresh`: the entry's
    top level, nothing tracked yet); its occurrences are anchored at the import statement that
    ran it."""

    anchor: Site
    states: list

    @classmethod
    def record(cls, interpreter: Interpreter, module: ProjectModule, states, anchor: Site) -> ImportWalk:
        def walk():
            return interpreter.top_level(module, states, Frame(module, anchor=anchor))

        fields, walked = cls.capture(interpreter, walk, own_callbacks=True)
        return cls(**fields, anchor=anchor, states=walked)

    def replay(self, interpreter: Interpreter, anchor: Site) -> list[PathState]:
        moved = _Reanchored(self.anchor, anchor)
        self._redo(interpreter, moved.facts(self.facts))
        return [moved.state(state) for state in self.states]


@dataclass
class CallbackRun(_Recording):
    """Running a program's callbacks: from a seeded state, out of order, anchored where they are.
    Kept under the callbacks it ran (Interpreter.run_callbacks)."""

    @classmethod
    def record(cls, interpreter: Interpreter) -> CallbackRun:
        fields, _ = cls.capture(interpreter, interpreter.invoke_callbacks)
        return cls(**fields)

    def replay(self, interpreter: Interpreter) -> None:
        self._redo(interpreter, self.facts)


class Remapped:
    """Occurrences, states and facts with their sites and anchors mapped (`site`, `anchor`:
    identity here; shared objects stay shared, and one that maps to itself is kept)."""

    def __init__(self) -> None:
        self._done: dict[int, Occurrence] = {}
        self._states: dict[int, PathState] = {}  # (the same paths flow through many recordings)

    def site(self, site: Site) -> Site:
        return site

    def anchor(self, anchor: Site) -> Site:
        return anchor

    def occurrence(self, occurrence: Occurrence | None) -> Occurrence | None:
        if occurrence is None:
            return None
        found = self._done.get(id(occurrence))
        if found is None:
            site, anchor = self.site(occurrence.site), self.anchor(occurrence.anchor)
            if site is occurrence.site and anchor is occurrence.anchor:
                found = occurrence
            else:
                found = Occurrence(site, anchor, occurrence.detail, occurrence.guards, occurrence.ordered)
            self._done[id(occurrence)] = found
        return found

    def state(self, state: PathState) -> PathState:
        consumed, claim, benchmark, pending = state.consumed, state.claim, state.benchmark, state.pending_late
        if consumed is None and claim is None and benchmark is None and pending is None and state.resumed is None and state.autotune is None:  # (TRP108's resumed, TRP207's autotune)
            return state
        found = self._states.get(id(state))
        if found is None:
            found = self._states[id(state)] = self._moved_state(state)
        return found

    def _moved_state(self, state: PathState) -> PathState:
        consumed, claim, benchmark, pending = state.consumed, state.claim, state.benchmark, state.pending_late
        moved = dict(
            consumed=self.occurrence(consumed), claim=self.occurrence(claim), benchmark=self.occurrence(benchmark),
            pending_late=tuple(self.occurrence(o) for o in pending) if pending is not None else None,
            resumed=self.occurrence(state.resumed),  # TRP108
            autotune=tuple(self.occurrence(o) for o in state.autotune) if state.autotune is not None else None,  # TRP207
        )
        if all(moved[name] is getattr(state, name) for name in ("consumed", "claim", "benchmark", "resumed")) and (
            pending is None or all(a is b for a, b in zip(moved["pending_late"], pending))
        ) and (state.autotune is None or all(a is b for a, b in zip(moved["autotune"], state.autotune))):  # (TRP207)
            return state
        return state.evolve(**moved)

    def facts(self, facts: Facts) -> Facts:
        return Facts(
            {
                kind: {self.site(site): self.occurrence(o) for site, o in found.items()}
                for kind, found in facts.effects.items()
            },
            {self.anchor(a): self.occurrence(o) for a, o in facts.late_seeds.items()},
            [self.state(s) for s in facts.final_states],
            [(self.occurrence(o), set_up, self.facts(child)) for o, set_up, child in facts.spawns],
            facts.truncated,
            set(facts.modules),
            set(facts.functions),
        )


class _Reanchored(Remapped):
    """One anchor replaced by another."""

    def __init__(self, old: Site, new: Site) -> None:
        super().__init__()
        self.old, self.new = old, new

    def anchor(self, anchor: Site) -> Site:
        return self.new if anchor == self.old else anchor

    def occurrence(self, occurrence: Occurrence | None) -> Occurrence | None:
        if occurrence is None or self.old == self.new or occurrence.anchor != self.old:
            return occurrence  # (the common case, without the memo)
        return super().occurrence(occurrence)
