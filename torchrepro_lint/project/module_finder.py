"""Finding the module an import names, the way Python finds it.

`python train.py` puts the script's directory on sys.path, packages are directories with
`__init__.py`, and `src/` layouts (and sub-projects with their own setup.py or pyproject.toml)
are searched too. A module that is imported but not among the linted files is loaded on demand
from disk, so a pre-commit run on one file still sees the helpers it calls.

`ModuleFinder` holds ProjectIndex's methods for this (ProjectIndex derives from it): they read
and fill the index's modules, load errors and resolution memos. The functions before it work
from paths alone.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from torchrepro_lint.parsing.source import ParseFailure, SourceError, SourceFile, read_source
from torchrepro_lint.project.modules import ProjectModule
from torchrepro_lint.project.reads import note_read, record


@lru_cache(maxsize=4096)
def _is_package_dir(directory: Path) -> bool:
    return (directory / "__init__.py").is_file()


@lru_cache(maxsize=65536)
def module_identity(path: Path) -> tuple[str, str | None, Path]:
    """(dotted name, package, search root) of a file from the `__init__.py` chain above it.
    Remembered until forget_directories: the language server asked it of every file per edit."""
    if path.suffix == ".ipynb":
        # Jupyter runs a notebook as `__main__` with its own directory on sys.path, in no package;
        # the name is one no import statement can spell.
        return f"<{path.name}>", None, path.parent
    parts = [] if path.name == "__init__.py" else [path.stem]
    directory = path.parent
    while _is_package_dir(directory):
        parts.insert(0, directory.name)
        directory = directory.parent
    name = ".".join(parts)
    if path.name == "__init__.py":
        package = name
    else:
        package = ".".join(parts[:-1]) if len(parts) > 1 else None
    return name, package, directory


def _same_imports(old: ProjectModule, new: ProjectModule) -> bool:
    return old.linted == new.linted and old.ir.imported_modules == new.ir.imported_modules


@lru_cache(maxsize=4096)
def _path_of(text: str) -> Path:
    return Path(text)


@lru_cache(maxsize=4096)
def _search_roots(search_root: Path, root: Path) -> tuple[Path, ...]:
    """Where an import from a module under `search_root` looks, in order (built once per pair:
    resolution asks for them thousands of times a run): its own root, the root of the nearest
    sub-project around it (a directory below the project's root with its own setup.py or
    pyproject.toml, installed on its own: DeepSpeed-Chat's `dschat` inside DeepSpeedExamples),
    and the project's root."""
    nested = _subproject_root(search_root, root)
    nested_roots = [nested, nested / "src"] if nested is not None else []
    return tuple(dict.fromkeys([search_root, *nested_roots, root, root / "src"]))


PROJECT_MARKERS = ("setup.py", "pyproject.toml", "setup.cfg")


def _subproject_root(directory: Path, root: Path) -> Path | None:
    if directory == root or not directory.is_relative_to(root):
        return None
    for candidate in (directory, *directory.parents):
        if candidate == root:
            return None
        if any((candidate / marker).is_file() for marker in PROJECT_MARKERS):
            return candidate
    return None


@lru_cache(maxsize=65536)
def _candidate_files(root: Path, dotted_name: str) -> tuple[Path, Path]:
    """`root/a/b.py` and `root/a/b/__init__.py` for `a.b`: the same Path objects each time, whose
    hashes are computed once (resolution looks up thousands of them in every run)."""
    relative = Path(*dotted_name.split("."))
    return root / relative.with_suffix(".py"), root / relative / "__init__.py"


# The set of absent files the directories were last looked at with (ProjectIndex.absent).
_DIRECTORIES_SEEN = [None]


def forget_directories(absent: set | None) -> None:
    """Look at directories again: in every new project of a process, except in the language
    server's runs between two moments files may have come (it replaces its set of absent files
    then; each edit's run would otherwise walk every file's `__init__.py` chain again)."""
    if absent is None or absent is not _DIRECTORIES_SEEN[0]:
        _is_package_dir.cache_clear()
        module_identity.cache_clear()
        _DIRECTORIES_SEEN[0] = absent


class ModuleFinder:
    """ProjectIndex's import resolution: the module a dotted name is for an importer, the modules
    an import statement brings in, the files that would answer a missing import, and which
    modules the linted ones import."""

    def search_roots(self, importer: ProjectModule) -> list[Path]:
        return self._search_roots(importer.search_root)

    def _search_roots(self, search_root: Path) -> tuple[Path, ...]:
        return _search_roots(search_root, self.root)

    def module_named(self, dotted_name: str, importer: ProjectModule) -> ProjectModule | None:
        if not dotted_name:
            return None
        key = (dotted_name, id(importer.search_root))  # one object per root (add): no Path hashing
        if key not in self._named:
            self._named[key] = self._find_module(dotted_name, importer)
        module, broken = self._named[key]
        for path in broken:  # a result built on this import changes when the file is fixed
            note_read("content", path)
        if module is None:  # ... or when a file by that name appears
            note_read("missing", (dotted_name, str(importer.search_root)))
        return module

    def files_named(self, dotted_name: str, search_root: str) -> tuple[str, ...]:
        """The candidate files for `dotted_name` that exist, as a module of the project or on disk:
        the value of a ("missing", (dotted_name, search_root)) read, which changes when one of
        them appears."""
        key = (dotted_name, search_root)
        found = self._files_named.get(key)
        if found is None:
            existing = []
            for root in self._search_roots(_path_of(search_root)):
                for candidate in _candidate_files(root, dotted_name):
                    if candidate in self.modules or candidate in self.load_errors or self._on_disk(candidate):
                        existing.append(str(candidate))
            found = self._files_named[key] = tuple(existing)
        return found

    def modules_imported(self, importer: ProjectModule, ref: int, names: tuple[str, ...]) -> tuple:
        """The project modules that the import statement `ref` of `importer` (naming `names`, in
        the order Python runs them) brings in: every program walks the same imports again."""
        key = (id(importer), ref)
        found = self._imported.get(key)
        if found is not None:
            for path in found[1]:  # as module_named does on each call
                note_read("content", path)
            return found[0]
        carried = self._carried_import(key, importer)
        if carried is not None:
            return carried
        with record() as reads:
            modules = [self.module_named(name, importer) for name in names]
        for kind, read in reads:
            note_read(kind, read)
        broken = tuple(sorted(path for kind, path in reads if kind == "content" and path in self.load_errors))
        found = self._imported[key] = (tuple(dict.fromkeys(m for m in modules if m is not None)), broken)
        if self.lives_on:
            self._import_reads[key] = (importer, tuple(reads))
        return found[0]

    def imports_kept(self) -> tuple | None:
        """This run's modules_imported answers, for the next run of a long-lived process
        (`imports_before`): valid there while no file may have come or gone (the same `absent`
        set), the project has the same files and the same ones fail to load."""
        if not self.lives_on or self.absent is None:
            return None
        answers = {
            key: (importer, tuple(m.path for m in self._imported[key][0]), self._imported[key][1], reads)
            for key, (importer, reads) in self._import_reads.items()
            if key in self._imported
        }
        paths = self._paths_resolved_in if self._paths_resolved_in is not None else frozenset(self.modules)
        return (self.absent, paths, frozenset(self.load_errors), answers)

    def _carried_import(self, key: tuple, importer: ProjectModule) -> tuple | None:
        """The previous run's answer for this import statement, on this run's modules, with the
        reads its resolution made; None where it has none that holds. (Resolution depends only
        on which files exist and which fail to load: an answer found in the run before holds
        while neither changed. About 300 import statements an edit of a timm model file.)"""
        carried = self._imports_carried
        if carried is None:
            carried = self._imports_carried = self._valid_imports_before()
        found = carried.get(key)
        if found is None or found[0] is not importer:
            return None
        _, paths, broken, reads = found
        modules = []
        for path in paths:
            module = self.modules.get(path)
            if module is None:
                return None  # (not loaded yet in this run: resolved the usual way)
            modules.append(module)
        for kind, read in reads:
            note_read(kind, read)
        self._imported[key] = (tuple(modules), broken)
        self._import_reads[key] = (importer, reads)
        return self._imported[key][0]

    def _valid_imports_before(self) -> dict:
        """The previous run's answers where the files are the same: asked at the first import a
        program walks (every linted file is indexed by then), and again after a module was
        loaded from disk (ProjectIndex._forget_resolution), which ends the carrying."""
        paths = frozenset(self.modules)
        if self._paths_resolved_in is None:
            self._paths_resolved_in = paths
        before = self.imports_before
        if before is None or self.absent is None or before[0] is not self.absent:
            return {}
        _, paths_then, load_errors, answers = before
        if paths_then != paths or load_errors != frozenset(self.load_errors):
            return {}
        return answers

    def _find_module(self, dotted_name: str, importer: ProjectModule) -> tuple[ProjectModule | None, tuple]:
        """(the module, the candidate files passed over because they do not load)."""
        broken = []
        for root in self.search_roots(importer):
            for candidate in _candidate_files(root, dotted_name):
                module = self.modules.get(candidate)
                if module is None and candidate not in self.load_errors:
                    module = self._load_from_disk(candidate)
                if module is not None:
                    return module, tuple(broken)
                if candidate in self.load_errors:
                    broken.append(candidate)
        return None, tuple(broken)

    def load_path(self, path: Path) -> ProjectModule | None:
        """The module at a resolved path, loaded from disk if need be."""
        found = self.modules.get(path)
        if found is None and path not in self.load_errors:
            found = self._load_from_disk(path)
        return found

    def _on_disk(self, candidate: Path) -> bool:
        """Whether an import candidate is a file of this project on disk."""
        absent = self.absent
        if absent is not None and candidate in absent:
            self.missing_files.add(candidate)
            return False
        if not candidate.is_file():
            self.missing_files.add(candidate)
            if absent is not None:
                absent.add(candidate)
            return False
        return candidate.is_relative_to(self.root)

    def _load_from_disk(self, candidate: Path) -> ProjectModule | None:
        try:
            if not self._on_disk(candidate):
                return None
            module = self.add(SourceFile(candidate, read_source(candidate)), linted=False)
        except (SourceError, ParseFailure) as exc:
            self.load_errors[candidate] = str(exc)
            return None
        # Only its IR is read from now on (no rule runs on a file not linted): keeping the tree
        # kept every module imported from outside the linted paths alive for the whole run,
        # outside any tree budget (1,174 trees when linting torch/_inductor alone).
        module.release_tree()
        return module

    # -- the import graph --------------------------------------------------------------
    def imported_by_project(self) -> set[Path]:
        """Paths of modules some linted module imports (they are libraries, not scripts)."""
        # The language server's runs take the last run's answer while no import changed
        # (pipeline/read_values.py), and load again what finding it loaded from disk.
        reads = getattr(self.lowered, "reads", None)
        if reads is None:
            return self._imported_by_project()
        basis = reads.basis(self)
        found = reads.fact("imported by project", basis, _same_imports)
        if found is not None:
            imported, loaded = found
            for path in loaded:
                self.load_path(path)
            return imported
        before = len(self.modules), len(self.load_errors)
        imported = self._imported_by_project()
        loaded = [*list(self.modules)[before[0]:], *list(self.load_errors)[before[1]:]]
        reads.keep("imported by project", basis, (imported, loaded))
        return imported

    def _imported_by_project(self) -> set[Path]:
        imported: set[Path] = set()
        for module in list(self.linted_modules):
            for name, names in module.ir.imported_modules:
                target = self.module_named(name, module)
                if target is not None:
                    imported.add(target.path)
                for member in names:
                    sub = self.module_named(f"{name}.{member}", module)
                    if sub is not None:
                        imported.add(sub.path)
        return imported
