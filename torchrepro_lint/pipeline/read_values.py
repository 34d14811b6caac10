"""The values that cached results are checked against, remembered with what they were
computed from: within a run, and from one run to the next of a long-lived process.

A cached result holds the value of everything it read (digests.Digests): a module's IR or
text, a summary, which modules mention a word, which candidate files of its missing imports
exist. The language server runs the engine on every edit and checked about 6,400 such reads each
time, most of them the same (70 ms of an edit on pytorch-image-models). Here a value is kept
with its basis, and given again while the basis is the same:

- a read of one module (its IR or a part of it, text, display path, a summary of it): the
  module object. The server's runs share a module object while its text, place and IR are the
  same (ProjectIndex.reusable), so an edit leaves every other module's values valid.
- `mentions` of a word: the project's modules (a ModuleSet); after an edit, only the modules
  that are other objects are asked again whether they contain the word.
- missing imports, and which modules the project imports (ProjectIndex.imported_by_project): the
  project's module paths and the server's set of absent files, which it replaces whenever files
  may have appeared (server/session.py).

A cached result that matched in the last run is then checked again only for its reads that are
not of one module, and for those of modules that are other objects now (`all_match`); so is one
whose values the last run found (`found_now`), and a program run again with the same reads takes
those values but for the changed modules' (`found_again`). The interpreter's recordings of the
last run are taken again where their reads still hold (`still_hold`,
ProjectIndex.adopt_recordings): a read of one part of a changed module's IR holds where that
part is the same code (`_same_part`: a function that an edit above it only shifted).
"""

from __future__ import annotations

from typing import Callable

from torchrepro_lint.analysis.text_memo import contains
from torchrepro_lint.project import ir
from torchrepro_lint.project.extract.function_reuse import unshifted
from torchrepro_lint.project.reads import IR_CODE, IR_CODES, IR_FUNCTION, IR_FUNCTIONS, IR_TOP


class ModuleSet:
    """The project's modules at one moment of a run (the project only adds modules during a run)."""

    def __init__(self, modules: dict, load_errors: dict, absent) -> None:
        self.modules = dict(modules)
        self.failed = frozenset(load_errors)
        self.absent = absent  # the server's set of files known missing (None in the CLI)


# Reads whose value depends on one module alone (digests.Digests), and of those the ones keyed
# by (module path, what of it)
_KEYED_READS = frozenset({"summary", IR_FUNCTION, IR_FUNCTIONS, IR_CODE, IR_CODES})
MODULE_READS = frozenset({"ir", "content", "reported", "display", IR_TOP}) | _KEYED_READS
_PART_READS = frozenset({IR_TOP, IR_FUNCTION, IR_CODE})  # a part of a module's IR (still_hold)


def _module_path(read):
    return read[1][0] if read[0] in _KEYED_READS else read[1]


def _matched_entry(reads) -> tuple:
    """What ReadValues.matched keeps of a result's (read, value) list: (the list, its items
    that read one module, by the module's path, its other items)."""
    by_path: dict = {}
    for item in reads:
        if item[0][0] in MODULE_READS:
            by_path.setdefault(_module_path(item[0]), []).append(item)
    return reads, by_path, tuple(item for item in reads if item[0][0] not in MODULE_READS)


