"""The contexts that spare a model's init, on each path (PathState.empty_init): entered and left
where extract/empty_init.py lowered a `with` block, through every call made inside it."""

from __future__ import annotations

from torchrepro_lint.project.interpreter.states import PathState
from torchrepro_lint.project.known_apis import EMPTY_INIT_META, INIT_LEVELS, Kind


def after(detail: tuple, truth: bool, state: PathState) -> PathState:
    """A context entered (detail: (strength,); 0 where its condition is false on this path, so
    that leaving it stays paired) or left (detail: ())."""
    if not detail:
        return state.evolve(empty_init=state.empty_init[:-1]) if state.empty_init else state
    return state.evolve(empty_init=(*state.empty_init, detail[0] if truth else 0))


def spares(state: PathState, kind: str, detail: tuple) -> bool:
    """Whether a draw (DRAW) or a module's init (MODULE_INIT) draws nothing under the contexts
    open on this path: on the meta device, none does; under the weaker contexts, an init draws
    if it is marked to draw under one as strong (known_apis.INIT_LEVELS)."""
    strength = max(state.empty_init)
    if strength >= EMPTY_INIT_META:
        return True
    if kind != Kind.MODULE_INIT or not strength:
        return False
    return max((INIT_LEVELS.get(d, 0) for d in detail), default=0) < strength
