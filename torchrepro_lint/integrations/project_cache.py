"""Per-process caches for integrations that see one file at a time: the flake8 plugin, editors.

flake8 calls a plugin once per file, and an editor once per pause in typing, but the program
rules need the whole project: which modules are entry points, what they import, what runs where.
`ProjectCache.findings_for(filename, text)` finds the file's project (the nearest directory with a
pyproject.toml or a VCS root), lints it as `torchrepro-lint check ROOT` would, with `text` in place
of the file's content on disk, and returns the findings in that one file.

The persistent cache of `torchrepro-lint check` (`.torchrepro_lint_cache/` at the project root)
comes first: a new flake8 process (an editor runs one per save) replays an unchanged project
from it, or re-analyses with every unchanged module's IR and results taken from it. Where that
directory cannot be used, or with `ProjectCache(persistent=False)`, the process keeps its own:


- every parsed module is kept, keyed by its resolved path, and reused while its text is the same
  (the text itself is re-read only when the file's mtime or size changes), so an edit re-parses
  one module, not the project;
- the last whole-project result of each project is kept, keyed by the project's files and their
  mtimes and sizes, so a flake8 run over a repository analyses it once per process, not once per
  file.
"""

from __future__ import annotations

import gc
import logging
import os
import threading
from dataclasses import dataclass, replace
from pathlib import Path

from torchrepro_lint.pipeline.cache import DEFAULT_DIRECTORY, Cache, config_fingerprint, replay, run_key
from torchrepro_lint.config import Config, installed_torch_version, load_config
from torchrepro_lint.pipeline.discovery import PYTHON_SUFFIXES, _is_virtualenv, is_excluded
from torchrepro_lint.pipeline.engine import lint_sources
from torchrepro_lint.findings import Finding, LintResult
from torchrepro_lint.integrations.project_root import VCS_MARKERS, find_project  # noqa: F401  (here as before)
from torchrepro_lint.project.index import ProjectIndex
from torchrepro_lint.project.module_finder import module_identity
from torchrepro_lint.project.modules import ProjectModule
from torchrepro_lint.parsing.source import ParseFailure, SourceError, SourceFile, read_source

LOG = logging.getLogger(__name__)
# What flake8 (and editors piping a buffer) call a file that has no path.
STDIN_NAMES = frozenset({"", "-", "stdin", "<stdin>"})

Stat = tuple  # (mtime_ns, size)
MODULE_VERSIONS = 2


def _stat(path: Path) -> Stat | None:
    try:
        info = os.stat(path)
    except OSError:
        return None
    return (info.st_mtime_ns, info.st_size)


def _normalized(text: str) -> str:
    """flake8 reads files with universal newlines; the engine keeps them as they are."""
    return text.replace("\r\n", "\n").replace("\r", "\n") if "\r" in text else text


def _display(path: Path, cwd: Path) -> Path:
    """How the CLI run from `cwd` names a file: relative below the working directory."""
    try:
        return path.relative_to(cwd)
    except ValueError:
        return path


@dataclass
class _Parsed:
    key: tuple  # (display path, helpers, module identity): what the module object depends on
    text: str
    module: ProjectModule | None
    error: BaseException | None  # a LibCST failure, raised again on every use


@dataclass
class _Listing:
    dirs: dict  # Path -> mtime_ns of every directory walked (a new or removed file changes it)
    files: list  # the Python files `torchrepro-lint check ROOT` would lint, resolved
    members: frozenset


@dataclass
class _Analysis:
    key: tuple
    dependencies: dict  # Path -> Stat of modules loaded on demand (not among the listed files)
    findings: dict  # resolved Path -> [Finding]
    errors: list


@dataclass(eq=False)
class _CachingIndex(ProjectIndex):
    """A ProjectIndex that takes modules parsed in earlier runs from the cache."""

    cache: ProjectCache | None = None

    def add(self, source: SourceFile, *, linted: bool = True) -> ProjectModule:
        if self.cache is None:
            return super().add(source, linted=linted)
        return self.cache._module(self, source, linted)