class ReadValues:
    """Read -> (basis, value); `previous`: the last run's, in a long-lived process."""

    def __init__(self, previous: ReadValues | None = None, *, remember: bool = True) -> None:
        # Without `remember` (the CLI: one run per process) every value is computed when asked,
        # as before this memo: on torch's source it would hold ~100,000 reads for nothing.
        self.remember = remember
        self.values: dict = {}
        self._previous: dict = previous.values if previous is not None else {}
        # Cached results whose reads all matched: id(reads) -> (reads, their reads of one module
        # by its path, their other reads); and the modules they were checked against.
        self.matched: dict = {}
        self._previous_matched: dict = previous.matched if previous is not None else {}
        # The project's modules when the last run last looked (its last ModuleSet)
        self._previous_basis: ModuleSet | None = previous.basis_then if previous is not None else None
        self._previous_modules: dict = self._previous_basis.modules if self._previous_basis is not None else {}
        self.basis_then: ModuleSet | None = None
        self._dirty: tuple | None = None  # (basis, paths whose module is not the last run's)
        self._changes: dict = {}  # (id(old), id(new)) -> (old, new, changed module pairs or None)
        self._basis: tuple | None = None  # (project, its generation, its load errors, ModuleSet)
        self._same_tops: dict = {}  # (id(old IR), id(new IR)) -> same top level and table (_same_part)
        # id(a recording's reads) -> (them, split by kind: _split_reads); and the last run's
        self._splits: dict = {}
        self._previous_splits: dict = previous._splits if previous is not None else {}

    def basis(self, project) -> ModuleSet:
        """The project's modules now, one object while they do not change."""
        found = self._basis
        if found is None or found[0] is not project or found[1] != project.generation or found[2] != len(project.load_errors):
            basis = ModuleSet(project.modules, project.load_errors, project.absent)
            found = self._basis = (project, project.generation, len(project.load_errors), basis)
        return found[3]

    def of_module(self, read, module, compute: Callable[[], str | None]):
        """A read of `module` alone."""
        if not self.remember:
            return compute()
        found = self._found(read)
        if found is None or found[0] is not module:
            found = (module, compute())
        self.values[read] = found
        return found[1]

    def valued(self, reads, value_of: Callable) -> list:
        """[(read, its value now)]. A read of one module whose value this run has found already
        is given it again without `value_of`: a path's module is one object for the whole run.
        (The 12 programs an edit of a timm model file runs again read about 470 values each,
        mostly the same ones.)"""
        if not self.remember:
            return [(read, value_of(read)) for read in reads]
        found_now = self.values
        out = []
        for read in reads:
            found = found_now.get(read) if read[0] in MODULE_READS else None
            out.append((read, found[1] if found is not None else value_of(read)))
        return out

    def mentions(self, read, word: str, basis: ModuleSet, compute: Callable[[], str]):
        if not self.remember:
            return compute()
        found = self._found(read)
        value = found[1] if found is not None and self._same_mentions(found[0], basis, word) else compute()
        self.values[read] = (basis, value)  # (now the basis: an older one would keep its modules alive)
        return value

    def missing(self, read, basis: ModuleSet, compute: Callable[[], str]):
        if not self.remember:
            return compute()
        found = self._found(read)
        value = found[1] if found is not None and self._same_files(found[0], basis) else compute()
        self.values[read] = (basis, value)
        return value

    def fact(self, name: str, basis: ModuleSet, unchanged: Callable):
        """A fact of the whole project kept with `keep`, while the same files exist and
        `unchanged(old, new)` holds for each module that is another object; else None."""
        found = self._found(name)
        if found is None or not self._same_files(found[0], basis):
            return None
        if not all(unchanged(old, new) for old, new in self._changed(found[0], basis)):
            return None
        self.values[name] = (basis, found[1])
        return found[1]

    def keep(self, name: str, basis: ModuleSet, value) -> None:
        self.values[name] = (basis, value)

    def _found(self, read):
        found = self.values.get(read)
        return found if found is not None else self._previous.get(read)

    def _same_mentions(self, old: ModuleSet, new: ModuleSet, word: str) -> bool:
        changed = self._changed(old, new)
        return changed is not None and all(
            contains(before.source.text, word) == contains(after.source.text, word) for before, after in changed
        )

    def _same_files(self, old: ModuleSet, new: ModuleSet) -> bool:
        return old.absent is not None and old.absent is new.absent and old.failed == new.failed and self._changed(old, new) is not None

    def _changed(self, old: ModuleSet, new: ModuleSet):
        """The (old, new) module pairs that differ at the same path; None if the paths differ."""
        if old is new:
            return ()
        key = (id(old), id(new))
        found = self._changes.get(key)
        if found is None:
            pairs = None
            if old.modules.keys() == new.modules.keys():
                pairs = [(m, new.modules[p]) for p, m in old.modules.items() if new.modules[p] is not m]
            found = self._changes[key] = (old, new, pairs)  # (holds both: ids are not reused)
        return found[2]

    def all_match(self, reads, value_of, project) -> bool:
        """Whether each (read, value) of a cached result still holds (`value_of(read)`: its
        value now). One that matched in the last run is checked again only for the reads that
        are not of one module, unless it read a module that is another object now."""
        if not self.remember:
            return all(value_of(read) == value for read, value in reads)
        basis = self.basis(project)  # (also what the next run compares its modules with)
        known = self.matched.get(id(reads)) or self._previous_matched.get(id(reads))
        if known is not None and known[0] is reads:
            dirty = self._dirty_paths(basis)
            if known[1].keys().isdisjoint(dirty):
                checked = known[2]
            else:  # (the reads of modules that are the same objects still hold; thousands for
                # a script's program, where picking out the edited module's by path was 4 ms.
                # The edited module's first: a result that read it most often fails there.)
                checked = [*(item for path in dirty for item in known[1].get(path, ())), *known[2]]
        else:
            checked = reads
        if not all(value_of(read) == value for read, value in checked):
            return False
        if known is None or known[0] is not reads:
            known = _matched_entry(reads)
        self.matched[id(reads)] = known
        return True

    def found_now(self, values) -> None:
        """`values` (a cached result's reads with their values) were all found in this run: the
        next run checks them as a result that matched in this one. A program run again on every
        edit of a module it imports was checked read by read, about 240 reads before the first
        of the edited module, each time."""
        if self.remember:
            self.matched[id(values)] = _matched_entry(values)

    def found_again(self, values, value_of, project) -> list | None:
        """The values, now, of the reads `values` holds, where those were found in the last run
        (ReadValues.found_now) or matched in it: a read of a module that is the same object keeps
        its value, the others are asked again. None where the last run did not see them."""
        if not self.remember:
            return None
        known = self._previous_matched.get(id(values))
        if known is None or known[0] is not values:
            return None
        dirty = self._dirty_paths(self.basis(project))
        by_path = dict(known[1])
        for path in dirty:
            items = by_path.get(path)
            if items is not None:
                by_path[path] = [(read, value_of(read)) for read, _ in items]
        others = tuple((read, value_of(read)) for read, _ in known[2])
        out = [item for items in by_path.values() for item in items]
        out += others
        self.matched[id(out)] = (out, by_path, others)  # (found_now, without splitting them again)
        return out

    def _dirty_paths(self, basis: ModuleSet) -> set:
        """The paths whose module is not the same object as at the end of the last run."""
        if self._dirty is None or self._dirty[0] is not basis:
            before, now = self._previous_modules, basis.modules
            dirty = {path for path, module in now.items() if before.get(path) is not module}
            dirty.update(path for path in before if path not in now)
            self._dirty = (basis, dirty)
        return self._dirty[1]

    def still_hold(self, reads, project) -> bool:
        """Whether reads made during the last run, whose values were not kept (an interpreter
        recording's), have the same values now: each module read is of the same module object
        (or of the same part of its IR: _same_part), the same files exist, and the modules that
        changed mention the words read as before."""
        before, now = self._previous_basis, self.basis(project)
        if before is None:
            return False
        dirty = self._dirty_paths(now)
        by_path, missing, words, other = self._split_reads(reads)
        if other:
            return False
        if not by_path.keys().isdisjoint(dirty):
            for path in dirty:
                for read in by_path.get(path, ()):
                    if not (read[0] in _PART_READS and self._same_part(before, now, read)):
                        return False
        if missing and not self._same_files(before, now):
            return False
        return all(self._same_mentions(before, now, word) for word in words)

    def _split_reads(self, reads) -> tuple:
        """(its reads of one module by path, whether it has "missing" reads, the words of its
        "mentions" reads, whether it has a read of another kind) of a recording's `reads` (a
        frozenset, the same object from run to run): a timm model-file edit checks about 200
        recordings, each a loop over hundreds of reads before."""
        found = self._splits.get(id(reads)) or self._previous_splits.get(id(reads))
        if found is None or found[0] is not reads:
            by_path: dict = {}
            missing, other = False, False
            words = []
            for read in reads:
                kind = read[0]
                if kind in MODULE_READS:
                    by_path.setdefault(_module_path(read), []).append(read)
                elif kind == "missing":
                    missing = True
                elif kind == "mentions":
                    words.append(read[1])
                else:
                    other = True
            found = (reads, by_path, missing, tuple(words), other)
        self._splits[id(reads)] = found  # (carried to the next run while used in this one)
        return found[1:]

    def _same_part(self, before: ModuleSet, now: ModuleSet, read) -> bool:
        """Whether a read of one part of a changed module's IR (its top level, one function) is
        of the same code now. An edit inside one function leaves the top level as it was (its
        refs come first) and shifts the refs of the functions below the edit, with their code
        unchanged (function_reuse.shifted): a recording that read only those still holds, and
        its sites there are moved onto the new refs (interpreter/moved.py), or it is dropped
        where one has no counterpart. (A training script's `train_one_epoch()`, called from the
        `main()` being edited; the import walk of a model file edited inside a model.)"""
        kind, key = read
        path = key if kind == IR_TOP else key[0]
        old, new = before.modules.get(path), now.modules.get(path)
        if old is None or new is None:
            return False
        old_ir, new_ir = old._ir, new._ir
        if kind == IR_TOP:
            memo_key = (id(old_ir), id(new_ir))
            found = self._same_tops.get(memo_key)
            if found is None:  # (both kept alive by the module sets, so the ids stay theirs)
                same = old_ir.top is new_ir.top or old_ir.top == new_ir.top
                found = self._same_tops[memo_key] = (
                    same and ir.ModuleTable.of(old_ir).parts() == ir.ModuleTable.of(new_ir).parts()
                )
            return found
        before_function, after = old_ir.functions.get(key[1]), new_ir.functions.get(key[1])
        if before_function is None or after is None:
            return before_function is after
        return before_function is after or unshifted(before_function) is unshifted(after)

    def carried(self) -> ReadValues:
        """What the next run may start from: this run's values and matches, nothing else."""
        kept = ReadValues()
        kept.values, kept.matched, kept._splits = self.values, self.matched, self._splits
        kept.basis_then = self._basis[3] if self._basis is not None else None
        return kept
