"""Per-module summaries: small facts a rule needs of *another* module, kept by that module's content.

A per-file rule that looks into other modules (where is this function used, does the program
call `set_epoch` somewhere) would otherwise read their trees, and its cached result would
depend on their whole text: a comment added to one module would re-check, and re-parse, every
file whose rules looked at it. Instead the rule asks for a summary: a picklable value computed
from one module's tree by a function registered here under a kind. The run's store
(lowered_store.LoweredStore) keeps summaries by module content, in memory and in the persistent
cache, and a cached result records ("summary", (path, kind, argument)) as what it read, so it
stays valid while the summary is the same.
"""

from __future__ import annotations

from typing import Callable

from torchrepro_lint.project.modules import ProjectModule
from torchrepro_lint.project.reads import note_read, unrecorded

# kind -> function(module, argument) computing the summary from the module's tree
_KINDS: dict[str, Callable[[ProjectModule, str], object]] = {}


def summary_kind(kind: str):
    """Register `function(module, argument)` as the way to compute summaries of `kind`."""

    def register(function):
        _KINDS[kind] = function
        return function

    return register


def summary(module: ProjectModule, kind: str, argument: str = ""):
    """The `kind` summary of `module` (for `argument`), recorded as read."""
    note_read("summary", (module.path, kind, argument))
    return current(module, kind, argument)


def current(module: ProjectModule, kind: str, argument: str = ""):
    """The summary as it is now, without recording the read (for checking cached results)."""
    compute = _KINDS[kind]
    store = module.store
    if store is None:  # an integration's index keeps its trees its own way
        with unrecorded():
            return compute(module, argument)

    def from_tree():
        had_tree, had_index = module.has_tree, module._index is not None
        with unrecorded():
            found = compute(module, argument)
        if not had_tree and module.has_tree:
            store.parsed_for_summaries(module)  # kept a while: other summaries are often asked next
        elif had_tree and not had_index:
            store.indexed_for_summaries(module)  # a kept tree's index, built again: the same
        return found

    return store.summary(module, kind, argument, from_tree)
