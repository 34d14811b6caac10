"""The values that cached results are checked against, remembered with what they were
computed from: within a run, and from one run to the next of a long-lived process.

A cached result holds the value of everything it read (staging.Digests): a module's IR or
text, a summary, which modules mention a word, which candidate files of its missing imports
exist. The language server runs the engine on every edit and checked about 6,400 such reads each
time, most of them the same (70 ms of an edit on pytorch-image-models). Here a value is kept
with its basis, and given again while the basis is the same:

- a read of one module (its IR, text, display path, a summary of it): the module object. The
  server's runs share a module object while its text, place and IR are the same
  (ProjectIndex.reusable), so an edit leaves every other module's values valid.
- `mentions` of a word: the project's modules (a ModuleSet); after an edit, only the modules
  that are other objects are asked again whether they contain the word.
- missing imports, and which modules the project imports (ProjectIndex.imported_by_project): the
  project's module paths and the server's set of absent files, which it replaces whenever files
  may have appeared (server/session.py).
"""

from __future__ import annotations

from typing import Callable

from torchrepro_lint.analysis.text_memo import contains


class ModuleSet:
    """The project's modules at one moment of a run (the project only adds modules during a run)."""

    def __init__(self, modules: dict, load_errors: dict, absent) -> None:
        self.modules = dict(modules)
        self.failed = frozenset(load_errors)
        self.absent = absent  # the server's set of files known missing (None in the CLI)


class ReadValues:
    """Read -> (basis, value); `previous`: the last run's, in a long-lived process."""

    def __init__(self, previous: ReadValues | None = None) -> None:
        self.values: dict = {}
        self._previous: dict = previous.values if previous is not None else {}
        self._changes: dict = {}  # (id(old), id(new)) -> (old, new, changed module pairs or None)
        self._basis: tuple | None = None  # (project, its generation, its load errors, ModuleSet)

    def basis(self, project) -> ModuleSet:
        """The project's modules now, one object while they do not change."""
        found = self._basis
        if found is None or found[0] is not project or found[1] != project.generation or found[2] != len(project.load_errors):
            basis = ModuleSet(project.modules, project.load_errors, project.absent)
            found = self._basis = (project, project.generation, len(project.load_errors), basis)
        return found[3]

    def of_module(self, read, module, compute: Callable[[], str | None]):
        """A read of `module` alone."""
        found = self._found(read)
        if found is None or found[0] is not module:
            found = (module, compute())
        self.values[read] = found
        return found[1]

    def mentions(self, read, word: str, basis: ModuleSet, compute: Callable[[], str]):
        found = self._found(read)
        if found is None or not self._same_mentions(found[0], basis, word):
            found = (basis, compute())
        self.values[read] = found
        return found[1]

    def missing(self, read, basis: ModuleSet, compute: Callable[[], str]):
        found = self._found(read)
        if found is None or not self._same_files(found[0], basis):
            found = (basis, compute())
        self.values[read] = found
        return found[1]

    def fact(self, name: str, basis: ModuleSet, unchanged: Callable):
        """A fact of the whole project kept with `keep`, while the same files exist and
        `unchanged(old, new)` holds for each module that is another object; else None."""
        found = self._found(name)
        if found is None or not self._same_files(found[0], basis):
            return None
        if not all(unchanged(old, new) for old, new in self._changed(found[0], basis)):
            return None
        self.values[name] = found
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

    def carried(self) -> ReadValues:
        """What the next run may start from: this run's values, nothing else."""
        kept = ReadValues()
        kept.values = self.values
        return kept
