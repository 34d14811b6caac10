"""Calls into the project that the entry program makes, and imports walked inside other
imports, kept from one language-server run to the next.

An edit inside `main()` of a training script runs its program again. Most of `main()`'s calls
into the rest of the project (`create_dataset(...)`, `create_model(...)`) receive the same
paths and arguments as in the run before, and walking them again was most of the edit's time
(pytorch-image-models' `train.py`: `create_dataset` alone, called with 48 paths, took half of
`main()`). Where the call chain leaves the entry module, the call is run once with what it did
recorded (`CallRun`), and a later run replays it where the call is the same (`CallKey`) and
nothing it read has changed.

What a call did depends on the paths and bindings it is given, the call stack and guards it runs
under, whether a path's first draw was a module's initialisation (`is_module_init` reads the
program's facts), which modules are imported and which functions are effectful. The first
four are its key. Imported-ness is compared on replay, as for an import walk. Effectful answers
are found again from an empty memo while it is recorded (`fresh_effectful`), so what they read
is among the recording's reads. A recording of the previous run holds the previous run's module
objects: it is moved onto this run's (`moved.Moved`) once its reads are known to hold.

An edit elsewhere (a model file every script imports at start-up) leaves the entry unchanged,
and its `main()` often given the paths it was given before: a call of an entry function from
the entry's top level is then kept whole, with the calls out of the entry made inside it kept
as well (`keeps_entry_calls`). Not while the entry itself is edited: its code changes each time.
But while `main()` is edited, a call it makes of another entry function whose code is the same
(`train_one_epoch()`, shifted down by the lines typed above it) is kept: its recording read only
parts of the entry that did not change (read_values.ReadValues._same_part).

While `main()` itself is edited, its first statements, up to the first that differs from the
last analysis's, are kept as one recording (`kept_prefix`): a call of those statements, keyed
also by them, which gives back the bindings they leave and the paths that returned in them
besides the paths that go on. An edit in the middle of a long `main()` then runs only the
statements from the edited one on.

An imported module's top level walked inside another import (not from a program's fresh
start, which `recordings.ImportWalk` shares between programs) is kept the same way, as a call
of the module itself (`walk_key`): an edit of `resnet.py` walks again resnet, the modules that
import it and `timm.models`, not the 150 other model files `import timm` walks.

Only the language server keeps calls, and only from its second analysis on (an analysis that
follows another, `ProjectIndex.adopt_recordings`): a `check` run, or the server's first
analysis, runs each program once, where recording would only cost time and memory.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from torchrepro_lint.project.extract.function_reuse import unshifted
from torchrepro_lint.project.modules import ProjectModule, Symbol
from torchrepro_lint.project.reads import note_reads, record
from torchrepro_lint.project.interpreter.moved import Gone, Moved
from torchrepro_lint.project.interpreter.states import MAX_STEPS, WALKS_KEPT, Facts, Frame, PathState
from torchrepro_lint.project.known_apis import Kind

if TYPE_CHECKING:
    from torchrepro_lint.project.interpreter.run import Interpreter

# Imports running inside one another below which a walk is kept. Keeping one adds Python frames
# to each level, and a chain as deep as MAX_IMPORT_DEPTH allows already holds most of the
# interpreter's recursion limit; real packages nest fewer (pytorch-image-models: 11).
KEPT_IMPORT_DEPTH = 20


@dataclass(frozen=True)
class CallKey:
    """What a call from the entry module into the rest of the project does depends on (beyond
    the project's code and which modules are imported)."""

    callee: Symbol
    env: tuple  # the callee's bindings on entry: defaults, arguments, what was stored on `self`
    self_class: Symbol | None
    def_class: Symbol | None
    anchor: tuple  # the call: (entry module, ref)
    stack: tuple  # the entry's functions open around it, by path
    guards: tuple
    as_main: bool
    importing: int
    states: tuple  # the paths it is given
    inits: tuple  # for each path, whether its first draw was a module's initialisation


@dataclass
class CallRun:
    key: CallKey
    states: list  # the paths that leave the call
    raised: list  # the paths an exception takes out of it
    facts: Facts
    steps: int
    looked_up: frozenset  # modules whose imported-ness it tested
    imported_then: frozenset  # those that were imported already
    imported: frozenset  # modules it imported
    effectful: dict  # what it found effectful, by (module, path)
    callbacks: dict  # callbacks it registered
    reads: frozenset
    modules: frozenset  # every module object the recording points at
    paths: frozenset | None = None  # theirs (_moved)
    beside_states: frozenset | None = None  # those pointed at other than through paths (_moved)
    # A kept prefix's (kept_prefix): the paths that returned in it, and the bindings after it
    returned: list = field(default_factory=list)
    env_after: tuple | None = None

    def replays_in(self, interpreter: Interpreter) -> bool:
        imported = interpreter.imported
        return (
            interpreter.steps + self.steps <= MAX_STEPS
            and {m for m in self.looked_up if id(m) in imported} == self.imported_then
        )

    def replay(self, interpreter: Interpreter) -> list[PathState]:
        note_reads(self.reads)  # (merged whole: a set keeps its members' hashes)
        if interpreter.lookups is not None:  # (replayed inside a recording: it tested these too)
            interpreter.lookups.update(id(m) for m in self.looked_up)
        interpreter.imported |= {id(m) for m in self.imported}
        interpreter.steps += self.steps
        memo = interpreter.effectful_memo
        for (module, path), found in self.effectful.items():
            memo.setdefault((id(module), path), found)
        for key, symbol in self.callbacks.items():
            interpreter.callbacks.setdefault(key, symbol)
        interpreter.facts.merge(self.facts)
        interpreter.facts.spawns += self.facts.spawns
        interpreter.raised += self.raised
        return list(self.states)


def keeps_calls(interpreter: Interpreter, frame: Frame) -> bool:
    """Whether a call leaving the entry module here may be kept: from the entry's code, outside
    any recording but a kept call's (an entry function's: `keeps_entry_calls`), where walks are
    kept."""
    return (
        (interpreter.lookups is None or interpreter.keeping)
        and frame.module is interpreter.entry
        and keeps_walks(interpreter)
    )


def keeps_entry_calls(interpreter: Interpreter, frame: Frame, callee: Symbol) -> bool:
    """Whether a call of an entry function may be kept whole, as `keeps_calls`:
    - from the entry's top level (`main()` under the `__main__` guard), where the entry module is
      the same object as in the last analysis. An edit elsewhere (a model file every program
      imports) then replays the whole of `main()` where its paths come in as before; while the
      entry itself is being edited, recording `main()` would only cost (its code changes each
      time).
    - from an entry function (`train_one_epoch()` called from `main()`), where the callee's code
      is the last analysis's: the same, or shifted by an edit above it (an edit of `main()`). Its
      recording holds while what it read of the entry is unchanged (read_values._same_part)."""
    if not keeps_calls(interpreter, frame):
        return False
    reusable = interpreter.project.reusable
    entry = interpreter.entry
    before = reusable.get(entry.path) if reusable is not None else None
    if before is entry:
        return True
    if before is None or not interpreter.stack:
        return False
    then, now = before._ir.functions.get(callee.path), entry._ir.functions.get(callee.path)
    return then is not None and now is not None and (then is now or unshifted(then) is unshifted(now))


def keeps_walks(interpreter: Interpreter) -> bool:
    """Whether an imported module's top level walked now may be kept: in a program's own ordered
    run (not a spawned child's or a callback's), with only the entry's functions open, and
    fewer than KEPT_IMPORT_DEPTH imports running."""
    entry = id(interpreter.entry)
    return (
        interpreter.project.recordings_hold is not None  # (not the first analysis: it runs every program once)
        and interpreter.importing < KEPT_IMPORT_DEPTH
        and interpreter.ordered
        and not interpreter.spawned
        and interpreter.depth == 0
        and all(module_id == entry for module_id, _ in interpreter.stack)
    )


def kept_call(interpreter: Interpreter, key: CallKey, run) -> list[PathState]:
    """The paths out of the call `key` describes: replayed from a kept run, or `run()` recorded."""
    return _kept_run(interpreter, key, run).replay(interpreter)


def kept_prefix(interpreter: Interpreter, key: CallKey, run) -> tuple[CallRun, int]:
    """The first statements of an entry function, kept as a call is (`prefix_key`), and how
    many of them it covers: the longest kept run of the same call whose statements are the
    first of `key`'s, if it leaves out fewer than PREFIX_KEPT_FROM (typing line after line
    below the last edit), replayed; else `run()`, which gives (paths out, paths returned,
    bindings after) of all of `key`'s statements, recorded (in place of the call's older
    prefix). The caller takes `returned` and `env_after` from what this gives back, and runs
    the statements after those it covers."""
    runs = _runs_of(interpreter, key)
    statements = key.env[0][1]
    best, covered = None, 0
    for kept in runs:
        known = _prefix_statements(kept.key)
        if (
            known is not None and covered < len(known) <= len(statements)
            and all(a is b or a == b for a, b in zip(known, statements))
            and replace(kept.key, env=key.env) == key and kept.replays_in(interpreter)
        ):  # fmt: skip
            best, covered = kept, len(known)
    if best is None or covered + PREFIX_KEPT_FROM <= len(statements):
        best, covered = _record(interpreter, key, run, prefix=True), len(statements)
        if not best.facts.truncated:
            runs[:] = [  # (the call's older prefix: this one takes its place)
                kept for kept in runs if _prefix_statements(kept.key) is None or replace(kept.key, env=key.env) != key
            ]
            if len(runs) < WALKS_KEPT:
                runs.append(best)
    best.replay(interpreter)
    return best, covered


def _prefix_statements(key: CallKey) -> tuple | None:
    """The statements a prefix's key covers; None for a call's key."""
    first = key.env[0] if key.env else None
    return first[1] if first is not None and first[0] == "<prefix>" else None


def _runs_of(interpreter: Interpreter, key: CallKey) -> list[CallRun]:
    """This run's kept runs at `key`'s call site and callee (the last run's, adopted on first use)."""
    project = interpreter.project
    head = _head(key)
    runs = project.call_runs.get(head)
    if runs is None:
        if project.moved is None:
            _move_heads(project)
        runs = project.call_runs[head] = _adopted(project, project.call_runs_before.get(head, ()))
    return runs


def _kept_run(interpreter: Interpreter, key: CallKey, run) -> CallRun:
    runs = _runs_of(interpreter, key)
    for kept in runs:
        if kept.key == key and kept.replays_in(interpreter):
            return kept
    kept = _record(interpreter, key, run)
    if not kept.facts.truncated and len(runs) < WALKS_KEPT:
        runs.append(kept)
    return kept


# Fewer first statements than this are run again, not kept: replaying costs about as much.
PREFIX_KEPT_FROM = 8


def prefix_to_keep(interpreter: Interpreter, frame: Frame, callee: Symbol) -> int:
    """How many first statements of an entry function called from `frame` to keep as one
    recording (`kept_prefix`), where the entry is being edited: those before the first that
    differs from the last analysis's function. `main()` of a training script is a hundred
    statements long, and an edit in its middle ran the half above it again each time (timm's
    train.py: 9 of its 14 ms). 0: run it all."""
    entry = interpreter.entry
    if callee.module is not entry or not keeps_calls(interpreter, frame):
        return 0
    reusable = interpreter.project.reusable
    before = reusable.get(entry.path) if reusable is not None else None
    if before is None or before is entry:
        return 0
    then, now = before._ir.functions.get(callee.path), entry._ir.functions.get(callee.path)
    if then is None or now is None or then is now:
        return 0
    same = 0
    for old, new in zip(then.body, now.body):
        if not (old is new or old == new):
            break
        same += 1
    return same if same >= PREFIX_KEPT_FROM else 0


def prefix_key(
    interpreter: Interpreter, callee: Symbol, callee_frame: Frame, anchor, states, statements: tuple
) -> CallKey:
    """The key of the first `statements` of `callee` run from its frame's bindings on entry:
    a call's, with the statements among its bindings (a recording replays only where they are
    the same code at the same refs)."""
    env = (("<prefix>", statements), *callee_frame.env.items())
    return _key(interpreter, callee, env, callee_frame.self_class, callee_frame.def_class, anchor, states)


def call_key(interpreter: Interpreter, callee: Symbol, callee_frame: Frame, anchor, states) -> CallKey:
    frame = callee_frame
    return _key(interpreter, callee, tuple(frame.env.items()), frame.self_class, frame.def_class, anchor, states)


def walk_key(interpreter: Interpreter, module: ProjectModule, anchor, states) -> CallKey:
    """An imported module's top level, as a call of the module itself (path "")."""
    return _key(interpreter, Symbol(module, ""), (), None, None, anchor, states)


def _key(interpreter: Interpreter, callee: Symbol, env: tuple, self_class, def_class, anchor, states) -> CallKey:
    return CallKey(
        callee, env, self_class, def_class, anchor,
        tuple(path for _, path in interpreter.stack), tuple(interpreter.guards), interpreter.as_main,
        interpreter.importing, tuple(states),
        tuple(s.consumed is not None and interpreter.is_module_init(s.consumed) for s in states),
    )


def _record(interpreter: Interpreter, key: CallKey, run, prefix: bool = False) -> CallRun:
    """Run the call with what it does captured, then undo that (replay redoes it). Its facts
    and callbacks start empty: a callback it registers counts though the caller had registered
    it already, as the caller of a later run may not have."""
    project = interpreter.project
    outer = interpreter.facts, interpreter.raised, interpreter.callbacks, interpreter.lookups
    imported_before, steps_before = set(interpreter.imported), interpreter.steps
    interpreter.facts, interpreter.raised, interpreter.callbacks, interpreter.lookups = Facts(), [], {}, set()
    inits_before, keeping = interpreter.inits_before, interpreter.keeping
    interpreter.inits_before = {**inits_before, **outer[0].effects.get(Kind.MODULE_INIT, {})}
    interpreter.keeping = True  # (calls out of the entry inside are kept too: `main()`'s)
    try:
        with record() as reads, interpreter.fresh_effectful() as effectful:
            states, returned, env_after = run() if prefix else (run(), [], None)
        facts, raised = interpreter.facts, interpreter.raised
        callbacks, looked_up = interpreter.callbacks, interpreter.lookups
    finally:
        interpreter.facts, interpreter.raised, interpreter.callbacks, interpreter.lookups = outer
        interpreter.inits_before, interpreter.keeping = inits_before, keeping
    by_id = {id(m): m for m in project.modules.values()}
    imported = frozenset(by_id[i] for i in interpreter.imported - imported_before if i in by_id)
    looked_up_modules = frozenset(by_id[i] for i in looked_up if i in by_id)
    kept = CallRun(
        key, states, raised, facts, interpreter.steps - steps_before, looked_up_modules,
        frozenset(m for m in looked_up_modules if id(m) in imported_before), imported,
        {(by_id[i], path): found for (i, path), found in effectful.items() if i in by_id},
        callbacks, frozenset(reads), frozenset(), returned=returned, env_after=env_after,
    )
    kept.modules = frozenset(_modules_of(kept))
    interpreter.imported -= interpreter.imported - imported_before
    interpreter.steps = steps_before
    return kept


def _head(key: CallKey) -> tuple:
    """Where a kept call is looked up: its call site and callee, by path."""
    return (key.anchor[0].path, key.anchor[1], key.callee.module.path, key.callee.path)


def _move_heads(project) -> None:
    """The previous run's kept calls, looked up by this run's refs: an edit above a call in
    the entry module moved its ref (moved.py)."""
    moved = project.moved = Moved(project.modules, project.reusable)
    by_head = {}
    for head, runs in project.call_runs_before.items():
        try:
            anchor = moved.site(runs[0].key.anchor) if runs else None
        except Gone:
            continue
        if anchor is not None:
            by_head[(anchor[0].path, anchor[1], *head[2:])] = runs
    project.call_runs_before = by_head


def _adopted(project, runs) -> list[CallRun]:
    """The previous run's recordings of one call that still hold, on this run's modules."""
    out = []
    hold = project.recordings_hold
    for kept in runs:
        if hold is None or not hold(kept.reads):
            continue
        moved = _moved(project.moved, kept)
        if moved is not None:
            out.append(moved)
    return out


def _modules_of(kept: CallRun):
    yield from _modules_beside_states(kept)
    for state in _states_in(kept):
        for occurrence in _occurrences_of(state):
            yield occurrence.site[0]
            yield occurrence.anchor[0]


def _states_in(kept: CallRun):
    """The paths a recording holds: given, left, raised, returned, and those its facts end with."""
    return (*kept.key.states, *kept.states, *kept.raised, *kept.returned, *_states_of(kept.facts))


def _modules_beside_states(kept: CallRun):
    """The modules a recording points at other than through its paths (`_states_in`)."""
    key = kept.key
    yield key.callee.module
    yield key.anchor[0]
    for symbol in (key.self_class, key.def_class, *kept.callbacks.values()):
        if symbol is not None:
            yield symbol.module
    yield from kept.looked_up
    yield from kept.imported
    for module, _ in kept.effectful:
        yield module
    for occurrence in _facts_occurrences(kept.facts):
        yield occurrence.site[0]
        yield occurrence.anchor[0]
    for facts in _all_facts(kept.facts):
        for anchor in facts.late_seeds:  # (keyed by a site too)
            yield anchor[0]


def _occurrences_of(state: PathState):
    for occurrence in (state.consumed, state.claim, state.benchmark, state.resumed, *(state.pending_late or ()), *(state.autotune or ())):  # (resumed: TRP108; autotune: TRP207)
        if occurrence is not None:
            yield occurrence


def _all_facts(facts: Facts):
    """`facts` and those of the processes it spawned."""
    yield facts
    for _, _, child in facts.spawns:
        yield from _all_facts(child)


def _states_of(facts: Facts):
    for each in _all_facts(facts):
        yield from each.final_states


def _facts_occurrences(facts: Facts):
    for each in _all_facts(facts):
        for found in each.effects.values():
            yield from found.values()
        yield from each.late_seeds.values()
        yield from (occurrence for occurrence, _, _ in each.spawns)


def _moved(moved: Moved, kept: CallRun) -> CallRun | None:
    """`kept` on this run's modules (every recording of the last run points at its modules)."""
    if kept.paths is None:
        kept.paths = frozenset(m.path for m in kept.modules)
    if moved.before is not None and moved.none_changed(kept.paths):
        return kept  # (one set operation: about 100 kept walks are checked on a model-file edit)
    if all(moved.modules.get(m.path) is m for m in kept.modules):
        return kept
    if kept.beside_states is None:
        kept.beside_states = frozenset(_modules_beside_states(kept))
    try:
        if not kept.facts.spawns and moved.modules_in(kept.beside_states) is kept.beside_states:
            return _paths_moved(moved, kept)
        key = kept.key
        moved_key = CallKey(
            moved.symbol(key.callee), key.env, moved.symbol(key.self_class), moved.symbol(key.def_class),
            moved.site(key.anchor), key.stack, key.guards, key.as_main, key.importing,
            tuple(moved.state(s) for s in key.states), key.inits,
        )
        return CallRun(
            moved_key, [moved.state(s) for s in kept.states], [moved.state(s) for s in kept.raised],
            moved.facts(kept.facts), kept.steps, moved.modules_in(kept.looked_up),
            moved.modules_in(kept.imported_then), moved.modules_in(kept.imported),
            {(moved.module(module), path): found for (module, path), found in kept.effectful.items()},
            {(id(moved.module(s.module)), path): moved.symbol(s) for (_, path), s in kept.callbacks.items()},
            kept.reads, moved.modules_in(kept.modules),
            returned=[moved.state(s) for s in kept.returned], env_after=kept.env_after,
        )
    except Gone:
        return None


def _paths_moved(moved: Moved, kept: CallRun) -> CallRun:
    """`kept` whose paths alone point at a module this run replaced (a draw in an imported
    module's top level is in the path of every import walked after it: about 70 kept walks of
    timm's models on an edit of resnet.py): the rest of it is taken as it is. (Built field by
    field: dataclasses.replace took most of the time.)"""
    k, f, state = kept.key, kept.facts, moved.state
    key = CallKey(
        k.callee, k.env, k.self_class, k.def_class, k.anchor, k.stack, k.guards, k.as_main, k.importing,
        tuple(map(state, k.states)), k.inits,
    )
    facts = Facts(f.effects, f.late_seeds, list(map(state, f.final_states)), f.spawns, f.truncated, f.modules, f.functions)
    return CallRun(
        key, list(map(state, kept.states)), list(map(state, kept.raised)), facts, kept.steps, kept.looked_up,
        kept.imported_then, kept.imported, kept.effectful, kept.callbacks, kept.reads, moved.modules_in(kept.modules),
        kept.paths, kept.beside_states, list(map(state, kept.returned)), kept.env_after,
    )