class ProjectCache:
    """Everything one process remembers about the projects it has linted. Thread-safe."""

    def __init__(self, persistent: bool = True) -> None:
        self.persistent = persistent  # use the CLI's on-disk cache where the project has one
        self._lock = threading.RLock()
        self._texts: dict[Path, tuple[Stat, str]] = {}
        self._parsed: dict[Path, list[_Parsed]] = {}  # per file: its last versions, newest first
        self._configs: dict[Path, tuple[Stat | None, Config]] = {}
        self._listings: dict[Path, tuple[tuple, _Listing]] = {}
        self._analyses: dict[Path, _Analysis] = {}
        self.parses = 0  # modules parsed (for tests and debugging)
        self.analyses = 0  # whole-project analyses run

    def clear(self) -> None:
        with self._lock:
            self.__init__(self.persistent)

    # -- the entry point -------------------------------------------------------------------
    def findings_for(self, filename: str, text: str) -> tuple[list[Finding], list[str]]:
        """(findings in `filename`, whose content is `text`; error lines of the run).

        Raises ConfigError for a broken `[tool.torchrepro-lint]`.
        """
        with self._lock:
            if filename in STDIN_NAMES:
                # A buffer without a path: only the buffer itself, configured from the working directory.
                return self._single(Path(filename or "stdin"), text, load_config([]))
            path = Path(filename).resolve()
            root, pyproject = find_project(path)
            if root is None:  # no project around it: what `torchrepro-lint check FILE` does
                return self._single(_display(path, Path.cwd().resolve()), text, load_config([path]))
            return self._in_project(path, text, root, pyproject)

    def _single(self, display: Path, text: str, config: Config) -> tuple[list[Finding], list[str]]:
        result = lint_sources([(display, text)], config, make_index=self._index_factory([]))
        return [f for f in result.findings if f.path == display.as_posix()], result.errors

    def _in_project(self, path: Path, text: str, root: Path, pyproject: Path | None):
        config, config_key = self._config(root, pyproject)
        listing = self._listing(root, config, config_key)
        cwd = Path.cwd().resolve()
        disk = self._disk_text(path)
        override = None if disk is not None and _normalized(disk) == _normalized(text) else text
        # While the file is one of the project's and unchanged, every file of the project shares
        # one analysis: a flake8 run over the repository computes it once.
        extra = None if path in listing.members and override is None else (path, override)
        key = (config_key, cwd, tuple((f, _stat(f)) for f in listing.files), extra)
        analysis = self._analyses.get(root)
        if analysis is None or analysis.key != key or any(_stat(p) != s for p, s in analysis.dependencies.items()):
            analysis = self._analyse(key, config, listing, path, override if override is not None else disk, cwd)
            self._analyses[root] = analysis
        return analysis.findings.get(path, []), analysis.errors

    # -- pieces ----------------------------------------------------------------------------
    def _config(self, root: Path, pyproject: Path | None) -> tuple[Config, tuple]:
        source = pyproject or root
        stat = _stat(pyproject) if pyproject else None
        cached = self._configs.get(source)
        if cached is None or cached[0] != stat:
            if pyproject is not None:
                config = load_config([root], pyproject)
            else:
                config = Config(root=root, torch_version=installed_torch_version())
            cached = (stat, config)
            self._configs[source] = cached
        return cached[1], (source, stat)

    def _listing(self, root: Path, config: Config, config_key: tuple) -> _Listing:
        cached = self._listings.get(root)
        if cached is not None and cached[0] == config_key:
            listing = cached[1]
            if all(_mtime(d) == m for d, m in listing.dirs.items()):
                return listing
        listing = list_project(root, config)
        self._listings[root] = (config_key, listing)
        return listing

    def _disk_text(self, path: Path) -> str | None:
        stat = _stat(path)
        if stat is None:
            self._texts.pop(path, None)
            return None
        cached = self._texts.get(path)
        if cached is not None and cached[0] == stat:
            return cached[1]
        try:
            text = read_source(path)
        except SourceError:
            return None  # the engine reads it again and reports why
        self._texts[path] = (stat, text)
        return text

    def _index_factory(self, holder: list):
        def make_index(root: Path, helpers: dict) -> ProjectIndex:
            index = _CachingIndex(root, helpers, cache=self)
            holder.append(index)
            return index

        return make_index

    def _analyse(self, key, config: Config, listing: _Listing, path: Path, text: str | None, cwd: Path) -> _Analysis:
        self.analyses += 1
        files = list(listing.files) if path in listing.members else [*listing.files, path]
        cache = self._persistent_cache(config)
        if cache is not None:
            result, dependencies = self._analyse_with(cache, config, files, path, key[-1], cwd)
        else:
            sources = [(_display(f, cwd), text if f == path else self._disk_text(f)) for f in files]
            holder: list[ProjectIndex] = []
            result = lint_sources(sources, config, make_index=self._index_factory(holder))
            dependencies = {m.path: _stat(m.path) for m in holder[0].modules.values() if not m.linted}
        resolved: dict[str, Path] = {}
        findings: dict[Path, list[Finding]] = {}
        for finding in result.findings:
            if finding.path not in resolved:
                resolved[finding.path] = Path(finding.path).resolve()
            findings.setdefault(resolved[finding.path], []).append(finding)
        return _Analysis(key, dependencies, findings, result.errors)

    def _persistent_cache(self, config: Config) -> Cache | None:
        if not self.persistent:
            return None
        cache = Cache(config.root / DEFAULT_DIRECTORY, config_fingerprint(config), _log_once)
        return cache if cache.usable else None

    def _analyse_with(self, cache: Cache, config: Config, files: list[Path], path: Path, extra, cwd: Path):
        """The analysis as `torchrepro-lint check` runs it, on its on-disk cache: replayed when
        nothing changed, else only what changed is parsed. `extra` is (path, unsaved text) or None."""
        override = extra[1] if extra is not None else None
        sources = [(_display(f, cwd), override if f == path and override is not None else None) for f in files]
        if override is None:
            found = replay(cache, run_key(config_fingerprint(config), [display for display, _ in sources], []))
            if found is not None:
                return LintResult(found[0], found[1], len(files)), {}
        _few_collections()
        holder: list[ProjectIndex] = []

        def make_index(root: Path, helpers: dict) -> ProjectIndex:
            holder.append(ProjectIndex(root, helpers))  # a plain index: the engine's staged, cached run
            return holder[-1]

        result = lint_sources(sources, config, make_index=make_index, cache=cache)
        return result, {m.path: _stat(m.path) for m in holder[0].modules.values() if not m.linted}

    def _module(self, index: ProjectIndex, source: SourceFile, linted: bool) -> ProjectModule:
        path = source.path.resolve()
        key = (source.path.as_posix(), repr(sorted(index.helpers.items())), module_identity(path))
        versions = self._parsed.setdefault(path, [])
        entry = next((v for v in versions if v.key == key and v.text == source.text), None)
        if entry is None:
            self.parses += 1
            try:
                module = ProjectIndex.add(index, source, linted=linted)
            except ParseFailure as exc:
                self._remember(versions, _Parsed(key, source.text, None, exc))
                raise
            self._remember(versions, _Parsed(key, source.text, module, None))
            return module
        if versions[0] is not entry:
            versions.remove(entry)
            versions.insert(0, entry)
        if entry.error is not None:
            raise entry.error.with_traceback(None)
        module = entry.module if entry.module.linted == linted else replace(entry.module, linted=linted)
        index.modules[path] = module
        return module

    @staticmethod
    def _remember(versions: list[_Parsed], entry: _Parsed) -> None:
        # Two versions: an editor's unsaved buffer and the file on disk, used by turns.
        versions.insert(0, entry)
        del versions[MODULE_VERSIONS:]


