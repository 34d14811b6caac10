"""Compiled-kernel autotuning along one path (TRP207).

`PathState.autotune` holds the tuners on: each compile call that asks for one (its mode or its
options: what it asks for stays with the compiled function), and each switch of Inductor's
global config that was turned on and not off again since (`torch._inductor.config.max_autotune
= True`, a `config.patch(...)`, a variable read when the config was imported). Inductor reads
them when the compiled code first runs, so they are taken as the path has them at its end, as
TRP201 takes `cudnn.benchmark`.
"""

from __future__ import annotations

from torchrepro_lint.project import ir
from torchrepro_lint.project.extract.autotune import CONFIG, ENV, MODE, PATCH
from torchrepro_lint.project.interpreter.states import PathState
from torchrepro_lint.project.known_apis import AUTOTUNE_MODES, Kind

_GLOBAL = frozenset({CONFIG, PATCH, ENV})  # switches of the process's config: a later `False` turns them off


def decided(effect: ir.Effect, value) -> tuple[ir.Effect, object]:
    """An AUTOTUNE effect and its value, evaluated: a compile mode the lowering could not read
    is decided here where its text is known (a bound literal), and named in the effect's detail;
    unknown, it is off, as any value the linter cannot read. A switch's value stays as it is (a
    runtime flag splits the paths)."""
    if effect.detail != (MODE, ""):  # (a literal mode was decided by the lowering)
        return effect, value
    if isinstance(value, ir.Const) and value.value in AUTOTUNE_MODES:
        return ir.Effect(effect.kind, effect.ref, ir.TRUE, (MODE, value.value)), ir.TRUE
    return effect, ir.Const(False)


def after(interpreter, effect: ir.Effect, truth: bool, state: PathState, frame, guard) -> PathState:
    """`state` after an AUTOTUNE effect whose value is `truth` on this path."""
    source, knob = effect.detail
    if source == ENV and frame.module is not interpreter.entry:
        return state  # read only if set before the config is imported: the entry's first statements
    on = state.autotune or ()
    if not truth:
        if source not in _GLOBAL:
            return state
        kept = tuple(o for o in on if not (o.detail[0] in _GLOBAL and o.detail[1] == knob))
        return state if len(kept) == len(on) else state.evolve(autotune=kept or None)
    occurrence = interpreter.occurrence(frame, effect.ref, effect.detail, guard)
    interpreter.facts.add(Kind.AUTOTUNE, occurrence)
    kept = tuple(o for o in on if o.site != occurrence.site or o.detail != occurrence.detail)
    return state.evolve(autotune=(*kept, occurrence))
