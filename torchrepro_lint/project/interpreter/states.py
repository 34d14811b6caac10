"""What an abstract run carries and gathers.

- `PathState`: one path's switches (seeded, claimed, benchmark...) and the runtime conditions it
  assumed; `Occurrence`: an effect where it happened, and where to report it;
- how paths split on a runtime condition (`split`, `assume_all`) and join again (`bounded`:
  equal states deduplicated, states that differ only in one condition's truth joined);
- `Facts`: what a run saw whatever the path; `Frame`: one call's bindings;
- the bounds that keep a run finite on any project.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from operator import attrgetter, itemgetter

from torchrepro_lint.project import ir
from torchrepro_lint.project.modules import ProjectModule, Symbol

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
    # an optional seed was not taken (a branch that seeds torch, on a condition that names a
    # seed: `if args.seed is not None: set_seed(args.seed)`): the run chose to stay unseeded,
    # so a later reseed (a sampler's) is no late seed
    declined_seed: bool = False
    # A seed that came after a module's random init, until the path ends (then a late seed) or
    # loads a checkpoint over that init (then it never mattered): (seed, init) occurrences.
    pending_late: tuple | None = None
    # TRP108: an optimizer's state restored from a checkpoint on this path with no RNG state
    # restored since (until training continues: then a resume without RNG state), and whether
    # an RNG state was restored on this path (a later optimizer restore is then no hazard).
    resumed: Occurrence | None = None
    rng_restored: bool = False
    # TRP207: the compiled-kernel tuners on on this path (interpreter/autotune.py): each compile
    # call that asks for one, and each config switch still on, by its knob.
    autotune: tuple | None = None
    # The `with` contexts open on this path that spare a model's init (the meta device, empty
    # init: extract/empty_init.py), innermost last: each one's strength, 0 where its condition
    # did not hold (interpreter/empty_init.py).
    empty_init: tuple = ()
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

    def end_paths(self, states) -> None:
        """The program's paths are over: each seed still pending on one is a late seed."""
        for state in states:
            if state.pending_late is not None:
                seed, consumed = state.pending_late
                self.late_seeds.setdefault(seed.anchor, consumed)
        self.final_states.extend(states)

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


def condition_key(value) -> tuple[str, bool]:
    """A runtime condition as (key, polarity): `not args.det` is ("args.det", False)."""
    polarity = True
    while isinstance(value, ir.Not):
        value = value.operand
        polarity = not polarity
    if isinstance(value, ir.IsNone):
        inner_key, inner_polarity = condition_key(value.operand)
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


def assume_all(states: list[PathState], key: str, truth: bool) -> list[PathState]:
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


def same_states(after: list[PathState], before: list[PathState]) -> bool:
    return len(after) == len(before) and all(a is b or a == b for a, b in zip(after, before))


def split(value, state: PathState):
    """[(truth, state, guard)]: a runtime value is true on some paths and false on others."""
    if isinstance(value, ir.Const):
        return [(bool(value.value), state, None)]
    key, polarity = condition_key(value)
    if not key:
        return [(True, state, None), (False, state, None)]
    out = []
    for truth in (True, False):
        assumed = _assume(state, key, truth)
        if assumed is not None:
            out.append((truth == polarity, assumed, (key, truth)))
    return out


def bounded(states: list[PathState]) -> list[PathState]:
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


_CONDITION = itemgetter(0)  # of a (condition, truth) literal


# Merges already made (the cubes given -> the merge). Joins meet the same cubes again and again:
# in one run of pytorch-image-models' train.py, 1,252 merges asked of 161 distinct lists (the
# program's flags, split and joined at every call of the same helpers), 36 of its 63 ms of joins.
# Only condition texts and truths are kept, so it may outlive a run; cleared when it grows.
_MERGED: dict[tuple, tuple] = {}
_MERGED_KEPT = 4096


def _merged_cubes(cubes: list[frozenset]) -> list[frozenset]:
    """Conjunctions of (condition, truth) whose union is the same set of runs, in fewer parts:
    `A and c` with `A and not c` is `A`; `A and B` next to `A` adds nothing."""
    key = tuple(cubes)
    found = _MERGED.get(key)
    if found is None:
        if len(_MERGED) >= _MERGED_KEPT:
            _MERGED.clear()
        found = _MERGED[key] = tuple(_merge(cubes))
    return list(found)


def _merge(cubes: list[frozenset]) -> list[frozenset]:
    """(The merge itself: a function of the cubes' values and order alone.)"""
    merged = True
    while merged:
        merged = False
        cubes = list(dict.fromkeys(cubes))
        # Only a cube on the same conditions can be a partner: the others are not looked at
        # (most calls merge nothing, and making each literal's partner was most of their time).
        alike: dict[frozenset, int] = {}
        conditions = [frozenset(map(_CONDITION, cube)) for cube in cubes]
        for key in conditions:
            alike[key] = alike.get(key, 0) + 1
        if len(alike) == len(cubes):
            break
        position = {cube: i for i, cube in enumerate(cubes)}
        for i, cube in enumerate(cubes):
            if cube is None or alike[conditions[i]] == 1:
                continue
            # (literals in sorted order: a cube with two partners merges with the same one in
            # every process, whatever the set's layout; string hashes differ between processes)
            for condition, truth in sorted(cube):
                rest = cube - {(condition, truth)}
                partner = rest | {(condition, not truth)}
                j = position.get(partner)
                if j is not None and cubes[j] == partner:  # (not merged away this round)
                    cubes[i], cubes[j] = rest, None
                    merged = True
                    break
        cubes = [cube for cube in cubes if cube is not None]
    return _without_subsumed(cubes)


def _without_subsumed(cubes: list[frozenset]) -> list[frozenset]:
    """The cubes no other cube is a proper subset of, in order. Only a smaller cube can be one:
    each is compared with the smaller ones alone (most often all have one size: none)."""
    by_size: dict[int, list[frozenset]] = {}
    for cube in cubes:
        by_size.setdefault(len(cube), []).append(cube)
    if len(by_size) < 2:
        return cubes
    sizes = sorted(by_size)
    smaller: dict[int, list[frozenset]] = {}
    below: list[frozenset] = []
    for size in sizes:
        smaller[size] = below
        below = below + by_size[size]
    return [cube for cube in cubes if not any(other < cube for other in smaller[len(cube)])]