def _log_once(message: str) -> None:
    if message not in _LOGGED:
        _LOGGED.add(message)
        LOG.warning("torchrepro-lint: %s", message)


_LOGGED: set[str] = set()


def _few_collections() -> None:
    """The CLI's rare collections (memory.RUN_GC_THRESHOLDS: full collections re-walked every tree,
    doubling the time), in a flake8 process still on Python's defaults. Not restored: putting
    them back triggers the very collection over everything that this avoids."""
    from torchrepro_lint.memory import RUN_GC_THRESHOLDS

    if gc.get_threshold() == (700, 10, 10):
        gc.set_threshold(*RUN_GC_THRESHOLDS)


def _mtime(path: Path) -> int | None:
    try:
        return os.stat(path).st_mtime_ns
    except OSError:
        return None


def list_project(root: Path, config: Config) -> _Listing:
    """The files `discovery.discover([root], config)` finds, and the directories it walked."""
    dirs: dict[Path, int | None] = {}
    files: list[Path] = []
    for directory, subdirs, names in os.walk(root):
        base = Path(directory)
        dirs[base] = _mtime(base)
        subdirs[:] = sorted(
            d for d in subdirs
            if not d.startswith(".") and not _is_virtualenv(base / d) and not is_excluded(base / d, config)
        )
        for name in sorted(names):
            candidate = base / name
            if name.endswith(PYTHON_SUFFIXES) and not is_excluded(candidate, config):
                files.append(candidate)
    files.sort(key=lambda p: p.as_posix())
    return _Listing(dirs, files, frozenset(files))


# One cache per process: flake8 workers and editor language servers each keep their own.
CACHE = ProjectCache()
