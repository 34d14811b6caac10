"""Which LibCST trees a run keeps for its per-file rules, and releasing the others.

Lowering parses every file; a tree is kept, within TREE_BUDGET characters of source (the
largest files first), for the per-file rules that will want it, or for another file's rules
asking it for a summary. Past the budget a tree is released and the file parsed again when its
rules run: that bounds a large project's memory. Released trees are collected here, where the
command line turned automatic collection off.
"""

from __future__ import annotations

import gc

from torchrepro_lint.project.modules import ProjectModule

# Trees kept after lowering for the per-file rules, in characters of source: past this a tree is
# dropped and the file parsed again when its rules run (a LibCST tree takes ~22x its text, its
# index ~8x more). The largest files are lowered first and keep theirs (engine._lower_all). On
# torch's source (46 MB) with --jobs 1: 16 MB kept in file order peaked at 1.9 GiB, 10 MB of the
# largest at 1.04 GiB, in about two thirds of the time (huge files were no longer parsed again on
# a full heap); 8 MB at 999 MiB, 4% slower than 10 MB (3:42 against 3:33, same output).
TREE_BUDGET = 8_000_000
# The same for all the processes of a sharded run (shards/) together, each keeping its part.
# On torch's source with two processes (20 MB each) and every kept tree's index held, the
# largest process peaked at 1,045-1,069 MiB; 18 MB each with no kept index, at 915-923 MiB but
# 15-20% slower (more parses, every index built twice); INDEXED_SHARE below gave 981-1,002 MiB.
SHARDED_TREE_BUDGET = 40_000_000
# The share of a budget (the first trees kept) whose trees keep their index until their rules
# run; the rest drop it (ProjectModule.drop_index) and build it again then, in about a sixth
# of a parse's time. On torch's source (two processes): the main process held 938-949 MiB
# after lowering with every index kept, 805-814 MiB with 0.35 of them; 0.35 and 0.5 gave the
# same peak (it comes later, in the first per-file checks), so the cheaper one.
INDEXED_SHARE = 0.5

# With automatic garbage collection off (cli.run), a collection after this many characters of
# source have had their trees released. Indexing leaves no cycle that reaches a tree (tested),
# but a cycle made elsewhere would keep one alive until a collection: this bounds the cost.
COLLECT_AFTER = 8_000_000


class _ReleasedTrees:
    """Counts released trees and collects them where automatic collection is off. The CLI turns
    it off: collections that walked every kept tree again cost 10% of a cold run (1.6 s of
    15 s on a 315-file repository), and the trees kept within budget are never garbage."""

    def __init__(self) -> None:
        self.pending = 0

    def release(self, module: ProjectModule) -> None:
        module.release_tree()
        self.pending += len(module.source.text)
        if self.pending >= COLLECT_AFTER and not gc.isenabled():
            # Then freeze what survived (kept trees, IR, programs: alive until the run ends), so
            # the next collection walks only what was allocated since, not the whole heap again
            # (a full collection each time took 2 minutes of a 5-minute run on torch's source).
            gc.collect()
            gc.freeze()
            self.pending = 0


RELEASED = _ReleasedTrees()


class TreeBudget:
    """Keep a file's tree after lowering, within budget: the per-file rules will want it, or
    another file's rules may ask it for a summary (project/summaries.py)."""

    def __init__(self, limit: int | None = None, keep_indexes: bool = False) -> None:
        self.limit = TREE_BUDGET if limit is None else limit
        # The modules live on to the next run (the language server: ProjectIndex.lives_on), whose
        # rules look into the same modules again: a kept tree keeps its index (and positions).
        self.keep_indexes = keep_indexes
        self.indexed_limit = int(self.limit * INDEXED_SHARE)
        self.kept = 0
        self._kept: set = set()  # paths of the trees kept within budget

    @classmethod
    def share(cls, processes: int) -> TreeBudget:
        """One process's part of a sharded run's budget."""
        return cls(SHARDED_TREE_BUDGET // processes)

    def after_indexing(self, module: ProjectModule) -> None:
        if not module.has_tree:
            return
        if self.kept + len(module.source.text) <= self.limit:
            self.kept += len(module.source.text)
            self._kept.add(module.path)
            if self.kept > self.indexed_limit and not self.keep_indexes:
                module.drop_index()
        else:
            RELEASED.release(module)

    def after_checking(self, module: ProjectModule) -> None:
        # A kept tree stays until the run ends: a later file's rules may look into this module
        # (where a function is called from), and dropping it would mean parsing it again. A tree
        # parsed again for this check is dropped, which is what bounds memory on large projects.
        if module.has_tree and module.path not in self._kept:
            RELEASED.release(module)
        elif module.has_tree:
            # What its rules built on the tree (flows, op matches, memo tables) is larger than
            # the tree: another file's rules rarely look into it, and rebuild what they need.
            if self.keep_indexes and module._index is not None:
                module.index.forget_derived()
            else:
                module.drop_index()
