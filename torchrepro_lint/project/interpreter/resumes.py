"""A resumed run along one path (TRP108): an optimizer's state restored from a checkpoint, then
training, with no RNG state restored on the path.

The path state carries the restore (`PathState.resumed`) until an RNG state is restored (then
the resume is sound) or training continues (then the resumed run replays the draws that
followed the seed: `Kind.RESUMED_WITHOUT_RNG` is added at the restore's site, on a path that
seeded torch; an unseeded one is TRP101's). An RNG state restored before the optimizer's
counts as well (`PathState.rng_restored`).
"""

from __future__ import annotations

import re

from torchrepro_lint.project.extract.resumes import RESUMES_TRAIN
from torchrepro_lint.project.interpreter.states import Facts, Occurrence, PathState
from torchrepro_lint.project.known_apis import Kind

# The effects that can change a path's resume, beside a seed while one is pending
KINDS = frozenset({Kind.RNG_RESTORE, Kind.OPTIMIZER_RESTORE, Kind.OPTIMIZER_STEP, Kind.TRAINING})
# A seed computed from the run's progress (`seed + epoch`, `base_seed + step`): from there on the
# resumed run draws what the uninterrupted one did
_PROGRESS = re.compile(r"epoch|step|iter")


def after(kind: str, occurrence: Occurrence, state: PathState, facts: Facts) -> PathState:
    """`state` after an effect of `kind` (one of KINDS, or a seed of torch) at `occurrence`."""
    if kind == Kind.RNG_RESTORE:
        if state.rng_restored and state.resumed is None:
            return state
        if state.resumed is not None:
            # On another path the same restore may go without (`if not args.no_load_rng:`): a
            # configuration choice, not a hazard, as TRP201 treats independent runtime flags
            facts.add(Kind.RESUMED_WITH_RNG, state.resumed)
        return state.evolve(rng_restored=True, resumed=None)
    if kind == Kind.OPTIMIZER_RESTORE:
        if state.rng_restored or not occurrence.ordered:
            return state
        if occurrence.detail == RESUMES_TRAIN:  # Lightning's fit(ckpt_path=...): restores and trains on
            if state.torch_seeded:
                facts.add(Kind.RESUMED_WITHOUT_RNG, occurrence)
            return state
        return state if state.resumed is not None else state.evolve(resumed=occurrence)
    resumed = state.resumed
    if resumed is None:
        return state
    if kind == Kind.SEED_TORCH:
        names = occurrence.detail[1] if len(occurrence.detail) > 1 else ()
        if any(_PROGRESS.search(name.lower()) for name in names):
            return state.evolve(resumed=None)
        return state
    if kind == Kind.OPTIMIZER_STEP or kind == Kind.TRAINING and occurrence.detail != ("optimizer",):
        if state.torch_seeded and occurrence.ordered:
            facts.add(Kind.RESUMED_WITHOUT_RNG, resumed)
        return state.evolve(resumed=None)
    return state
